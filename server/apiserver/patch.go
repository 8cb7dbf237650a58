package apiserver

import (
	"fmt"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
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
	if _, err := fieldValidation(r); err != nil {
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

// applyStrictDecoding is upstream's check of an apply configuration
// under fieldValidation Strict or Warn: the YAML decoded strictly into a
// map, which finds duplicate keys (in custom objects too, whatever their
// schema preserves), as "line N: key "x" already set in map". Strict
// returns the 400 to answer once the apply itself has succeeded (an apply
// error wins, as upstream's); Warn adds each finding as a Warning now.
func applyStrictDecoding(w http.ResponseWriter, r *http.Request, data []byte) (refusal, err error) {
	validation, err := fieldValidation(r)
	if err != nil || validation == "Ignore" {
		return nil, err
	}
	serr := yaml.UnmarshalStrict(data, &map[string]any{})
	if serr == nil {
		return nil, nil
	}
	if validation == "Strict" {
		return apierrors.NewBadRequest("error strict decoding patch: " + serr.Error()), nil
	}
	for _, msg := range yamlWarnings(serr.Error()) {
		addWarning(w, msg)
	}
	return nil, nil
}

// yamlWarnings splits a YAML strict decoding error into its findings, one
// a line, as upstream's parseYAMLWarnings; another error is one warning.
func yamlWarnings(msg string) []string {
	for _, prefix := range []string{"error converting YAML to JSON: yaml: unmarshal errors:\n", "yaml: unmarshal errors:\n"} {
		if rest, ok := strings.CutPrefix(msg, prefix); ok {
			lines := strings.Split(rest, "\n")
			for i := range lines {
				lines[i] = strings.TrimSpace(lines[i])
			}
			return lines
		}
	}
	return []string{msg}
}

// patchDuplicates is upstream's strict reading of a JSON, merge or
// strategic merge patch body under fieldValidation Strict or Warn: the
// patch libraries keep the last of duplicate keys, so a duplicate is found
// only in the body itself (a JSON patch's as "json patch duplicate field
// ...").
func patchDuplicates(pt types.PatchType, patch []byte) []error {
	var errs []error
	switch pt {
	case types.JSONPatchType:
		var ops []struct {
			Op    string `json:"op"`
			Path  string `json:"path"`
			From  string `json:"from"`
			Value any    `json:"value"`
		}
		errs, _ = kjson.UnmarshalStrict(patch, &ops)
		for i, e := range errs {
			errs[i] = fmt.Errorf("json patch %v", e)
		}
	case types.MergePatchType, types.StrategicMergePatchType:
		errs, _ = kjson.UnmarshalStrict(patch, &map[string]any{})
	}
	return errs
}

// applyPatch applies one patch to the current object and decodes the
// result under the request's fieldValidation (patchInto), pruning a
// custom object's undeclared fields. It is called again on every retry,
// against the newest stored object.
func applyPatch(w http.ResponseWriter, r *http.Request, sv *served, pt types.PatchType, patch []byte, cur runtime.Object) (runtime.Object, error) {
	obj := sv.New()
	if err := patchInto(w, r, pt, patch, cur, sv.GVK(), obj, func(o runtime.Object) []error { return pruneCustom(sv, o) }); err != nil {
		return nil, err
	}
	return obj, nil
}

// patchInto applies one patch to cur and decodes the result into into, of
// kind gvk; prune, if any, drops and names the fields into's schema does
// not declare. As upstream's patcher: a patch that cannot apply answers
// first (PatchJSON's 400 or 422); a patched object that does not decode,
// or whose strict reading finds something under Strict (the patch body's
// duplicate fields, then the object's unknown ones), is a 422 Invalid of
// the field "patch", valued with the patched object; under Warn each
// finding is a Warning.
func patchInto(w http.ResponseWriter, r *http.Request, pt types.PatchType, patch []byte, cur runtime.Object, gvk schema.GroupVersionKind, into runtime.Object, prune func(runtime.Object) []error) error {
	original, err := runtime.Encode(jsonSerializer, cur)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	patched, err := PatchJSON(pt, original, patch, into)
	if err != nil {
		return err
	}
	validation, err := fieldValidation(r)
	if err != nil {
		return err
	}
	refuse := func(detail string) error { return invalidPatched(patched, detail) }
	strict, err := decodeStrictly(patched, mediaJSON, gvk, into)
	if err != nil {
		return refuse(err.Error())
	}
	if prune != nil {
		strict = append(strict, prune(into)...)
	}
	if validation == "Ignore" {
		return nil
	}
	return weighStrict(w, validation, append(patchDuplicates(pt, patch), strict...), refuse)
}

// invalidPatched is upstream's answer to a patched object it cannot take:
// 422, the field "patch" invalid, its value the patched object.
func invalidPatched(patched []byte, detail string) error {
	return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patched), detail)})
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
	strictErr, err := applyStrictDecoding(w, r, data)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := withWriteOptions(r.Context(), writeOptions{manager: manager, applied: true})
	out, err := s.updateObject(ctx, sv, info, subresource, func(cur runtime.Object) (runtime.Object, error) {
		obj, err := s.fields.Apply(sv.GVK(), subresource, cur, data, manager, force)
		if err == nil && strictErr != nil {
			return nil, strictErr
		}
		return obj, err
	}, dry)
	if apierrors.IsNotFound(err) && subresource == "" {
		empty := sv.New()
		acc, _ := meta.Accessor(empty)
		acc.SetName(info.Name)
		acc.SetNamespace(info.Namespace)
		obj, aerr := s.fields.Apply(sv.GVK(), "", empty, data, manager, force)
		if aerr == nil && strictErr != nil {
			aerr = strictErr
		}
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
