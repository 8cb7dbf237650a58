package apiserver

import (
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// maxJSONPatchOps bounds the work one JSON patch can ask for.
const maxJSONPatchOps = 10000

func init() {
	// JSON patch "copy" can double a document per operation; cap the
	// growth at the request body limit, as upstream does.
	jsonpatch.AccumulatedCopySizeLimit = MaxBodyBytes
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served, subresource string) {
	dry, err := dryRun(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	data, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pt := types.PatchType(mediaType(r))
	switch pt {
	case types.StrategicMergePatchType:
		// Custom objects have no Go type to read merge keys from;
		// upstream's CRD handler does not accept this patch type either.
		if sv.Custom != nil {
			s.writeError(w, r, unsupportedPatchOf(string(pt), "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"))
			return
		}
	case types.JSONPatchType, types.MergePatchType:
	case types.ApplyYAMLPatchType:
		s.serverSideApply(w, r, info, sv, subresource, data, dry)
		return
	case types.ApplyCBORPatchType:
		s.writeError(w, r, unsupportedPatch(string(pt)))
		return
	default:
		s.writeError(w, r, unsupportedPatch(string(pt)))
		return
	}
	manager, err := fieldManagerOf(r, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := withWriteOptions(r.Context(), writeOptions{manager: manager})
	out, err := s.updateObject(ctx, sv, info, subresource, func(cur runtime.Object) (runtime.Object, error) {
		return applyPatch(w, r, sv, pt, data, cur)
	}, dry)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeResult(w, r, http.StatusOK, out, sv)
}

// applyPatch applies one patch to the current object and decodes the
// result under the request's fieldValidation. It is called again on every
// retry, against the newest stored object.
func applyPatch(w http.ResponseWriter, r *http.Request, sv *served, pt types.PatchType, patch []byte, cur runtime.Object) (runtime.Object, error) {
	original, err := runtime.Encode(jsonSerializer, cur)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	patched, err := PatchJSON(pt, original, patch, sv.New())
	if err != nil {
		return nil, err
	}
	obj := sv.New()
	if err := decodeInto(w, r, patched, mediaJSON, sv.GVK(), obj); err != nil {
		return nil, err
	}
	if err := unknownCustomFields(w, r, sv, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// PatchJSON applies a JSON, merge or strategic merge patch to a JSON
// document. schema is the Go type strategic merge patch reads its merge
// keys from. Errors are Status errors: malformed patches are 400, patches
// that cannot apply are 422.
func PatchJSON(pt types.PatchType, original, patch []byte, schemaObj runtime.Object) (out []byte, err error) {
	// Both patch libraries panic on some malformed patches (a root "test"
	// without a value; a merge key that is a list). Such a patch is the
	// client's error, never the server's.
	defer func() {
		if p := recover(); p != nil {
			out = nil
			if pt == types.JSONPatchType {
				err = invalidPatch(fmt.Errorf("%v", p))
			} else {
				err = apierrors.NewBadRequest(fmt.Sprintf("invalid patch: %v", p))
			}
		}
	}()
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if len(p) > maxJSONPatchOps {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch are %d, got %d", maxJSONPatchOps, len(p)))
		}
		out, err := p.Apply(original)
		if err != nil {
			return nil, invalidPatch(err)
		}
		return out, nil
	case types.MergePatchType:
		out, err := jsonpatch.MergePatch(original, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	case types.StrategicMergePatchType:
		out, err := strategicpatch.StrategicMergePatch(original, patch, schemaObj)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	}
	return nil, unsupportedPatch(string(pt))
}

func invalidPatch(err error) error {
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "",
		"the server rejected our request due to an error in our request: "+err.Error(), 0, false)
}

func unsupportedPatch(mt string) error {
	return unsupportedPatchOf(mt, "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json")
}

func unsupportedPatchOf(mt, accepted string) error {
	return &apierrors.StatusError{ErrStatus: statusFailure(http.StatusUnsupportedMediaType, "UnsupportedMediaType",
		fmt.Sprintf("the body of the request was in an unknown format (%q) - accepted media types include: %s", mt, accepted))}
}

// serverSideApply merges an apply configuration into the live object (or
// an empty one, creating it) under the request's field manager; conflicts
// with other managers are 409 unless force=true.
func (s *Server) serverSideApply(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served, subresource string, data []byte, dry bool) {
	manager, err := fieldManagerOf(r, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	force := isTrue(r.URL.Query().Get("force"))
	ctx := withWriteOptions(r.Context(), writeOptions{manager: manager, applied: true})
	out, err := s.updateObject(ctx, sv, info, subresource, func(cur runtime.Object) (runtime.Object, error) {
		return s.fields.Apply(sv.GVK(), subresource, cur, data, manager, force)
	}, dry)
	if apierrors.IsNotFound(err) && subresource == "" {
		empty := sv.New()
		acc, _ := meta.Accessor(empty)
		acc.SetName(info.Name)
		acc.SetNamespace(info.Namespace)
		obj, aerr := s.fields.Apply(sv.GVK(), "", empty, data, manager, force)
		if aerr != nil {
			s.writeError(w, r, aerr)
			return
		}
		out, err = s.createObject(ctx, sv, info.Namespace, obj, dry)
		if err == nil {
			s.writeCreated(w, r, out, sv)
			return
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeResult(w, r, http.StatusOK, out, sv)
}
