package apiserver

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/spec3"
)

// crdOpenAPI serves the /openapi/v3 documents of the CRDs' group-versions
// next to the built-in ones (openapi.Handler, made once from Go types):
// upstream's builder makes each CRD version's document from its schema,
// the documents of one group-version are merged, and the /openapi/v3 index
// lists them with their hashes. kubectl explain reads them, and kubectl's
// validation finds there that the server validates custom objects itself.
//
// Documents are rebuilt by one goroutine (run) from the CRDs that changed
// since it last looked, so that serving a CRD never waits for them and a
// burst of CRDs in one group-version costs one merge, not one per CRD.
type crdOpenAPI struct {
	mu    sync.RWMutex
	docs  map[string]openapiDoc // "apis/<group>/<version>" -> document
	built time.Time

	pendingMu sync.Mutex
	pending   map[string]*apiextensionsv1.CustomResourceDefinition // by name; nil: gone
	wake      chan struct{}

	// specs is run's own: each CRD's documents by group-version key.
	specs map[string]map[string]*spec3.OpenAPI
}

type openapiDoc struct {
	data []byte
	hash string
}

func newCRDOpenAPI() *crdOpenAPI {
	return &crdOpenAPI{docs: map[string]openapiDoc{}, pending: map[string]*apiextensionsv1.CustomResourceDefinition{},
		wake: make(chan struct{}, 1), specs: map[string]map[string]*spec3.OpenAPI{}}
}

// changed records that a CRD is served as crd now (nil: no longer).
func (o *crdOpenAPI) changed(name string, crd *apiextensionsv1.CustomResourceDefinition) {
	o.pendingMu.Lock()
	o.pending[name] = crd
	o.pendingMu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *crdOpenAPI) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		}
		o.pendingMu.Lock()
		pending := o.pending
		o.pending = map[string]*apiextensionsv1.CustomResourceDefinition{}
		o.pendingMu.Unlock()
		dirty := map[string]bool{}
		for name, crd := range pending {
			for key := range o.specs[name] {
				dirty[key] = true
			}
			delete(o.specs, name)
			if crd == nil {
				continue
			}
			specs := map[string]*spec3.OpenAPI{}
			for _, v := range crd.Spec.Versions {
				if !v.Served {
					continue
				}
				spec, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{V2: false, IncludeSelectableFields: true})
				if err != nil {
					logrus.WithError(err).Warnf("CRD %s: OpenAPI for %s", crd.Name, v.Name)
					continue
				}
				key := "apis/" + crd.Spec.Group + "/" + v.Name
				specs[key] = spec
				dirty[key] = true
			}
			o.specs[name] = specs
		}
		o.rebuild(dirty)
	}
}

// rebuild merges the documents of the given group-versions.
func (o *crdOpenAPI) rebuild(keys map[string]bool) {
	next := map[string]openapiDoc{}
	for key := range keys {
		var specs []*spec3.OpenAPI
		for _, byKey := range o.specs {
			if spec, ok := byKey[key]; ok {
				specs = append(specs, spec)
			}
		}
		if len(specs) == 0 {
			next[key] = openapiDoc{}
			continue
		}
		merged, err := builder.MergeSpecsV3(specs...)
		if err != nil {
			logrus.WithError(err).Warnf("OpenAPI for %s", key)
			continue
		}
		data, err := json.Marshal(merged)
		if err != nil {
			logrus.WithError(err).Warnf("OpenAPI for %s", key)
			continue
		}
		next[key] = openapiDoc{data: data, hash: fmt.Sprintf("%X", sha512.Sum512(data))}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, d := range next {
		if d.data == nil {
			delete(o.docs, k)
		} else {
			o.docs[k] = d
		}
	}
	o.built = time.Now()
}

// serve answers /openapi/v3 (the built-in index with the CRDs' documents
// added) and the CRDs' documents; it returns false for what the built-in
// handler answers alone.
func (o *crdOpenAPI) serve(w http.ResponseWriter, r *http.Request, builtin http.Handler) bool {
	key, ok := strings.CutPrefix(r.URL.Path, "/openapi/v3")
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	key = strings.Trim(key, "/")
	o.mu.RLock()
	defer o.mu.RUnlock()
	if key == "" {
		if len(o.docs) == 0 {
			return false
		}
		rec := httptest.NewRecorder()
		builtin.ServeHTTP(rec, r)
		var index struct {
			Paths map[string]map[string]string `json:"paths"`
		}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &index) != nil {
			return false
		}
		for k, d := range o.docs {
			index.Paths[k] = map[string]string{"serverRelativeURL": "/openapi/v3/" + k + "?" + url.Values{"hash": {d.hash}}.Encode()}
		}
		data, _ := json.Marshal(index)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Etag", strconv.Quote(fmt.Sprintf("%X", sha512.Sum512(data))))
		http.ServeContent(w, r, "", o.built, bytes.NewReader(data))
		return true
	}
	d, ok := o.docs[key]
	if !ok {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Etag", strconv.Quote(d.hash))
	if hash := r.URL.Query().Get("hash"); hash != "" {
		if hash != d.hash {
			http.Redirect(w, r, "/openapi/v3/"+key+"?"+url.Values{"hash": {d.hash}}.Encode(), http.StatusMovedPermanently)
			return true
		}
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	}
	http.ServeContent(w, r, "", o.built, bytes.NewReader(d.data))
	return true
}
