package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/server/apiserver/admission"
	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// Service-account tokens, the kind-specific part: the TokenRequest
// subresource (serviceaccounts/token), OIDC discovery of the signing key,
// and the authenticator's reads of ServiceAccounts and bound objects from
// the watch caches. The signing and checking are auth/serviceaccount.go.

var (
	serviceAccountsGVR = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	secretsGVR         = corev1.SchemeGroupVersion.WithResource("secrets")
	nodesGVR           = corev1.SchemeGroupVersion.WithResource("nodes")
	tokenRequestGVK    = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
)

const (
	// warnOnlyExpirationSeconds is what ServiceAccount admission asks for
	// in kube-api-access volumes; such tokens bound to a pod are extended
	// to a year and carry warnafter, as upstream's
	// --service-account-extend-token-expiration (default on) does, so
	// clients that never reread the file keep working while the kubelet
	// still refreshes it hourly.
	warnOnlyExpirationSeconds = 3607
	extendedExpiration        = 365 * 24 * time.Hour
)

// getAs reads one object of gvr through the admission getter (watch cache,
// then etcd) as a T.
func getAs[T runtime.Object](s *Server, gvr schema.GroupVersionResource, namespace, name string) (T, error) {
	var zero T
	obj, err := s.getter(gvr).Get(context.Background(), namespace, name)
	if err != nil {
		return zero, err
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("%s: unexpected %T", gvr.Resource, obj)
	}
	return t, nil
}

// tokenObjects is the service-account authenticator's view of the
// objects tokens name.
type tokenObjects struct{ s *Server }

func (o tokenObjects) ServiceAccount(namespace, name string) (*corev1.ServiceAccount, error) {
	return getAs[*corev1.ServiceAccount](o.s, serviceAccountsGVR, namespace, name)
}

func (o tokenObjects) Pod(namespace, name string) (*corev1.Pod, error) {
	return getAs[*corev1.Pod](o.s, podsGVR, namespace, name)
}

func (o tokenObjects) Secret(namespace, name string) (*corev1.Secret, error) {
	return getAs[*corev1.Secret](o.s, secretsGVR, namespace, name)
}

func (o tokenObjects) Node(name string) (*corev1.Node, error) {
	return getAs[*corev1.Node](o.s, nodesGVR, "", name)
}

// createToken answers a TokenRequest for ServiceAccount info.Name, as
// upstream's TokenREST: defaults (an hour, the API server's audiences),
// validation (422), the ServiceAccount and the bound object must exist
// (with the UID the request names), NodeRestriction for kubelets, then a
// signed token. Nothing is stored.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request, info requestInfo) {
	if s.cfg.ServiceAccountSigner == nil {
		s.writeError(w, r, apierrors.NewServiceUnavailable("service-account token signing is not configured"))
		return
	}
	dry, err := dryRun(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tr := &authenticationv1.TokenRequest{}
	if err := decodeBody(w, r, tokenRequestGVK, tr); err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.mintToken(r.Context(), info.Namespace, info.Name, tr, dry)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out.SetGroupVersionKind(tokenRequestGVK)
	s.writeObject(w, r, http.StatusCreated, out)
}

func (s *Server) mintToken(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest, dry bool) (*authenticationv1.TokenRequest, error) {
	defaults.TokenRequest(tr)
	// Both admission phases, as upstream: its create handler runs the
	// mutating one (webhooks may change or refuse the request) before
	// TokenREST's own defaults and validation.
	attrs := &admission.Attributes{Operation: "CREATE", Resource: serviceAccountsGVR, Subresource: "token",
		Namespace: namespace, Name: name, Object: tr, User: auth.UserFrom(ctx), DryRun: dry}
	if err := s.admission.Admit(ctx, attrs); err != nil {
		return nil, err
	}
	if len(tr.Spec.Audiences) == 0 {
		tr.Spec.Audiences = slices.Clone(s.cfg.APIAudiences)
	}
	if errs := validation.TokenRequest(tr); len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestGVK.GroupKind(), name, errs)
	}
	sa, err := getAs[*corev1.ServiceAccount](s, serviceAccountsGVR, namespace, name)
	if err != nil {
		return nil, err
	}
	b := auth.TokenBinding{ServiceAccount: sa}
	if ref := tr.Spec.BoundObjectRef; ref != nil {
		if err := s.bindToken(namespace, name, ref, &b); err != nil {
			return nil, err
		}
	}
	if err := s.admission.Validate(ctx, attrs); err != nil {
		return nil, err
	}
	out := tr.DeepCopy()
	if dry {
		return out, nil
	}
	expiration := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	var warnAfter time.Duration
	if b.Pod != nil && *tr.Spec.ExpirationSeconds == warnOnlyExpirationSeconds && s.apiAudiencesOnly(tr.Spec.Audiences) {
		warnAfter, expiration = expiration, extendedExpiration
	}
	token, _, err := s.cfg.ServiceAccountSigner.BoundToken(b, tr.Spec.Audiences, expiration, warnAfter)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	// The status expiry is the requested one even for an extended token,
	// as upstream: it is when the kubelet should refresh.
	out.Status = authenticationv1.TokenRequestStatus{Token: token,
		ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
	return out, nil
}

// apiAudiencesOnly: every audience is one of the API server's own.
func (s *Server) apiAudiencesOnly(auds []string) bool {
	for _, a := range auds {
		if !slices.Contains(s.cfg.APIAudiences, a) {
			return false
		}
	}
	return true
}

// bindToken looks up the object a token is bound to, with upstream's
// errors: an unsupported kind, or a pod that runs as another account, is
// 400, a missing object is 404, another UID is 409.
func (s *Server) bindToken(namespace, saName string, ref *authenticationv1.BoundObjectReference, b *auth.TokenBinding) error {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	if gvk.Group != "" || (gvk.Version != "" && gvk.Version != "v1") {
		return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to object of type %s", saName, gvk))
	}
	var uid string
	var err error
	switch ref.Kind {
	case "Pod":
		b.Pod, err = getAs[*corev1.Pod](s, podsGVR, namespace, ref.Name)
		if err == nil && b.Pod.Spec.ServiceAccountName != saName {
			return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", saName))
		}
		if err == nil {
			uid = string(b.Pod.UID)
			// The pod's node goes into the token too (upstream's
			// ServiceAccountTokenPodNodeInfo).
			if b.Pod.Spec.NodeName != "" {
				if n, nerr := getAs[*corev1.Node](s, nodesGVR, "", b.Pod.Spec.NodeName); nerr == nil {
					b.Node = n
				}
			}
		}
	case "Secret":
		b.Secret, err = getAs[*corev1.Secret](s, secretsGVR, namespace, ref.Name)
		if err == nil {
			uid = string(b.Secret.UID)
		}
	case "Node":
		b.Node, err = getAs[*corev1.Node](s, nodesGVR, "", ref.Name)
		if err == nil {
			uid = string(b.Node.UID)
		}
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to object of type %s", saName, gvk))
	}
	if err != nil {
		return err
	}
	if ref.UID != "" && string(ref.UID) != uid {
		return apierrors.NewConflict(schema.GroupResource{Resource: ref.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return nil
}

// serveIssuerDiscovery serves the OIDC discovery document and the key set,
// as upstream's ServiceAccountIssuerDiscovery: who may read them is the
// authorizer's (RBAC's system:service-account-issuer-discovery).
func (s *Server) serveIssuerDiscovery(w http.ResponseWriter, r *http.Request) {
	signer := s.cfg.ServiceAccountSigner
	if signer == nil {
		s.writeError(w, r, notFoundPath(r.URL.Path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.writeError(w, r, apierrors.NewMethodNotSupported(schema.GroupResource{}, r.Method))
		return
	}
	var body []byte
	contentType := "application/json"
	if r.URL.Path == auth.JWKSPath {
		body, contentType = signer.JWKS(), "application/jwk-set+json"
	} else {
		body = signer.OpenIDConfiguration("https://" + net.JoinHostPort(s.cfg.PublicAddress, strconv.Itoa(s.cfg.PublicPort)) + auth.JWKSPath)
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
