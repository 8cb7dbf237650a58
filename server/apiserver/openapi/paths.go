package openapi

import (
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pathItem, operation & co. are the OpenAPI v3 path objects the documents
// use (fields in the alphabetical order of upstream documents).
type pathItem struct {
	Delete     *operation   `json:"delete,omitempty"`
	Get        *operation   `json:"get,omitempty"`
	Parameters []*parameter `json:"parameters,omitempty"`
	Patch      *operation   `json:"patch,omitempty"`
	Post       *operation   `json:"post,omitempty"`
	Put        *operation   `json:"put,omitempty"`
}

type operation struct {
	Description string               `json:"description,omitempty"`
	OperationID string               `json:"operationId,omitempty"`
	Parameters  []*parameter         `json:"parameters,omitempty"`
	RequestBody *requestBody         `json:"requestBody,omitempty"`
	Responses   map[string]*response `json:"responses"`
	Tags        []string             `json:"tags,omitempty"`
	Action      string               `json:"x-kubernetes-action,omitempty"`
	GVK         *gvk                 `json:"x-kubernetes-group-version-kind,omitempty"`
}

type parameter struct {
	Description string  `json:"description,omitempty"`
	In          string  `json:"in"`
	Name        string  `json:"name"`
	Required    bool    `json:"required,omitempty"`
	Schema      *schema `json:"schema"`
}

type requestBody struct {
	Content  map[string]*mediaType `json:"content"`
	Required bool                  `json:"required,omitempty"`
}

type response struct {
	Content     map[string]*mediaType `json:"content,omitempty"`
	Description string                `json:"description"`
}

type mediaType struct {
	Schema *schema `json:"schema"`
}

// Names of the apimachinery components operations refer to.
const (
	statusModel          = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
	deleteOptionsModel   = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
	patchModel           = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
	watchEventModel      = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"
	apiResourceListModel = "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList"
)

// Media types: what a response may come as, and the PATCH body types.
// kubectl picks a PATCH for its GVK and (client-side apply) requires
// application/strategic-merge-patch+json among the body types before it
// computes a strategic merge patch from the document.
var (
	responseTypes = []string{"application/json", "application/vnd.kubernetes.protobuf", "application/yaml"}
	watchTypes    = []string{"application/json", "application/json;stream=watch", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf;stream=watch", "application/yaml"}
	patchTypes    = []string{"application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"}
)

// Query parameters, described by the options types' own SwaggerDoc.
var (
	listDocs   = metav1.ListOptions{}.SwaggerDoc()
	deleteDocs = metav1.DeleteOptions{}.SwaggerDoc()
	patchDocs  = metav1.PatchOptions{}.SwaggerDoc()
)

func queryParam(name, typ, desc string) *parameter {
	// uniqueItems on a scalar is meaningless, but it is what upstream
	// documents have and costs nothing.
	return &parameter{Name: name, In: "query", Description: desc, Schema: &schema{Type: typ, UniqueItems: true}}
}

var (
	paramPretty = queryParam("pretty", "string", "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).")
	// The field validation parameter is what kubectl's --validate=strict
	// looks for on the PATCH of a GVK (cli-runtime's queryParamVerifierV3)
	// before relying on the server to reject unknown fields. Without it
	// kubectl falls back to client-side validation against /openapi/v2.
	paramFieldValidation = queryParam("fieldValidation", "string", patchDocs["fieldValidation"])
	paramDryRun          = queryParam("dryRun", "string", patchDocs["dryRun"])
	paramFieldManager    = queryParam("fieldManager", "string", patchDocs["fieldManager"])
	paramForce           = queryParam("force", "boolean", patchDocs["force"])

	paramGracePeriod       = queryParam("gracePeriodSeconds", "integer", deleteDocs["gracePeriodSeconds"])
	paramIgnoreStoreErrors = queryParam("ignoreStoreReadErrorWithClusterBreakingPotential", "boolean", deleteDocs["ignoreStoreReadErrorWithClusterBreakingPotential"])
	paramOrphan            = queryParam("orphanDependents", "boolean", deleteDocs["orphanDependents"])
	paramPropagation       = queryParam("propagationPolicy", "string", deleteDocs["propagationPolicy"])

	paramContinue      = queryParam("continue", "string", listDocs["continue"])
	paramFieldSelector = queryParam("fieldSelector", "string", listDocs["fieldSelector"])
	paramLabelSelector = queryParam("labelSelector", "string", listDocs["labelSelector"])
	paramLimit         = queryParam("limit", "integer", listDocs["limit"])
	paramRV            = queryParam("resourceVersion", "string", listDocs["resourceVersion"])
	paramRVMatch       = queryParam("resourceVersionMatch", "string", listDocs["resourceVersionMatch"])
	paramInitialEvents = queryParam("sendInitialEvents", "boolean", listDocs["sendInitialEvents"])
	paramTimeout       = queryParam("timeoutSeconds", "integer", listDocs["timeoutSeconds"])

	listParams = []*parameter{
		queryParam("allowWatchBookmarks", "boolean", listDocs["allowWatchBookmarks"]),
		paramContinue, paramFieldSelector, paramLabelSelector, paramLimit,
		paramRV, paramRVMatch, paramInitialEvents, paramTimeout,
		queryParam("watch", "boolean", listDocs["watch"]),
	}
	writeParams            = []*parameter{paramDryRun, paramFieldManager, paramFieldValidation}
	patchParams            = []*parameter{paramDryRun, paramFieldManager, paramFieldValidation, paramForce}
	deleteParams           = []*parameter{paramDryRun, paramGracePeriod, paramIgnoreStoreErrors, paramOrphan, paramPropagation}
	deleteCollectionParams = []*parameter{
		paramContinue, paramDryRun, paramFieldSelector, paramGracePeriod, paramIgnoreStoreErrors,
		paramLabelSelector, paramLimit, paramOrphan, paramPropagation,
		paramRV, paramRVMatch, paramInitialEvents, paramTimeout,
	}
)

func pathParam(name, desc string) *parameter {
	return &parameter{Name: name, In: "path", Required: true, Description: desc, Schema: &schema{Type: "string", UniqueItems: true}}
}

var paramNamespace = pathParam("namespace", "object name and auth scope, such as for teams and projects")

func content(types []string, model string) map[string]*mediaType {
	m := make(map[string]*mediaType, len(types))
	for _, t := range types {
		m[t] = &mediaType{Schema: refTo(model)}
	}
	return m
}

func okResponses(model string, codes ...string) map[string]*response {
	r := map[string]*response{"401": {Description: "Unauthorized"}}
	for _, c := range codes {
		r[c] = &response{Description: httpText[c], Content: content(responseTypes, model)}
	}
	return r
}

var httpText = map[string]string{"200": "OK", "201": "Created", "202": "Accepted"}

// gvNames are the spellings of a group-version in operation IDs and tags:
// "rbac.authorization.k8s.io", "v1" -> "RbacAuthorizationV1" and
// "rbacAuthorization_v1"; the core group is "Core".
func gvNames(group, version string) (opID, tag string) {
	g := "Core"
	if group != "" {
		var b strings.Builder
		for _, part := range strings.Split(strings.TrimSuffix(group, ".k8s.io"), ".") {
			b.WriteString(upperFirst(part))
		}
		g = b.String()
	}
	tag = strings.ToLower(g[:1]) + g[1:] + "_" + version
	return g + upperFirst(version), tag
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func hasVerb(verbs []string, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}

// pathsBuilder collects the path items of one group-version document.
type pathsBuilder struct {
	b     *builder
	paths map[string]*pathItem
	// roots are the components operations refer to; the document carries
	// these and everything they refer to.
	roots map[string]bool
}

func (pb *pathsBuilder) item(p string, params ...*parameter) *pathItem {
	it := pb.paths[p]
	if it == nil {
		it = &pathItem{Parameters: params}
		pb.paths[p] = it
	}
	return it
}

func (pb *pathsBuilder) model(t reflect.Type) string {
	n := pb.b.component(derefType(t))
	pb.roots[n] = true
	return n
}

// addResource adds the operations of one resource and its subresources, in
// the shapes and with the extensions upstream's documents have: every
// operation names the GVK it serves in x-kubernetes-group-version-kind and
// its kind of action in x-kubernetes-action.
func (pb *pathsBuilder) addResource(prefix string, r *Resource) {
	gvOp, tag := gvNames(r.Group, r.Version)
	tags := []string{tag}
	kindGVK := &gvk{Group: r.Group, Version: r.Version, Kind: r.Kind}
	model := pb.model(r.Type)
	listModel := ""
	if r.ListType != nil {
		listModel = pb.model(r.ListType)
	}
	ns := ""
	scope := ""
	itemParams := []*parameter{pathParam("name", "name of the "+r.Kind)}
	collParams := []*parameter{paramPretty}
	if r.Namespaced {
		ns = "namespaces/{namespace}/"
		scope = "Namespaced"
		itemParams = append(itemParams, paramNamespace)
		collParams = []*parameter{paramNamespace, paramPretty}
	}
	itemParams = append(itemParams, paramPretty)
	coll := prefix + "/" + ns + r.Plural
	item := coll + "/{name}"
	id := gvOp + scope + r.Kind
	verbs := r.Verbs

	op := func(desc, opID, action string, params []*parameter, body *requestBody, resp map[string]*response, g *gvk) *operation {
		return &operation{Description: desc, OperationID: opID, Parameters: params, RequestBody: body, Responses: resp, Tags: tags, Action: action, GVK: g}
	}
	anyBody := func(m string, required bool) *requestBody {
		return &requestBody{Content: content([]string{"*/*"}, m), Required: required}
	}
	patchBody := func() *requestBody { return &requestBody{Content: content(patchTypes, patchModel), Required: true} }

	if listModel != "" && hasVerb(verbs, "list") {
		pb.item(coll, collParams...).Get = op("list or watch objects of kind "+r.Kind, "list"+id, "list",
			listParams, nil, map[string]*response{"200": {Description: "OK", Content: content(watchTypes, listModel)}, "401": {Description: "Unauthorized"}}, kindGVK)
		if r.Namespaced {
			// The all-namespaces list, e.g. /api/v1/pods. Besides being an
			// API, it is one of the four paths kubectl explain searches for
			// the GVK of a resource.
			pb.item(prefix+"/"+r.Plural, append(append([]*parameter{}, listParams...), paramPretty)...).Get =
				op("list or watch objects of kind "+r.Kind, "list"+gvOp+r.Kind+"ForAllNamespaces", "list",
					nil, nil, map[string]*response{"200": {Description: "OK", Content: content(watchTypes, listModel)}, "401": {Description: "Unauthorized"}}, kindGVK)
		}
	}
	if hasVerb(verbs, "create") {
		pb.item(coll, collParams...).Post = op("create a "+r.Kind, "create"+id, "post",
			writeParams, anyBody(model, true), okResponses(model, "200", "201", "202"), kindGVK)
	}
	if hasVerb(verbs, "deletecollection") {
		pb.roots[statusModel], pb.roots[deleteOptionsModel] = true, true
		pb.item(coll, collParams...).Delete = op("delete collection of "+r.Kind, "delete"+gvOp+"Collection"+scope+r.Kind, "deletecollection",
			deleteCollectionParams, anyBody(deleteOptionsModel, false), okResponses(statusModel, "200"), kindGVK)
	}
	if hasVerb(verbs, "get") {
		pb.item(item, itemParams...).Get = op("read the specified "+r.Kind, "read"+id, "get",
			nil, nil, okResponses(model, "200"), kindGVK)
	}
	if hasVerb(verbs, "update") {
		pb.item(item, itemParams...).Put = op("replace the specified "+r.Kind, "replace"+id, "put",
			writeParams, anyBody(model, true), okResponses(model, "200", "201"), kindGVK)
	}
	if hasVerb(verbs, "patch") {
		pb.roots[patchModel] = true
		pb.item(item, itemParams...).Patch = op("partially update the specified "+r.Kind, "patch"+id, "patch",
			patchParams, patchBody(), okResponses(model, "200", "201"), kindGVK)
	}
	if hasVerb(verbs, "delete") {
		pb.roots[statusModel], pb.roots[deleteOptionsModel] = true, true
		pb.item(item, itemParams...).Delete = op("delete a "+r.Kind, "delete"+id, "delete",
			deleteParams, anyBody(deleteOptionsModel, false), okResponses(statusModel, "200", "202"), kindGVK)
	}
	if hasVerb(verbs, "watch") {
		// The deprecated /watch/ paths: kubectl does not use them, but they
		// are part of the documented API surface.
		pb.roots[watchEventModel] = true
		watchResp := map[string]*response{"200": {Description: "OK", Content: content(watchTypes, watchEventModel)}, "401": {Description: "Unauthorized"}}
		wparams := append(append([]*parameter{}, listParams...), paramPretty)
		if r.Namespaced {
			pb.item(prefix+"/watch/"+ns+r.Plural, append([]*parameter{paramNamespace}, wparams...)...).Get =
				op("watch individual changes to a list of "+r.Kind+". deprecated: use the 'watch' parameter with a list operation instead.", "watch"+id+"List", "watchlist", nil, nil, watchResp, kindGVK)
			pb.item(prefix+"/watch/"+r.Plural, wparams...).Get =
				op("watch individual changes to a list of "+r.Kind+". deprecated: use the 'watch' parameter with a list operation instead.", "watch"+gvOp+r.Kind+"ListForAllNamespaces", "watchlist", nil, nil, watchResp, kindGVK)
			pb.item(prefix+"/watch/"+ns+r.Plural+"/{name}", append([]*parameter{itemParams[0], paramNamespace}, wparams...)...).Get =
				op("watch changes to an object of kind "+r.Kind+". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.", "watch"+id, "watch", nil, nil, watchResp, kindGVK)
		} else {
			pb.item(prefix+"/watch/"+r.Plural, wparams...).Get =
				op("watch individual changes to a list of "+r.Kind+". deprecated: use the 'watch' parameter with a list operation instead.", "watch"+id+"List", "watchlist", nil, nil, watchResp, kindGVK)
			pb.item(prefix+"/watch/"+r.Plural+"/{name}", append([]*parameter{itemParams[0]}, wparams...)...).Get =
				op("watch changes to an object of kind "+r.Kind+". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.", "watch"+id, "watch", nil, nil, watchResp, kindGVK)
		}
	}

	for i := range r.Subresources {
		sr := &r.Subresources[i]
		srGVK := &gvk{Group: sr.Group, Version: sr.Version, Kind: sr.Kind}
		if srGVK.Kind == "" {
			// Status-like subresource: same kind as the resource.
			*srGVK = *kindGVK
		}
		// The body: the resource's own type, a component, or (for a
		// non-struct Type such as string, e.g. pods/log) a plain text body.
		srModel, textBody := model, (*schema)(nil)
		if sr.Type != nil {
			if st := derefType(sr.Type); st.Kind() == reflect.Struct {
				srModel = pb.model(st)
			} else {
				srModel, textBody = "", pb.b.typeSchema(st)
			}
		}
		p := item + "/" + sr.Name
		srID := id + subresourceID(sr.Name)
		what := sr.Name + " of the specified " + r.Kind
		srVerbs := sr.Verbs
		if len(srVerbs) == 0 {
			srVerbs = defaultSubresourceVerbs(sr.Name)
		}
		resp := func(codes ...string) map[string]*response {
			if textBody != nil {
				return map[string]*response{"200": {Description: "OK", Content: map[string]*mediaType{"text/plain": {Schema: textBody}}}, "401": {Description: "Unauthorized"}}
			}
			return okResponses(srModel, codes...)
		}
		body := func() *requestBody {
			if textBody != nil {
				return nil
			}
			return anyBody(srModel, true)
		}
		if hasVerb(srVerbs, "get") {
			pb.item(p, itemParams...).Get = op("read "+what, "read"+srID, "get", nil, nil, resp("200"), srGVK)
		}
		if hasVerb(srVerbs, "create") {
			pb.item(p, itemParams...).Post = op("create "+sr.Name+" of a "+r.Kind, "create"+srID, "post",
				writeParams, body(), resp("200", "201", "202"), srGVK)
		}
		if hasVerb(srVerbs, "update") {
			pb.item(p, itemParams...).Put = op("replace "+what, "replace"+srID, "put",
				writeParams, body(), resp("200", "201"), srGVK)
		}
		if hasVerb(srVerbs, "patch") {
			// Invariant: every PATCH of a GVK carries fieldValidation and
			// the strategic-merge body type. kubectl looks only at the first
			// PATCH of the GVK it meets, in map order, so a subresource PATCH
			// of the resource's own kind (status) must qualify too.
			pb.roots[patchModel] = true
			pb.item(p, itemParams...).Patch = op("partially update "+what, "patch"+srID, "patch",
				patchParams, patchBody(), resp("200", "201"), srGVK)
		}
		if hasVerb(srVerbs, "delete") {
			pb.roots[statusModel], pb.roots[deleteOptionsModel] = true, true
			pb.item(p, itemParams...).Delete = op("delete "+what, "delete"+srID, "delete",
				deleteParams, anyBody(deleteOptionsModel, false), okResponses(statusModel, "200", "202"), srGVK)
		}
	}
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// subresourceID spells a subresource in an operation ID: "status" ->
// "Status", "ephemeralcontainers" -> "Ephemeralcontainers".
func subresourceID(name string) string {
	var b strings.Builder
	for _, part := range strings.Split(name, "/") {
		b.WriteString(upperFirst(part))
	}
	return b.String()
}

func defaultSubresourceVerbs(name string) []string {
	switch name {
	case "binding", "eviction", "token":
		return []string{"create"}
	case "log":
		return []string{"get"}
	default:
		return []string{"get", "update", "patch"}
	}
}
