package apiserver

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kelp-project/kelp/server/apiserver/openapi"
)

// crdOpenAPIBudget bounds the bytes of built group-version documents kept
// between requests. One document is some 600 KB of JSON for ten CRDs (each
// carries the shared metadata definitions), and the specs it is built
// from several times that: built for every CRD as it came, they made 100
// CRDs cost over 30 MB of heap that nothing read unless kubectl explain or
// apply asked.
const crdOpenAPIBudget = 4 << 20

// crdOpenAPI serves the /openapi/v3 documents of the CRDs' group-versions
// next to the built-in ones (openapi.Handler, made once from Go types):
// upstream's builder makes each CRD version's document from its schema,
// the documents of one group-version are merged, and the /openapi/v3 index
// lists them with their hashes. kubectl explain reads them, and kubectl's
// validation finds there that the server validates custom objects itself.
//
// A document is built when it is first asked for, and kept, within
// crdOpenAPIBudget, until one of its CRDs changes. Its hash in the index
// is made from what it is built from (its CRDs' names, UIDs and
// resourceVersions), so the index needs no document built; clients take
// the hash as opaque and only compare it.
type crdOpenAPI struct {
	mu      sync.Mutex
	gvs     map[string]*crdOpenAPIDoc // "apis/<group>/<version>"
	keys    map[string][]string       // CRD name -> the keys it serves
	changed time.Time
	lru     list.List // of *crdOpenAPIDoc with data, most recently used first
	bytes   int       // of the data in lru
	budget  int       // crdOpenAPIBudget
	// build serializes building, so concurrent readers of one new
	// document build it once.
	build sync.Mutex

	// served is every CRD served now, by name, for /openapi/v2, whose one
	// document holds them all (crdopenapiv2.go); v2 is that document,
	// dropped when a CRD changes and built again on the next request.
	served map[string]*servedCRD
	v2     *crdOpenAPIV2
}

// servedCRD is a served CRD as crdOpenAPI keeps it: what names it in a
// document's hash, and its bytes (registry.Custom.Encoded, shared with
// its write path) to build documents from when they are asked for.
type servedCRD struct {
	uid             types.UID
	resourceVersion string
	encoded         []byte
}

func newServedCRD(crd *apiextensionsv1.CustomResourceDefinition, encoded []byte) *servedCRD {
	return &servedCRD{uid: crd.UID, resourceVersion: crd.ResourceVersion, encoded: encoded}
}

// decodeServed decodes the CRDs a document is built from, in name order.
func decodeServed(served map[string]*servedCRD) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names := make([]string, 0, len(served))
	for name := range served {
		names = append(names, name)
	}
	sort.Strings(names)
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := crd.Unmarshal(served[name].encoded); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", name, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

type crdOpenAPIDoc struct {
	key  string
	crds map[string]*servedCRD
	hash string
	data []byte // nil until built, or once evicted
	elem *list.Element
}

func newCRDOpenAPI() *crdOpenAPI {
	return &crdOpenAPI{gvs: map[string]*crdOpenAPIDoc{}, keys: map[string][]string{}, budget: crdOpenAPIBudget,
		served: map[string]*servedCRD{}}
}

// crdChanged records that a CRD is served as crd now (nil: no longer);
// encoded is crd's bytes, what documents are built from.
func (o *crdOpenAPI) crdChanged(name string, crd *apiextensionsv1.CustomResourceDefinition, encoded []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	dirty := map[string]bool{}
	for _, key := range o.keys[name] {
		delete(o.gvs[key].crds, name)
		dirty[key] = true
	}
	delete(o.keys, name)
	delete(o.served, name)
	o.v2 = nil
	if crd != nil {
		served := newServedCRD(crd, encoded)
		o.served[name] = served
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			key := "apis/" + crd.Spec.Group + "/" + v.Name
			d := o.gvs[key]
			if d == nil {
				d = &crdOpenAPIDoc{key: key, crds: map[string]*servedCRD{}}
				o.gvs[key] = d
			}
			d.crds[name] = served
			o.keys[name] = append(o.keys[name], key)
			dirty[key] = true
		}
	}
	for key := range dirty {
		d := o.gvs[key]
		o.dropLocked(d)
		if len(d.crds) == 0 {
			delete(o.gvs, key)
			continue
		}
		d.hash = inputHash(d.crds)
	}
	o.changed = time.Now()
}

// inputHash names the CRDs a document is built from, at their versions.
func inputHash(crds map[string]*servedCRD) string {
	names := make([]string, 0, len(crds))
	for name := range crds {
		names = append(names, name)
	}
	sort.Strings(names)
	h := sha512.New()
	for _, name := range names {
		fmt.Fprintf(h, "%s/%s/%s\n", name, crds[name].uid, crds[name].resourceVersion)
	}
	return fmt.Sprintf("%X", h.Sum(nil))
}

func (o *crdOpenAPI) dropLocked(d *crdOpenAPIDoc) {
	if d.elem != nil {
		o.lru.Remove(d.elem)
		o.bytes -= len(d.data)
		d.elem, d.data = nil, nil
	}
}

// document returns the current document of key and its hash, building it
// if it is not kept; ok is false if no CRD serves key.
func (o *crdOpenAPI) document(key string) (data []byte, hash string, ok bool, err error) {
	if data, hash, ok, built := o.kept(key); !ok || built {
		return data, hash, ok, nil
	}
	o.build.Lock()
	defer o.build.Unlock()
	o.mu.Lock()
	d := o.gvs[key]
	if d == nil || d.data != nil { // gone, or built meanwhile
		o.mu.Unlock()
		data, hash, ok, _ := o.kept(key)
		return data, hash, ok, nil
	}
	hash = d.hash
	crds, err := decodeServed(d.crds)
	o.mu.Unlock()
	if err != nil {
		return nil, "", true, err
	}
	if data, err = buildGroupVersionDoc(key, crds); err != nil {
		return nil, "", true, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gvs[key] == d && d.hash == hash && d.data == nil {
		d.data = data
		d.elem = o.lru.PushFront(d)
		o.bytes += len(data)
		for o.bytes > o.budget && o.lru.Len() > 1 {
			o.dropLocked(o.lru.Back().Value.(*crdOpenAPIDoc))
		}
	}
	// Built from the CRDs of hash, it answers for hash even if a CRD
	// changed meanwhile: the next request names the new one.
	return data, hash, true, nil
}

// kept returns key's hash and its document if it is built.
func (o *crdOpenAPI) kept(key string) (data []byte, hash string, ok, built bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := o.gvs[key]
	if d == nil {
		return nil, "", false, false
	}
	if d.data != nil {
		o.lru.MoveToFront(d.elem)
	}
	return d.data, d.hash, true, d.data != nil
}

// buildGroupVersionDoc merges the documents of the CRDs' versions served
// at key; crds are in name order.
func buildGroupVersionDoc(key string, crds []*apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	var specs []*spec3.OpenAPI
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served || "apis/"+crd.Spec.Group+"/"+v.Name != key {
				continue
			}
			spec, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{V2: false, IncludeSelectableFields: true})
			if err != nil {
				return nil, fmt.Errorf("CRD %s version %s: %w", crd.Name, v.Name, err)
			}
			specs = append(specs, spec)
		}
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, err
	}
	return json.Marshal(merged)
}

// builtinOpenAPI is the built-in API's documents (openapi.Handler), which
// the CRDs' are added to.
type builtinOpenAPI interface {
	Index(ctx context.Context) ([]byte, error)
	V2(ctx context.Context) (*openapi.V2Document, error)
}

// serve answers /openapi/v3 (the built-in index with the CRDs' documents
// added), the CRDs' documents and /openapi/v2 (the built-in document with
// the CRDs' merged in); it returns false for what the built-in handler
// answers alone.
func (o *crdOpenAPI) serve(w http.ResponseWriter, r *http.Request, builtin builtinOpenAPI) bool {
	if r.URL.Path == "/openapi/v2" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		return o.serveV2(w, r, builtin)
	}
	key, ok := strings.CutPrefix(r.URL.Path, "/openapi/v3")
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	key = strings.Trim(key, "/")
	if key == "" {
		return o.serveIndex(w, r, builtin)
	}
	data, hash, ok, err := o.document(key)
	if !ok {
		return false
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("OpenAPI for %s: %v", key, err), http.StatusInternalServerError)
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Etag", strconv.Quote(hash))
	if want := r.URL.Query().Get("hash"); want != "" {
		if want != hash {
			http.Redirect(w, r, "/openapi/v3/"+key+"?"+url.Values{"hash": {hash}}.Encode(), http.StatusMovedPermanently)
			return true
		}
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	}
	o.mu.Lock()
	changed := o.changed
	o.mu.Unlock()
	http.ServeContent(w, r, "", changed, bytes.NewReader(data))
	return true
}

func (o *crdOpenAPI) serveIndex(w http.ResponseWriter, r *http.Request, builtin builtinOpenAPI) bool {
	o.mu.Lock()
	hashes := make(map[string]string, len(o.gvs))
	for key, d := range o.gvs {
		hashes[key] = d.hash
	}
	changed := o.changed
	o.mu.Unlock()
	if len(hashes) == 0 {
		return false
	}
	// The built-in index as data, not as a response: the client's
	// conditions are about the combined index and are answered against
	// its ETag below.
	builtinIndex, err := builtin.Index(r.Context())
	if err != nil {
		return false // the built-in handler answers with its error
	}
	var index struct {
		Paths map[string]map[string]string `json:"paths"`
	}
	if json.Unmarshal(builtinIndex, &index) != nil {
		return false
	}
	for key, hash := range hashes {
		index.Paths[key] = map[string]string{"serverRelativeURL": "/openapi/v3/" + key + "?" + url.Values{"hash": {hash}}.Encode()}
	}
	data, _ := json.Marshal(index)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Etag", strconv.Quote(fmt.Sprintf("%X", sha512.Sum512(data))))
	http.ServeContent(w, r, "", changed, bytes.NewReader(data))
	return true
}
