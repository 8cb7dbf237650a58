// Package apiserver is kelp's Kubernetes API server. A request passes, in
// this order: requestinfo.go, auth/ (authentication, impersonation),
// maxinflight.go (429 beyond the in-flight limits), auth/ (authorization),
// storageguard.go (writes refused while the disk is nearly full),
// negotiation.go (decoding), then for writes
// write.go/delete.go: the kind's strategy (registry/: defaults,
// preparation), admission/ (mutating), the strategy's validation
// (validation/), admission/ (validating), and finally storage/. Watch
// events come back out of the storage's watch cache through watch.go. The
// generic handlers name no kind: what differs by kind is in registry/.
package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"reflect"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/server/apiserver/admission"
	"github.com/kelp-project/kelp/server/apiserver/admission/policy"
	"github.com/kelp-project/kelp/server/apiserver/admission/webhook"
	"github.com/kelp-project/kelp/server/apiserver/allocator"
	"github.com/kelp-project/kelp/server/apiserver/apply"
	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/apiserver/openapi"
	"github.com/kelp-project/kelp/server/apiserver/registry"
	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// Config is what the API server needs from the process that hosts it.
type Config struct {
	Etcd           *clientv3.Client
	Authenticators []auth.Authenticator
	// Authorizer replaces the default chain: system:masters, the Node
	// authorizer, then RBAC (both over this server's watch caches).
	Authorizer auth.Authorizer
	// ServiceCIDR and NodePortRange feed the Service allocators.
	ServiceCIDR   string
	NodePortRange string
	// PublicAddress is advertised in discovery and in the kubernetes
	// Service's endpoints.
	PublicAddress string
	PublicPort    int
	// CompactionInterval is how often etcd history is compacted.
	CompactionInterval time.Duration
	// Default*TolerationSeconds bound how long new pods tolerate the
	// not-ready and unreachable taints (upstream: 300 each).
	DefaultNotReadyTolerationSeconds    int64
	DefaultUnreachableTolerationSeconds int64
	// KubeletClientCert is what the API server presents to kubelets when
	// it proxies pods/log, pods/exec and pods/attach.
	KubeletClientCert *tls.Certificate
	// ServiceAccountSigner mints and checks service-account tokens
	// (serviceaccounts/token, OIDC discovery, the token authenticator);
	// nil serves none. APIAudiences are the audiences a token must carry
	// to be accepted here, and the default of a TokenRequest's.
	ServiceAccountSigner *auth.TokenSigner
	APIAudiences         []string
	// Transformers, if set, gives each resource's storage its value
	// transformer (encryption at rest); nil stores plain protobuf.
	Transformers func(schema.GroupResource) storage.Transformer
	// StorageGuard refuses writes while the data dir is nearly full
	// (storageguard.go); New runs its polling. Nil refuses none.
	StorageGuard *StorageGuard
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight bound the
	// read-only and the mutating requests served at once (maxinflight.go;
	// upstream: 400 and 200, 0 for no limit).
	MaxRequestsInFlight         int
	MaxMutatingRequestsInFlight int
}

// Server serves the Kubernetes API.
type Server struct {
	cfg            Config
	authenticators []auth.Authenticator
	// serviceAccountTokens is also in authenticators; TokenReviews ask it
	// for other audiences than the API server's.
	serviceAccountTokens *auth.ServiceAccountAuthenticator
	apiAudiences         []string
	authorizer           auth.Authorizer
	rbac                 *auth.RBACIndex // roles and bindings, for RBAC, escalation checks and rules reviews
	// served is the table of served resources, replaced whole when CRDs
	// come and go (servedtable.go); tableMu serializes its writers.
	tbl         atomic.Pointer[servedTable]
	tableMu     sync.Mutex
	crds        *crdServing // the custom resources served from CRDs (crdserving.go)
	crdOpenAPI  *crdOpenAPI // their /openapi/v3 documents (crdopenapi.go)
	discoveryMu sync.Mutex  // serializes discovery builds
	discovery   atomic.Pointer[discoveryDocs]
	openapi     *openapi.Handler
	services    *allocator.Services
	compactor   *storage.Compactor
	// feed is the one etcd watch every store's watch cache is fed from.
	feed        *storage.Feed
	ready       sync.Map // check name -> error
	kubeletOnce sync.Once
	kubeletRT   http.RoundTripper
	podOnce     sync.Once
	podRT       http.RoundTripper // pods/proxy
	fields      *apply.Manager
	admission   *admission.Chain
	webhooks    *webhook.Webhooks // started by SetLoopback
	policies    *policy.Policies  // started by SetLoopback
	inFlight    *maxInFlight
	loopback    atomicClient               // the server's own client, for admission's writes (SetLoopback)
	agg         atomic.Pointer[aggregator] // the aggregation layer (aggregator.go), from SetAggregation
}

type atomicClient struct {
	p atomic.Pointer[kubernetes.Interface]
}

func (a *atomicClient) Load() kubernetes.Interface {
	if c := a.p.Load(); c != nil {
		return *c
	}
	return nil
}

// SetLoopback hands the API server its own clients (the loopback user in
// system:masters), which ResourceQuota admission charges quotas through,
// the admission webhooks' informers follow their configurations with and
// the admission policies' informers their policies, bindings and
// parameters (the dynamic client).
func (s *Server) SetLoopback(c kubernetes.Interface, dyn dynamic.Interface) {
	s.loopback.p.Store(&c)
	s.webhooks.Start(c)
	s.policies.Start(c, dyn)
}

// served pairs a resource's declaration with its storage.
type served struct {
	*registry.Resource
	store objectStore
}

// subresource finds one of the kind's own subresources.
func (sv *served) subresource(name string) (registry.Subresource, bool) {
	for _, sub := range sv.Subresources {
		if sub.Name == name {
			return sub, true
		}
	}
	return registry.Subresource{}, false
}

// New opens storage for every resource and prepares the handlers.
func New(ctx context.Context, cfg Config) (*Server, error) {
	s := &Server{
		cfg:            cfg,
		authenticators: []auth.Authenticator{auth.CertAuthenticator{}},
		authorizer:     cfg.Authorizer,
		inFlight:       newMaxInFlight(cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight),
	}
	svc, err := allocator.NewServices(ctx, cfg.Etcd, cfg.ServiceCIDR, cfg.NodePortRange)
	if err != nil {
		return nil, err
	}
	s.services = svc
	// Service-account tokens go before the static tokens, which refuse
	// every bearer token they do not know.
	if cfg.ServiceAccountSigner != nil {
		s.serviceAccountTokens = &auth.ServiceAccountAuthenticator{
			Signer: cfg.ServiceAccountSigner, Audiences: cfg.APIAudiences, Objects: tokenObjects{s}}
		s.authenticators = append(s.authenticators, s.serviceAccountTokens)
	}
	s.authenticators = append(s.authenticators, cfg.Authenticators...)
	s.apiAudiences = cfg.APIAudiences
	t := newServedTable()
	s.feed = storage.NewFeed(ctx, cfg.Etcd, "/registry/")
	var specs []openapi.Resource
	byType := map[reflect.Type]*registry.Resource{}
	for _, r := range registry.All(registry.Options{Services: svc}) {
		if r.Review {
			t.serve(&served{Resource: r})
			continue
		}
		if r.StoredAs != nil {
			shared, ok := t.resources[*r.StoredAs]
			if !ok {
				return nil, fmt.Errorf("%s is stored as %s, which is not served before it", r.GVR, r.StoredAs)
			}
			t.serve(&served{Resource: r, store: convertingStore{Store: shared.store.(*storage.Store), to: r.ToStorage, from: r.FromStorage}})
			specs = append(specs, openapiResource(r))
			continue
		}
		var tr storage.Transformer
		if cfg.Transformers != nil {
			tr = cfg.Transformers(r.GroupResource())
		}
		st, err := storage.New(ctx, storage.Config{
			Client: cfg.Etcd, Resource: r.GroupResource(), Prefix: r.Prefix(), Kind: r.GVK(),
			NewFunc: r.New, Attrs: r.Attrs, Transformer: tr, CacheEncoded: r.CacheEncoded, Feed: s.feed,
		})
		if err != nil {
			return nil, fmt.Errorf("storage for %s: %w", r.GVR.Resource, err)
		}
		t.stores[r.GroupResource()] = st
		t.serve(&served{Resource: r, store: st})
		specs = append(specs, openapiResource(r))
		byType[reflect.TypeOf(r.New())] = r
	}
	s.tbl.Store(t)
	// A cluster IP is claimed by creating its IPAddress object.
	svc.UseIPAddresses(t.stores[schema.GroupResource{Group: "networking.k8s.io", Resource: "ipaddresses"}])
	s.openapi = openapi.New(specs)
	// Server-side apply defaults what it merges with the kind's own rules.
	s.fields = apply.New(func(obj runtime.Object) {
		if r, ok := byType[reflect.TypeOf(obj)]; ok {
			r.Default(obj)
		}
	})
	s.fields.Custom = s.customTypeConverter
	if cfg.StorageGuard != nil {
		go cfg.StorageGuard.Run(ctx)
	}
	s.compactor = &storage.Compactor{Client: cfg.Etcd, Interval: cfg.CompactionInterval, Stores: s.liveStores}
	go s.compactor.Run(ctx)
	go storage.RequestProgress(ctx, cfg.Etcd)
	// kube-apiserver's --authorization-mode=Node,RBAC behind its
	// privileged group: administrators first, then the Node authorizer for
	// kubelets, then RBAC for everyone (nodes included).
	if s.rbac, err = s.startRBACIndex(ctx); err != nil {
		return nil, err
	}
	if s.authorizer == nil {
		s.authorizer = auth.Chain{auth.PrivilegedGroup{}, auth.NodeAuthorizer{Objects: nodeObjects{s}}, auth.RBAC{Index: s.rbac}}
	}
	s.webhooks, err = s.newWebhooks(ctx.Done())
	if err != nil {
		return nil, err
	}
	if s.policies, err = s.newPolicies(ctx.Done()); err != nil {
		return nil, err
	}
	s.admission = admission.New(admission.Config{
		Webhooks:                            s.webhooks,
		Policies:                            s.policies,
		Getter:                              s.getter,
		DefaultNotReadyTolerationSeconds:    cfg.DefaultNotReadyTolerationSeconds,
		DefaultUnreachableTolerationSeconds: cfg.DefaultUnreachableTolerationSeconds,
		Escalation:                          auth.Escalation{Authorizer: s.authorizer, Index: s.rbac, RoleRules: s.roleRules},
		Loopback:                            s.loopback.Load,
		Stop:                                ctx.Done(),
	})
	s.startCRDServing(ctx)
	return s, nil
}

// getter reads a served resource for admission: the watch cache answers
// almost every time; a miss asks etcd, as upstream's plugins do with their
// informers and a live lookup.
func (s *Server) getter(gvr schema.GroupVersionResource) admission.ObjectGetter {
	return storeGetter{s: s, gvr: gvr}
}

type storeGetter struct {
	s   *Server
	gvr schema.GroupVersionResource
}

func (g storeGetter) Get(ctx context.Context, namespace, name string) (runtime.Object, error) {
	sv, ok := g.s.live().resources[g.gvr]
	if !ok {
		return nil, fmt.Errorf("admission: %s is not served", g.gvr)
	}
	key := sv.store.Key(namespace, name)
	if st, ok := sv.store.(*storage.Store); ok {
		if obj, ok := st.Cached(key); ok {
			return obj, nil
		}
	}
	return sv.store.Get(ctx, key)
}

func (g storeGetter) List(ctx context.Context, namespace string) ([]runtime.Object, error) {
	sv, ok := g.s.live().resources[g.gvr]
	if !ok {
		return nil, fmt.Errorf("admission: %s is not served", g.gvr)
	}
	res, err := sv.store.List(ctx, storage.ListOptions{Namespace: namespace, ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	return res.Items, nil
}

// RewriteStored writes every stored object of the resources match selects
// again, through the storage's compare-and-swap updates: re-encryption
// after a key rotation. It returns how many objects it saw.
func (s *Server) RewriteStored(ctx context.Context, match func(schema.GroupResource) bool) (int, error) {
	stores := s.live().stores
	grs := make([]schema.GroupResource, 0, len(stores))
	for gr := range stores {
		if match(gr) {
			grs = append(grs, gr)
		}
	}
	sort.Slice(grs, func(i, j int) bool { return grs[i].String() < grs[j].String() })
	total := 0
	for _, gr := range grs {
		n, err := stores[gr].Rewrite(ctx)
		total += n
		if err != nil {
			return total, fmt.Errorf("rewriting %s: %w", gr, err)
		}
	}
	return total, nil
}

// Compactor exposes etcd compaction (tests and benchmarks trigger it).
func (s *Server) Compactor() *storage.Compactor { return s.compactor }

// lookup finds the served resource for a request.
func (s *Server) lookup(info requestInfo) (*served, error) {
	sv, ok := s.live().resources[schema.GroupVersionResource{Group: info.Group, Version: info.Version, Resource: info.Resource}]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: info.Group, Resource: info.Resource}, "")
	}
	return sv, nil
}

// ServeHTTP is the front door: it recovers panics into 500s, then runs the
// request path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			logrus.Errorf("panic serving %s %s: %v\n%s", r.Method, r.URL, p, debug.Stack())
			s.writeError(w, r, apierrors.NewInternalError(fmt.Errorf("%v", p)))
		}
		logrus.Debugf("%s %s (%s)", r.Method, r.URL, time.Since(start))
	}()
	info := parseRequest(r)
	u, err := auth.Authenticate(s.authenticators, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Impersonate-* headers: from here on the request is the impersonated
	// user's, if the authenticated one may impersonate it.
	if u, err = auth.Impersonate(s.authorizer, u, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	// Max in flight runs where upstream's does: after impersonation (a
	// request impersonating system:masters is exempt as that user would
	// be) and before authorization, so a refused request costs no RBAC
	// decision either.
	pool, ok := s.inFlight.admit(info, u)
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		s.writeError(w, r, tooManyRequests())
		return
	}
	defer release(pool)
	if d, reason := s.authorizer.Authorize(u, info); d != auth.DecisionAllow {
		s.writeError(w, r, auth.Forbidden(u, info, reason))
		return
	}
	ctx := warning.WithWarningRecorder(auth.WithUser(r.Context(), u), &headerWarnings{w: w})
	r = r.WithContext(ctx)
	// A group/version an APIService serves from an extension API server
	// goes there, authorized as any request (aggregator.go).
	if a := s.agg.Load(); a != nil && strings.HasPrefix(r.URL.Path, "/apis/") {
		if svc := a.remoteFor(r.URL.Path); svc != nil {
			s.serveRemote(w, r, a, svc)
			return
		}
	}
	if !info.IsResource {
		s.serveNonResource(w, r, info)
		return
	}
	s.serveResource(w, r, info)
}

func (s *Server) serveNonResource(w http.ResponseWriter, r *http.Request, info requestInfo) {
	p := r.URL.Path
	switch {
	case p == "/healthz" || p == "/livez" || p == "/readyz" || strings.HasPrefix(p, "/healthz/") || strings.HasPrefix(p, "/livez/") || strings.HasPrefix(p, "/readyz/"):
		s.serveHealth(w, r)
	case p == "/version" || p == "/version/":
		s.serveVersion(w, r)
	case p == "/api" || p == "/api/":
		if !s.serveAggregated(w, r, true) {
			s.serveAPIVersions(w, r)
		}
	case p == "/apis" || p == "/apis/":
		if !s.serveAggregated(w, r, false) {
			s.serveAPIGroupList(w, r)
		}
	case p == "/api/v1" || p == "/api/v1/":
		s.serveResourceList(w, r, "v1")
	case strings.HasPrefix(p, "/apis/"):
		parts := strings.Split(strings.Trim(p, "/"), "/")
		if len(parts) == 2 {
			s.serveAPIGroup(w, r, parts[1])
			return
		}
		if len(parts) == 3 {
			s.serveResourceList(w, r, parts[1]+"/"+parts[2])
			return
		}
		s.writeError(w, r, apierrors.NewNotFound(schema.GroupResource{}, ""))
	case strings.HasPrefix(p, "/openapi/"):
		if s.crdOpenAPI == nil || !s.crdOpenAPI.serve(w, r, s.openapi) {
			s.openapi.ServeHTTP(w, r)
		}
	case p == auth.OpenIDConfigPath || p == auth.JWKSPath:
		s.serveIssuerDiscovery(w, r)
	default:
		s.writeError(w, r, notFoundPath(p))
	}
}

func notFoundPath(p string) error {
	return &apierrors.StatusError{ErrStatus: apierrors.NewNotFound(schema.GroupResource{}, "").ErrStatus}
}

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, info requestInfo) {
	sv, err := s.lookup(info)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Cluster-scoped resources have no namespaced paths (a namespace's own
	// path leaves info.Namespace empty).
	if !sv.Namespaced && info.Namespace != "" {
		s.writeError(w, r, apierrors.NewNotFound(sv.GroupResource(), info.Name))
		return
	}
	// A namespaced resource is only listed or watched across namespaces;
	// everything else needs /namespaces/{ns}/ in the path, as upstream's
	// routes do.
	if sv.Namespaced && info.Namespace == "" && !sv.Review {
		switch {
		case info.Verb == "list" || info.Verb == "watch":
		case info.Name == "":
			s.writeError(w, r, methodNotAllowed(r.Method, sv))
			return
		default:
			s.writeError(w, r, apierrors.NewNotFound(sv.GroupResource(), info.Name))
			return
		}
	}
	// After authorization (a request that may not write learns that
	// first), before decoding: a refused write costs nothing.
	if err := s.cfg.StorageGuard.Admit(r, info, sv, auth.UserFrom(r.Context())); err != nil {
		s.writeError(w, r, err)
		return
	}
	if sv.Review {
		if info.Verb != "create" || info.Name != "" || info.Subresource != "" {
			s.writeError(w, r, methodNotAllowed(r.Method, sv))
			return
		}
		s.review(w, r, info, sv)
		return
	}
	if info.Subresource != "" {
		s.serveSubresource(w, r, info, sv)
		return
	}
	switch info.Verb {
	case "get":
		s.get(w, r, info, sv)
	case "list":
		s.list(w, r, info, sv)
	case "watch":
		s.watch(w, r, info, sv)
	case "create":
		if info.Name != "" {
			s.writeError(w, r, methodNotAllowed(r.Method, sv))
			return
		}
		if sv.Custom != nil && sv.Custom.Terminating {
			err := apierrors.NewMethodNotSupported(sv.GroupResource(), "create")
			err.ErrStatus.Message = "create not allowed while custom resource definition is terminating"
			s.writeError(w, r, err)
			return
		}
		s.create(w, r, info, sv)
	case "update":
		s.update(w, r, info, sv, "")
	case "patch":
		s.patch(w, r, info, sv, "")
	case "delete":
		s.delete(w, r, info, sv)
	case "deletecollection":
		s.deleteCollection(w, r, info, sv)
	default:
		s.writeError(w, r, methodNotAllowed(r.Method, sv))
	}
}

func methodNotAllowed(method string, sv *served) error {
	return apierrors.NewMethodNotSupported(sv.GroupResource(), strings.ToLower(method))
}

// Resources lists the served resources, sorted, for discovery and tests.
func (s *Server) Resources() []*registry.Resource {
	var out []*registry.Resource
	for _, sv := range s.live().resources {
		out = append(out, sv.Resource)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GVR.String() < out[j].GVR.String() })
	return out
}
