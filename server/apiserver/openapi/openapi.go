// Package openapi generates and serves the OpenAPI documents of the
// built-in API, made by reflection from the k8s.io/api Go types, in the
// shape kube-apiserver serves them at /openapi/v3 and (Swagger 2.0, JSON or
// protobuf) at /openapi/v2.
//
// What depends on these documents, in unmodified kubectl:
//
//   - kubectl create/apply/replace --validate=strict (the default) reads
//     /openapi/v3, then the group-version document, and looks for a PATCH
//     operation with the object's x-kubernetes-group-version-kind and a
//     fieldValidation query parameter. If there is one it leaves validation
//     to the server; if the GVK has no PATCH at all it falls back to
//     /openapi/v2. A `kind: List` is always validated client-side, item by
//     item, against /openapi/v2 (see v2.go).
//   - client-side kubectl apply computes strategic merge patches from the
//     component whose x-kubernetes-group-version-kind list has the GVK,
//     reading x-kubernetes-patch-strategy / -patch-merge-key on properties
//     and resolving $ref and allOf[0].$ref.
//   - kubectl explain finds the GVK on an operation of one of the resource's
//     collection or item paths, then the component carrying that GVK, then
//     walks properties through $ref / allOf / items / additionalProperties,
//     printing descriptions (from the types' generated SwaggerDoc).
//
// All of them fetch the v3 documents with Accept: application/json; the
// protobuf form of those is not served. The v2 document is fetched as
// protobuf, which is served.
package openapi

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// Resource is one REST resource to document. Entries without Type,
// Plural, Kind or Version are skipped.
type Resource struct {
	// Group, Version and Kind served at the resource's paths; Group "" is
	// the core group (/api/v1).
	Group, Version, Kind string
	// Plural is the path segment, e.g. "deployments".
	Plural     string
	Namespaced bool
	// Verbs served: get list watch create update patch delete
	// deletecollection. Only these get operations.
	Verbs []string
	// Type and ListType are the Go types of the object and its list, e.g.
	// reflect.TypeOf(appsv1.Deployment{}). Pointer types are accepted.
	Type     reflect.Type
	ListType reflect.Type
	// Subresources served at .../{name}/<Name>.
	Subresources []Subresource
}

// Subresource is a subresource of a Resource.
type Subresource struct {
	// Name is the path segment: "status", "scale", "binding", ...
	Name string
	// Type is the Go type of the request and response bodies, e.g.
	// autoscalingv1.Scale. Nil means the resource's own type (status); a
	// non-struct type such as string means a text body (pods/log).
	Type reflect.Type
	// Group, Version, Kind named by the subresource's operations. Kind ""
	// means the resource's own GVK (status, log).
	Group, Version, Kind string
	// Verbs served; nil means get/update/patch, except create for binding,
	// eviction and token, and get for log.
	Verbs []string
}

// Handler serves /openapi/v3, /openapi/v3/<api/v1|apis/<group>/<version>>
// and /openapi/v2.
type Handler struct {
	ready     chan struct{}
	once      sync.Once
	resources []Resource

	// Set before ready is closed, read-only after.
	err      error
	index    document
	docs     map[string]document // by "api/v1", "apis/apps/v1"
	built    time.Time
	duration time.Duration

	v2 v2State // built on its own, on the first request for it
}

type document struct {
	data []byte
	hash string // upper-case hex SHA-512 of data, as upstream
}

// New returns a Handler for the given resources. Every group-version
// document is generated once, on the first request: the work (mostly the
// ~100 ms parse of client-go's list-type schema) and the few MB of
// documents cost nothing to a server no client has asked for OpenAPI yet
// (an idle edge node), and requests that arrive first wait for it. After
// that, serving is writing cached bytes.
func New(resources []Resource) *Handler {
	h := &Handler{ready: make(chan struct{}), resources: cloneResources(resources)}
	h.v2.ready = make(chan struct{})
	return h
}

// start builds the documents once, in the background.
func (h *Handler) start() { h.once.Do(func() { go h.build(h.resources) }) }

// Wait blocks until the documents are built; it is for callers (and tests)
// that want them ready before serving.
func (h *Handler) Wait() {
	h.start()
	<-h.ready
}

func cloneResources(in []Resource) []Resource {
	out := slices.Clone(in)
	for i := range out {
		out[i].Verbs = slices.Clone(out[i].Verbs)
		out[i].Subresources = slices.Clone(out[i].Subresources)
		for j := range out[i].Subresources {
			out[i].Subresources[j].Verbs = slices.Clone(out[i].Subresources[j].Verbs)
		}
	}
	return out
}

func (h *Handler) build(resources []Resource) {
	defer close(h.ready)
	defer func() {
		// A bug here must cost the documents, not the API server.
		if p := recover(); p != nil {
			h.err = fmt.Errorf("openapi: generating documents: %v", p)
		}
	}()
	start := time.Now()
	h.docs, h.index = buildDocuments(resources)
	h.built = time.Now()
	h.duration = h.built.Sub(start)
}

// gvPath is the key of a group-version in the index: "api/v1" or
// "apis/<group>/<version>".
func gvPath(group, version string) string {
	if group == "" {
		return "api/" + version
	}
	return "apis/" + group + "/" + version
}

// model is what both document forms are made from: the component table,
// fully annotated, and the paths of each group-version.
type model struct {
	b     *builder
	order []string // group-version keys, in the order first seen
	gvs   map[string]*gvDoc
}

// gvDoc is one group-version: its paths and the components they refer to.
type gvDoc struct {
	group, version string
	pb             *pathsBuilder
}

// buildModel walks the resources' Go types and builds the model the
// /openapi/v3 and /openapi/v2 documents are both written from, so that
// every schema rule lives in one place whatever the document's form.
func buildModel(resources []Resource) *model {
	// The list-type schema loads while the Go types are walked.
	smdCh := make(chan *smdschema.Schema, 1)
	go func() { smdCh <- loadListTypes() }()

	b := newBuilder()
	gvks := map[string][]gvk{} // component name -> GVKs it is served as
	addGVK := func(name string, g gvk) {
		if !slices.Contains(gvks[name], g) {
			gvks[name] = append(gvks[name], g)
		}
	}

	var order []string
	gvs := map[string]*gvDoc{}
	for i := range resources {
		r := &resources[i]
		if r.Type == nil || r.Plural == "" || r.Kind == "" || r.Version == "" {
			continue // nothing sensible to document
		}
		key := gvPath(r.Group, r.Version)
		d := gvs[key]
		if d == nil {
			d = &gvDoc{group: r.Group, version: r.Version, pb: &pathsBuilder{b: b, paths: map[string]*pathItem{}, roots: map[string]bool{}}}
			gvs[key] = d
			order = append(order, key)
			gvOp, tag := gvNames(r.Group, r.Version)
			d.pb.roots[apiResourceListModel] = true
			d.pb.paths["/"+key+"/"] = &pathItem{Get: &operation{
				Description: "get available resources",
				OperationID: "get" + gvOp + "APIResources",
				Responses:   okResponses(apiResourceListModel, "200"),
				Tags:        []string{tag},
			}}
		}
		d.pb.addResource("/"+key, r)

		addGVK(d.pb.model(r.Type), gvk{Group: r.Group, Version: r.Version, Kind: r.Kind})
		if r.ListType != nil {
			lt := r.ListType
			for lt.Kind() == reflect.Pointer {
				lt = lt.Elem()
			}
			addGVK(d.pb.model(lt), gvk{Group: r.Group, Version: r.Version, Kind: lt.Name()})
		}
		for _, sr := range r.Subresources {
			if sr.Type != nil && sr.Kind != "" && derefType(sr.Type).Kind() == reflect.Struct {
				addGVK(d.pb.model(sr.Type), gvk{Group: sr.Group, Version: sr.Version, Kind: sr.Kind})
			}
		}
	}
	// The option and event types are registered in every group-version
	// (metav1.AddToGroupVersion), and upstream lists them so.
	for _, key := range order {
		d := gvs[key]
		addGVK(deleteOptionsModel, gvk{Group: d.group, Version: d.version, Kind: "DeleteOptions"})
		addGVK(watchEventModel, gvk{Group: d.group, Version: d.version, Kind: "WatchEvent"})
	}
	addGVK(statusModel, gvk{Version: "v1", Kind: "Status"})
	// Operations name these by constant; make sure they exist (documents
	// include them only when an operation refers to them).
	for _, t := range []reflect.Type{
		reflect.TypeFor[metav1.DeleteOptions](), reflect.TypeFor[metav1.WatchEvent](),
		reflect.TypeFor[metav1.Status](), reflect.TypeFor[metav1.Patch](),
		reflect.TypeFor[metav1.APIResourceList](),
	} {
		b.component(t)
	}

	annotateListTypes(b.components, <-smdCh)

	for name, list := range gvks {
		sort.Slice(list, func(i, j int) bool {
			a, c := list[i], list[j]
			if a.Group != c.Group {
				return a.Group < c.Group
			}
			if a.Version != c.Version {
				return a.Version < c.Version
			}
			return a.Kind < c.Kind
		})
		if c := b.components[name]; c != nil {
			c.GVK = list
		}
	}
	return &model{b: b, order: order, gvs: gvs}
}

// buildDocuments generates every group-version document and the index.
func buildDocuments(resources []Resource) (map[string]document, document) {
	m := buildModel(resources)
	b, order, gvs := m.b, m.order, m.gvs

	// Each component is encoded once and spliced into every document that
	// needs it.
	encoded := make(map[string][]byte, len(b.components))
	deps := make(map[string][]string, len(b.components))
	for name, c := range b.components {
		data, err := json.Marshal(c)
		if err != nil {
			panic(err)
		}
		encoded[name] = data
		deps[name] = c.refs(nil)
	}

	// Documents are assembled and hashed in parallel: they only read the
	// shared tables from here on.
	built := make([]document, len(order))
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, key := range order {
		wg.Go(func() { built[i], errs[i] = assemble(gvs[key].pb, encoded, deps) })
	}
	wg.Wait()
	docs := make(map[string]document, len(order))
	idx := struct {
		Paths map[string]indexEntry `json:"paths"`
	}{Paths: map[string]indexEntry{}}
	for i, key := range order {
		if errs[i] != nil {
			panic(errs[i])
		}
		docs[key] = built[i]
		idx.Paths[key] = indexEntry{ServerRelativeURL: serverRelativeURL(key, built[i].hash)}
	}
	data, err := json.Marshal(idx)
	if err != nil {
		panic(err)
	}
	return docs, document{data: data, hash: hashOf(data)}
}

// assemble writes one group-version document: its paths, and the encoded
// components its operations refer to, transitively, so that the document
// is self-contained. Component names are sorted so that the bytes, and the
// hash, are the same on every start for the same input.
func assemble(pb *pathsBuilder, encoded map[string][]byte, deps map[string][]string) (document, error) {
	need := map[string]bool{}
	var visit func(string)
	visit = func(n string) {
		if need[n] {
			return
		}
		need[n] = true
		for _, dep := range deps[n] {
			visit(dep)
		}
	}
	for n := range pb.roots {
		visit(n)
	}
	names := make([]string, 0, len(need))
	for n := range need {
		names = append(names, n)
	}
	sort.Strings(names)

	paths, err := json.Marshal(pb.paths)
	if err != nil {
		return document{}, err
	}
	size := len(paths) + 512
	for _, n := range names {
		size += len(n) + 4 + len(encoded[n])
	}
	var buf bytes.Buffer
	buf.Grow(size)
	buf.WriteString(`{"components":{"schemas":{`)
	for i, n := range names {
		if i > 0 {
			buf.WriteByte(',')
		}
		q, err := json.Marshal(n)
		if err != nil {
			return document{}, err
		}
		buf.Write(q)
		buf.WriteByte(':')
		buf.Write(encoded[n])
	}
	buf.WriteString(`},"securitySchemes":{"BearerToken":{"description":"Bearer Token authentication","in":"header","name":"authorization","type":"apiKey"}}},`)
	buf.WriteString(`"info":{"title":"Kubernetes","version":"unversioned"},"openapi":"3.0.0","paths":`)
	buf.Write(paths)
	buf.WriteByte('}')
	return document{data: buf.Bytes(), hash: hashOf(buf.Bytes())}, nil
}

// indexEntry is an entry of the /openapi/v3 index; client-go decodes it as
// handler3.OpenAPIV3DiscoveryGroupVersion.
type indexEntry struct {
	ServerRelativeURL string `json:"serverRelativeURL"`
}

func hashOf(data []byte) string {
	return fmt.Sprintf("%X", sha512.Sum512(data))
}

// serverRelativeURL is "/openapi/v3/apis/apps/v1?hash=<HASH>". client-go
// treats URLs under /openapi/v3 as relative to its configured server
// prefix, and the hash makes each version of a document its own URL, which
// clients cache forever.
func serverRelativeURL(key, hash string) string {
	return "/openapi/v3/" + key + "?" + url.Values{"hash": {hash}}.Encode()
}

const servePrefix = "/openapi/v3"

// Index is the /openapi/v3 index document (JSON), built on first use:
// what the CRDs' index (server/apiserver/crdopenapi.go) adds its
// group-versions to.
func (h *Handler) Index(ctx context.Context) ([]byte, error) {
	h.start()
	select {
	case <-h.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if h.err != nil {
		return nil, h.err
	}
	return h.index.data, nil
}

// ServeHTTP serves the index at /openapi/v3 and the documents below it,
// and the document at /openapi/v2.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, servePrefix)
	isV2 := r.URL.Path == v2ServePath
	if !isV2 && (!ok || (rest != "" && rest[0] != '/')) {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if isV2 {
		h.serveV2(w, r)
		return
	}
	h.start()
	select {
	case <-h.ready:
	case <-r.Context().Done():
		return
	}
	if h.err != nil {
		http.Error(w, h.err.Error(), http.StatusInternalServerError)
		return
	}
	key := strings.Trim(rest, "/")
	if key == "" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Etag", strconv.Quote(h.index.hash))
		http.ServeContent(w, r, "", h.built, bytes.NewReader(h.index.data))
		return
	}
	doc, ok := h.docs[key]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Add("Vary", "Accept")
	if !acceptsJSON(r.Header.Get("Accept")) {
		// Only the protobuf form was asked for; upstream answers 406 to
		// formats it does not have, and so do we.
		http.Error(w, "only application/json is served", http.StatusNotAcceptable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Etag", strconv.Quote(doc.hash))
	if hash := r.URL.Query().Get("hash"); hash != "" {
		if hash != doc.hash {
			// A stale URL: send the client to the current document, as
			// upstream does, rather than serve new bytes under an old hash
			// that it may cache forever.
			http.Redirect(w, r, serverRelativeURL(key, doc.hash), http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	}
	http.ServeContent(w, r, "", h.built, bytes.NewReader(doc.data))
}

// acceptsJSON reports whether an Accept header admits application/json.
// An empty header admits anything.
func acceptsJSON(accept string) bool {
	return negotiate(accept, "application/json") == 0
}

func qValue(params string) (float64, bool) {
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(k, "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return q, err == nil
		}
	}
	return 0, false
}
