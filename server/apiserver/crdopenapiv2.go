package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sirupsen/logrus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kelp-project/kelp/server/apiserver/openapi"
)

// The CRDs in /openapi/v2.
//
// kube-apiserver serves one Swagger 2.0 document for the whole API: the
// built-in kinds' document with every established CRD merged in, as
// apiextensions-apiserver's openapi controller makes it: each served
// version's spec from builder.BuildOpenAPIV2 (defaults pruned), a CRD's
// versions merged together, then all CRDs into the built-in document with
// builder.MergeSpecs (definitions named by reversed group, such as
// com.example.v1.Widget, and the CRDs' paths). kelp does the same with the
// same builder. A CRD is served here from the moment its resources are in
// the served table, which is when kelp sets Established.
//
// Unlike upstream, which rebuilds the merged spec lazily on its cached
// values but keeps every CRD's spec, kelp keeps nothing of it but the last
// document served: a CRD change drops it, and the next request for
// /openapi/v2 builds it again from the built-in document's JSON and the
// CRDs then served. A server whose clients never ask for /openapi/v2 (most
// of them: kubectl asks /openapi/v3 first) builds nothing, and CRD events
// cost no more than forgetting the document.

// crdOpenAPIV2 is the /openapi/v2 document with the CRDs merged in.
type crdOpenAPIV2 struct {
	hash string // inputHash of the CRDs it is built from
	doc  *openapi.V2Document
}

// serveV2 serves /openapi/v2 with the CRDs in it; it returns false when no
// CRD is served, for the built-in handler to serve its document alone.
func (o *crdOpenAPI) serveV2(w http.ResponseWriter, r *http.Request, builtin builtinOpenAPI) bool {
	o.mu.Lock()
	none := len(o.served) == 0
	o.mu.Unlock()
	if none {
		return false
	}
	if _, ok := openapi.V2Form(w, r); !ok {
		return true // 406, before building anything
	}
	doc, err := o.v2Document(r.Context(), builtin)
	if err != nil {
		if r.Context().Err() == nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
		return true
	}
	doc.ServeHTTP(w, r)
	return true
}

// v2Document returns the current /openapi/v2 document, building it if a
// CRD changed since it was last built.
func (o *crdOpenAPI) v2Document(ctx context.Context, builtin builtinOpenAPI) (*openapi.V2Document, error) {
	if doc := o.keptV2(); doc != nil {
		return doc, nil
	}
	static, err := builtin.V2(ctx)
	if err != nil {
		return nil, err
	}
	// One build at a time (with the v3 documents' builds): concurrent
	// readers after a change wait for the first one's document.
	o.build.Lock()
	defer o.build.Unlock()
	if doc := o.keptV2(); doc != nil {
		return doc, nil
	}
	o.mu.Lock()
	hash := inputHash(o.served)
	crds, err := decodeServed(o.served)
	o.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if len(crds) == 0 {
		return static, nil // all went meanwhile
	}
	data, err := buildV2WithCRDs(static.JSON(), crds)
	if err != nil {
		return nil, fmt.Errorf("openapi: merging the CRDs into the v2 document: %w", err)
	}
	doc, err := openapi.NewV2Document(data)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// Kept only if no CRD changed while it was built; either way it
	// answers this request, made from the CRDs served when it came.
	if o.v2 == nil && inputHash(o.served) == hash {
		o.v2 = &crdOpenAPIV2{hash: hash, doc: doc}
	}
	return doc, nil
}

func (o *crdOpenAPI) keptV2() *openapi.V2Document {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.v2 == nil {
		return nil
	}
	return o.v2.doc
}

// buildV2WithCRDs merges the CRDs' served versions into the built-in
// Swagger 2.0 document (JSON), as upstream's openapi controller does; a
// CRD whose spec cannot be built is left out (upstream skips it too) and
// logged. crds are in name order.
func buildV2WithCRDs(static []byte, crds []*apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	specs := make([]*spec.Swagger, 0, len(crds))
	for _, crd := range crds {
		s, err := crdV2Spec(crd)
		if err != nil {
			logrus.WithError(err).Warnf("CRD %s: left out of /openapi/v2", crd.Name)
			continue
		}
		specs = append(specs, s)
	}
	var base spec.Swagger
	if err := json.Unmarshal(static, &base); err != nil {
		return nil, err
	}
	merged, err := builder.MergeSpecs(&base, specs...)
	if err != nil {
		return nil, err
	}
	return json.Marshal(merged)
}

// crdV2Spec is the Swagger 2.0 spec of a CRD's served versions.
func crdV2Spec(crd *apiextensionsv1.CustomResourceDefinition) (*spec.Swagger, error) {
	merged := &spec.Swagger{}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		s, err := builder.BuildOpenAPIV2(crd, v.Name, builder.Options{V2: true, IncludeSelectableFields: true})
		if err != nil {
			return nil, fmt.Errorf("version %s: %w", v.Name, err)
		}
		s.Definitions = handler.PruneDefaults(s.Definitions)
		if merged, err = builder.MergeSpecs(merged, s); err != nil {
			return nil, fmt.Errorf("version %s: %w", v.Name, err)
		}
	}
	return merged, nil
}
