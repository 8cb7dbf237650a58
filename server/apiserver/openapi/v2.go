package openapi

// The Swagger 2.0 document at /openapi/v2.
//
// Unmodified kubectl still reads it in a few cases, always as protobuf:
//
//   - client-side validation (--validate=strict, the default) of a
//     `kind: List` manifest: cli-runtime's field validation verifier
//     declares v1/List unsupported without looking at any document, so
//     kubectl validates every item itself against the v2 definitions
//     (`kubectl get cm -o yaml | kubectl apply -f -` is such a manifest).
//   - the same for any kind when the /openapi/v3 check fails for another
//     reason than "unsupported" (the fallback verifier asks v2 then).
//   - kubectl explain -o plaintext-openapiv2.
//
// It is written from the same model as the v3 documents (buildModel), only
// spelled the v2 way, as upstream's kube-apiserver does: one document for
// the whole API; components under "definitions" and refs to
// "#/definitions/..."; a $ref with siblings as a bare $ref with the
// description and extensions beside it (no allOf); no defaults (upstream
// prunes them from v2); the single OpenAPISchemaType instead of oneOf; body
// parameters and consumes/produces instead of request bodies and content;
// and the parameters that many operations share moved to "parameters".
//
// The protobuf form is made as upstream does, by parsing the JSON with
// gnostic's openapiv2 package and marshalling the result; it is the form
// client-go's DiscoveryClient.OpenAPISchema asks for, and it only accepts
// that one.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
)

const (
	v2ServePath = "/openapi/v2"

	// The media types of the protobuf form, as kube-openapi's handler
	// names them: client-go asks for the first (@v1.0), and both are
	// answered with the second.
	mimeV2ProtobufDeprecated = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	mimeV2Protobuf           = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

	v2RefPrefix   = "#/definitions/"
	v2ParamPrefix = "#/parameters/"
)

// V2Document is one version of the /openapi/v2 document in its two forms,
// each with its own ETag (they are different representations; responses
// carry Vary: Accept). It is read-only once made.
type V2Document struct {
	json  document
	proto document
	built time.Time
}

// NewV2Document makes the document whose JSON form is data (which it keeps;
// the caller must not change it), converting it to protobuf.
func NewV2Document(data []byte) (*V2Document, error) {
	pb, err := toProtoBinary(data)
	if err != nil {
		return nil, fmt.Errorf("openapi: converting the v2 document to protobuf: %w", err)
	}
	return &V2Document{json: document{data: data, hash: hashOf(data)}, proto: document{data: pb, hash: hashOf(pb)}, built: time.Now()}, nil
}

// JSON returns the document's JSON form; the caller must not change it.
func (d *V2Document) JSON() []byte { return d.json.data }

// v2State is the /openapi/v2 document of a Handler. It is built separately
// from the v3 documents, on the first request for it: current kubectl
// rarely asks for it (see above), and the protobuf conversion is the most
// expensive step of all.
type v2State struct {
	once  sync.Once
	ready chan struct{}

	// Set before ready is closed, read-only after.
	err error
	V2Document
	duration time.Duration
}

func (h *Handler) startV2() { h.v2.once.Do(func() { go h.buildV2() }) }

// WaitV2 blocks until the /openapi/v2 document is built.
func (h *Handler) WaitV2() {
	h.startV2()
	<-h.v2.ready
}

func (h *Handler) buildV2() {
	st := &h.v2
	defer close(st.ready)
	defer func() {
		if p := recover(); p != nil {
			st.err = fmt.Errorf("openapi: generating the v2 document: %v", p)
		}
	}()
	start := time.Now()
	data, err := buildV2Document(h.resources)
	if err != nil {
		st.err = fmt.Errorf("openapi: generating the v2 document: %w", err)
		return
	}
	doc, err := NewV2Document(data)
	if err != nil {
		st.err = err
		return
	}
	st.V2Document = *doc
	st.duration = st.built.Sub(start)
}

// V2 returns the built-in API's /openapi/v2 document (the static one that
// the CRDs' definitions are merged into), building it if it is not built
// yet; it gives up when ctx ends.
func (h *Handler) V2(ctx context.Context) (*V2Document, error) {
	h.startV2()
	select {
	case <-h.v2.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if h.v2.err != nil {
		return nil, h.v2.err
	}
	return &h.v2.V2Document, nil
}

// toProtoBinary is kube-openapi's handler.ToProtoBinary: the protobuf form
// is the gnostic model of the JSON document.
func toProtoBinary(data []byte) ([]byte, error) {
	doc, err := openapi_v2.ParseDocument(data)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(doc)
}

// serveV2 serves the built-in /openapi/v2 document.
func (h *Handler) serveV2(w http.ResponseWriter, r *http.Request) {
	if _, ok := V2Form(w, r); !ok {
		return
	}
	doc, err := h.V2(r.Context())
	if err != nil {
		if r.Context().Err() == nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
		return
	}
	doc.ServeHTTP(w, r)
}

// V2Form negotiates the form of /openapi/v2 as kube-openapi does: the
// first Accept clause, by preference, that admits JSON or protobuf; JSON
// when there is no Accept header. It sets Vary: Accept on the response,
// and answers 406 itself (ok false) when neither form is admitted, so a
// caller can refuse before building anything.
func V2Form(w http.ResponseWriter, r *http.Request) (protobuf bool, ok bool) {
	w.Header().Set("Vary", "Accept")
	choice := negotiate(r.Header.Get("Accept"), "application/json", mimeV2ProtobufDeprecated, mimeV2Protobuf)
	if choice < 0 {
		http.Error(w, "only application/json and "+mimeV2Protobuf+" are served", http.StatusNotAcceptable)
		return false, false
	}
	return choice > 0, true
}

// ServeHTTP serves the document in the negotiated form (V2Form), with its
// ETag (If-None-Match answered 304) and the time it was built as
// Last-Modified.
func (d *V2Document) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	protobuf, ok := V2Form(w, r)
	if !ok {
		return
	}
	doc, ctype := d.json, "application/json"
	if protobuf {
		doc, ctype = d.proto, mimeV2Protobuf
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Etag", strconv.Quote(doc.hash))
	http.ServeContent(w, r, "", d.built, bytes.NewReader(doc.data))
}

// negotiate returns the index of the offer (a "type/subtype" media type)
// that the Accept header prefers, or -1 if it admits none. Clauses are
// taken by quality, then the more specific first (as goautoneg, which
// upstream's handlers use, sorts them); the first clause that matches any
// offer picks the first offer it matches. q=0 excludes a clause. An empty
// header admits anything, i.e. the first offer.
func negotiate(accept string, offers ...string) int {
	if strings.TrimSpace(accept) == "" {
		accept = "*/*"
	}
	type clause struct {
		typ, sub string
		q        float64
		wild     int // number of wildcards: 0, 1 (type/*) or 2 (*/*)
	}
	var clauses []clause
	for _, c := range strings.Split(accept, ",") {
		mt, params, _ := strings.Cut(c, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		typ, sub, ok := strings.Cut(mt, "/")
		if mt == "*" {
			typ, sub, ok = "*", "*", true
		}
		if !ok || typ == "" || sub == "" {
			continue
		}
		q := 1.0
		if v, ok := qValue(params); ok {
			q = v
		}
		if q <= 0 {
			continue
		}
		wild := 0
		if sub == "*" {
			wild++
		}
		if typ == "*" {
			wild++
		}
		clauses = append(clauses, clause{typ: typ, sub: sub, q: q, wild: wild})
	}
	sort.SliceStable(clauses, func(i, j int) bool {
		if clauses[i].q != clauses[j].q {
			return clauses[i].q > clauses[j].q
		}
		return clauses[i].wild < clauses[j].wild
	})
	for _, c := range clauses {
		for i, o := range offers {
			typ, sub, _ := strings.Cut(o, "/")
			if (c.typ == "*" || c.typ == typ) && (c.sub == "*" || c.sub == sub) {
				return i
			}
		}
	}
	return -1
}

// Swagger 2.0 path objects (fields in the alphabetical order of upstream
// documents).
type (
	pathItemV2 struct {
		Delete     *operationV2   `json:"delete,omitempty"`
		Get        *operationV2   `json:"get,omitempty"`
		Parameters []*parameterV2 `json:"parameters,omitempty"`
		Patch      *operationV2   `json:"patch,omitempty"`
		Post       *operationV2   `json:"post,omitempty"`
		Put        *operationV2   `json:"put,omitempty"`
	}
	operationV2 struct {
		Consumes    []string               `json:"consumes,omitempty"`
		Description string                 `json:"description,omitempty"`
		OperationID string                 `json:"operationId,omitempty"`
		Parameters  []*parameterV2         `json:"parameters,omitempty"`
		Produces    []string               `json:"produces,omitempty"`
		Responses   map[string]*responseV2 `json:"responses"`
		Schemes     []string               `json:"schemes,omitempty"`
		Tags        []string               `json:"tags,omitempty"`
		Action      string                 `json:"x-kubernetes-action,omitempty"`
		GVK         *gvk                   `json:"x-kubernetes-group-version-kind,omitempty"`
	}
	// parameterV2 is a parameter, or ({Ref} only) a reference to a shared
	// one.
	parameterV2 struct {
		Ref         string  `json:"$ref,omitempty"`
		Description string  `json:"description,omitempty"`
		Format      string  `json:"format,omitempty"`
		In          string  `json:"in,omitempty"`
		Name        string  `json:"name,omitempty"`
		Required    bool    `json:"required,omitempty"`
		Schema      *schema `json:"schema,omitempty"` // body parameters
		Type        string  `json:"type,omitempty"`   // the others
		UniqueItems bool    `json:"uniqueItems,omitempty"`
	}
	responseV2 struct {
		Description string  `json:"description"`
		Schema      *schema `json:"schema,omitempty"`
	}
)

// toV2 returns s as a Swagger 2.0 schema: a new tree, s is not changed.
func (s *schema) toV2() *schema {
	if s == nil {
		return nil
	}
	out := *s
	out.Default = nil // upstream prunes defaults from v2 (handler.PruneDefaults)
	if s.Ref != "" {
		out.Ref = v2RefPrefix + strings.TrimPrefix(s.Ref, refPrefix)
	}
	if len(s.OneOf) > 0 {
		out.OneOf, out.Type = nil, s.v2Type
	}
	if len(s.AllOf) == 1 && s.AllOf[0].Ref != "" && s.Ref == "" {
		// The v3 wrapping of a $ref with siblings (withSiblings,
		// unwrapRefForExtensions) is, in v2, the $ref with its siblings.
		out.AllOf = nil
		out.Ref = v2RefPrefix + strings.TrimPrefix(s.AllOf[0].Ref, refPrefix)
	} else if s.AllOf != nil {
		out.AllOf = make([]*schema, len(s.AllOf))
		for i, a := range s.AllOf {
			out.AllOf[i] = a.toV2()
		}
	}
	out.Items = s.Items.toV2()
	out.AdditionalProperties = s.AdditionalProperties.toV2()
	if s.Properties != nil {
		out.Properties = make(map[string]*schema, len(s.Properties))
		for k, p := range s.Properties {
			out.Properties[k] = p.toV2()
		}
	}
	return &out
}

// v2Paths converts the v3 path items of a model to v2 ones.
type v2Paths struct {
	paths  map[string]*pathItemV2
	params map[*parameter]*parameterV2 // so that shared ones stay shared
}

var httpsOnly = []string{"https"}

func (c *v2Paths) param(p *parameter) *parameterV2 {
	if v, ok := c.params[p]; ok {
		return v
	}
	v := &parameterV2{Description: p.Description, In: p.In, Name: p.Name, Required: p.Required}
	if p.Schema != nil {
		v.Type, v.Format, v.UniqueItems = p.Schema.Type, p.Schema.Format, p.Schema.UniqueItems
	}
	c.params[p] = v
	return v
}

func (c *v2Paths) paramList(ps []*parameter) []*parameterV2 {
	if len(ps) == 0 {
		return nil
	}
	out := make([]*parameterV2, len(ps))
	for i, p := range ps {
		out[i] = c.param(p)
	}
	return out
}

func (c *v2Paths) item(it *pathItem) *pathItemV2 {
	return &pathItemV2{
		Delete: c.operation(it.Delete), Get: c.operation(it.Get), Patch: c.operation(it.Patch),
		Post: c.operation(it.Post), Put: c.operation(it.Put),
		Parameters: c.paramList(it.Parameters),
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// operation converts an operation: the request body becomes the "body"
// parameter (first, as upstream) and consumes; the responses' content
// types become produces. Within one operation every content type has the
// same schema, so the first is the v2 one.
func (c *v2Paths) operation(o *operation) *operationV2 {
	if o == nil {
		return nil
	}
	out := &operationV2{
		Description: o.Description, OperationID: o.OperationID, Tags: o.Tags,
		Action: o.Action, GVK: o.GVK, Schemes: httpsOnly,
		Consumes: []string{"*/*"},
	}
	if rb := o.RequestBody; rb != nil && len(rb.Content) > 0 {
		types := sortedKeys(rb.Content)
		out.Consumes = types
		out.Parameters = append(out.Parameters, &parameterV2{In: "body", Name: "body", Required: rb.Required, Schema: rb.Content[types[0]].Schema.toV2()})
	}
	for _, p := range o.Parameters {
		out.Parameters = append(out.Parameters, c.param(p))
	}
	produces := map[string]bool{}
	out.Responses = make(map[string]*responseV2, len(o.Responses))
	for code, r := range o.Responses {
		rv := &responseV2{Description: r.Description}
		if len(r.Content) > 0 {
			types := sortedKeys(r.Content)
			rv.Schema = r.Content[types[0]].Schema.toV2()
			for _, t := range types {
				produces[t] = true
			}
		}
		out.Responses[code] = rv
	}
	out.Produces = sortedKeys(produces)
	return out
}

// shareParameters moves parameters that appear more than once to the
// document's "parameters" and refers to them there, with upstream's rule
// (kube-openapi builder.deduplicateParameters) for which may be shared:
// not "name" (its description names the kind), not fieldValidation and
// dryRun (older kubectl looks for them on the operation itself), and not
// the body of a kind's own schema. Names are <name>-<hash of the JSON>.
func (c *v2Paths) shareParameters() (map[string]*parameterV2, error) {
	shareable := func(p *parameterV2) bool {
		switch {
		case p.Ref != "":
			return false
		case p.Name == "name" && (p.In == "query" || p.In == "path"):
			return false
		case p.In == "query" && (p.Name == "fieldValidation" || p.Name == "dryRun"):
			return false
		case p.In == "body" && (p.Schema == nil || !strings.HasPrefix(p.Schema.Ref, v2RefPrefix+"io.k8s.apimachinery")):
			return false
		}
		return true
	}
	// Every parameter list of the document; shared entries are replaced
	// in place (the lists are the converter's own).
	var lists [][]*parameterV2
	for _, it := range c.paths {
		lists = append(lists, it.Parameters)
		for _, op := range []*operationV2{it.Delete, it.Get, it.Patch, it.Post, it.Put} {
			if op != nil {
				lists = append(lists, op.Parameters)
			}
		}
	}
	encoded := map[*parameterV2]string{} // JSON of the shareable ones
	counts := map[string]int{}
	first := map[string]*parameterV2{}
	for _, ps := range lists {
		for _, p := range ps {
			if !shareable(p) {
				continue
			}
			k, ok := encoded[p]
			if !ok {
				data, err := json.Marshal(p)
				if err != nil {
					return nil, err
				}
				k = string(data)
				encoded[p] = k
			}
			counts[k]++
			if first[k] == nil {
				first[k] = p
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for k, n := range counts {
		if n > 1 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	shared := map[string]*parameterV2{}
	refs := map[string]*parameterV2{} // JSON -> {$ref}
	for _, k := range keys {
		p := first[k]
		name := p.Name + "-" + base64Hash(k)
		for i := 1; shared[name] != nil; i++ {
			name = p.Name + "-" + strconv.Itoa(i) // a hash collision
		}
		shared[name] = p
		refs[k] = &parameterV2{Ref: v2ParamPrefix + name}
	}
	for _, ps := range lists {
		for i, p := range ps {
			if k, ok := encoded[p]; ok && refs[k] != nil {
				ps[i] = refs[k]
			}
		}
	}
	return shared, nil
}

func base64Hash(s string) string {
	h := fnv.New64()
	h.Write([]byte(s))
	return base64.URLEncoding.EncodeToString(h.Sum(nil)[:6])
}

// buildV2Document writes the Swagger 2.0 document of the whole API.
func buildV2Document(resources []Resource) ([]byte, error) {
	m := buildModel(resources)
	c := &v2Paths{paths: map[string]*pathItemV2{}, params: map[*parameter]*parameterV2{}}
	for _, key := range m.order {
		for p, it := range m.gvs[key].pb.paths {
			c.paths[p] = c.item(it)
		}
	}
	shared, err := c.shareParameters()
	if err != nil {
		return nil, err
	}

	// Every component is some operation's, directly or not, or one the
	// operations name by constant; upstream's document has them all too.
	names := sortedKeys(m.b.components)
	var buf bytes.Buffer
	buf.Grow(4 << 20)
	buf.WriteString(`{"definitions":{`)
	for i, n := range names {
		if i > 0 {
			buf.WriteByte(',')
		}
		q, err := json.Marshal(n)
		if err != nil {
			return nil, err
		}
		data, err := json.Marshal(m.b.components[n].toV2())
		if err != nil {
			return nil, err
		}
		buf.Write(q)
		buf.WriteByte(':')
		buf.Write(data)
	}
	buf.WriteString(`},"info":{"title":"Kubernetes","version":"unversioned"},"parameters":`)
	data, err := json.Marshal(shared)
	if err != nil {
		return nil, err
	}
	buf.Write(data)
	buf.WriteString(`,"paths":`)
	if data, err = json.Marshal(c.paths); err != nil {
		return nil, err
	}
	buf.Write(data)
	buf.WriteString(`,"security":[{"BearerToken":[]}],"securityDefinitions":{"BearerToken":{"description":"Bearer Token authentication","in":"header","name":"authorization","type":"apiKey"}},"swagger":"2.0"}`)
	return buf.Bytes(), nil
}
