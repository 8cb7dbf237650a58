package apiserver

import (
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/server/apiserver/storage"
)

func (s *Server) get(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	obj, err := sv.store.Get(r.Context(), sv.store.Key(info.Namespace, info.Name))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeResult(w, r, http.StatusOK, obj, sv)
}

// listOptions reads the list and watch query parameters with upstream's
// own parameter codec, so every spelling a client may send ("?watch",
// "sendInitialEvents=", "limit=…") means what it means upstream.
func listOptions(r *http.Request, info requestInfo, sv *served) (storage.ListOptions, error) {
	internal := &metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, internal); err != nil {
		return storage.ListOptions{}, apierrors.NewBadRequest(err.Error())
	}
	internal.Watch = info.Verb == "watch"
	o := storage.ListOptions{
		Namespace:         info.Namespace,
		ResourceVersion:   internal.ResourceVersion,
		RVMatch:           internal.ResourceVersionMatch,
		Continue:          internal.Continue,
		Limit:             internal.Limit,
		AllowBookmarks:    internal.AllowWatchBookmarks,
		SendInitialEvents: internal.SendInitialEvents,
		Predicate:         storage.Predicate{Attrs: sv.Attrs, Label: internal.LabelSelector, Field: internal.FieldSelector},
	}
	if _, err := storage.ParseRV(o.ResourceVersion); err != nil {
		return o, err
	}
	if o.Limit < 0 {
		return o, apierrors.NewBadRequest("limit must be a non-negative integer")
	}
	if err := sv.CheckFieldSelector(o.Predicate.Field); err != nil {
		return o, apierrors.NewBadRequest(err.Error())
	}
	// The combination rules (resourceVersionMatch needs resourceVersion,
	// sendInitialEvents is for watches only, ...) are apimachinery's, with
	// upstream's 422 answers.
	if errs := metainternalversionvalidation.ValidateListOptions(internal, true); len(errs) > 0 {
		return o, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "", errs)
	}
	if o.Continue != "" && o.ResourceVersion != "" && o.ResourceVersion != "0" {
		return o, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	return o, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	o, err := listOptions(r, info, sv)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := sv.store.List(r.Context(), o)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list := sv.NewList()
	if err := meta.SetList(list, res.Items); err != nil {
		s.writeError(w, r, err)
		return
	}
	lm, _ := meta.ListAccessor(list)
	lm.SetResourceVersion(strconv.FormatInt(res.ResourceVersion, 10))
	lm.SetContinue(res.Continue)
	lm.SetRemainingItemCount(res.RemainingItemCount)
	list.GetObjectKind().SetGroupVersionKind(sv.GVR.GroupVersion().WithKind(sv.Kind + "List"))
	s.writeResult(w, r, http.StatusOK, list, sv)
}

// writeResult writes an object or list in the negotiated form: the object
// itself, a Table, or PartialObjectMetadata.
func (s *Server) writeResult(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object, sv *served) {
	a := negotiate(r)
	if a.invalid {
		s.writeError(w, r, notAcceptable())
		return
	}
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		obj.GetObjectKind().SetGroupVersionKind(sv.GVK())
	}
	switch a.as {
	case "Table":
		t, err := s.table(r, obj, true, sv)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeObject(w, r, code, t)
	case "PartialObjectMetadata", "PartialObjectMetadataList":
		s.writeObject(w, r, code, partialMetadata(obj))
	default:
		s.writeObject(w, r, code, obj)
	}
}

// partialMetadata strips objects to their metadata, for metadata-only
// clients such as the garbage collector.
func partialMetadata(obj runtime.Object) runtime.Object {
	if meta.IsListType(obj) {
		out := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"}}
		if lm, err := meta.ListAccessor(obj); err == nil {
			out.ResourceVersion = lm.GetResourceVersion()
			out.Continue = lm.GetContinue()
			out.RemainingItemCount = lm.GetRemainingItemCount()
		}
		_ = meta.EachListItem(obj, func(item runtime.Object) error {
			out.Items = append(out.Items, *metadataOf(item))
			return nil
		})
		return out
	}
	return metadataOf(obj)
}

func metadataOf(obj runtime.Object) *metav1.PartialObjectMetadata {
	pm := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		// A custom object's metadata is a map; the round trip through
		// JSON is what upstream's metadata-only path does too.
		if m, ok := u.Object["metadata"].(map[string]interface{}); ok {
			_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &pm.ObjectMeta)
		}
		return pm
	}
	if oma, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if om, ok := oma.GetObjectMeta().(*metav1.ObjectMeta); ok {
			pm.ObjectMeta = *om
		}
	}
	return pm
}
