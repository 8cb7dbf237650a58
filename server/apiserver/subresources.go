package apiserver

import (
	"fmt"
	"net/http"

	"github.com/kelp-project/kelp/server/apiserver/registry"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func (s *Server) serveSubresource(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	var found *subresourceInfo
	for _, sub := range subresourcesOf(sv) {
		if sub.name == info.Subresource {
			found = &sub
			break
		}
	}
	if found == nil || info.Name == "" {
		s.writeError(w, r, apierrors.NewNotFound(sv.GroupResource(), info.Name))
		return
	}
	verb := info.Verb
	// A proxy passes every method on (upstream's ConnectMethods: HEAD and
	// OPTIONS too).
	allowed := found.kind == registry.PodProxySubresource || found.kind == registry.ServiceProxySubresource
	for _, v := range found.verbs {
		allowed = allowed || v == verb
	}
	if !allowed {
		s.writeError(w, r, apierrors.NewMethodNotSupported(sv.GroupResource(), verb))
		return
	}
	switch found.kind {
	case statusSubresource, registry.StatusLikeSubresource, registry.SpecLikeSubresource:
		switch verb {
		case "get":
			s.get(w, r, info, sv)
		case "update":
			s.update(w, r, info, sv, info.Subresource)
		case "patch":
			s.patch(w, r, info, sv, info.Subresource)
		}
	case scaleSubresource:
		s.scale(w, r, info, sv)
	case registry.SpecSubresource:
		s.update(w, r, info, sv, info.Subresource)
	case registry.BindingSubresource:
		s.bind(w, r, info, sv)
	case registry.KubeletSubresource:
		s.proxyToKubelet(w, r, info, sv)
	case registry.PodProxySubresource:
		s.serveProxy(w, r, info, sv, podProxy)
	case registry.ServiceProxySubresource:
		s.serveProxy(w, r, info, sv, s.serviceProxy())
	case registry.TokenSubresource:
		s.createToken(w, r, info)
	case registry.EvictionSubresource:
		s.evict(w, r, info, sv)
	}
}

// scaleOf presents a workload's replica count as an autoscaling/v1 Scale.
// Its resourceVersion is the workload's, so a Scale write is a
// compare-and-swap on the workload.
func scaleOf(sv *served, obj runtime.Object) (*autoscalingv1.Scale, error) {
	if sv.Scale == nil {
		return nil, fmt.Errorf("%s has no scale subresource", sv.GVR.Resource)
	}
	spec, status, sel := sv.Scale.Replicas(obj)
	om, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	selector := ""
	if sel != nil {
		if s, err := metav1.LabelSelectorAsSelector(sel); err == nil {
			selector = s.String()
		}
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: om.GetName(), Namespace: om.GetNamespace(), UID: om.GetUID(),
			ResourceVersion: om.GetResourceVersion(), CreationTimestamp: om.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}, nil
}

func (s *Server) scale(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	if info.Verb == "get" {
		obj, err := sv.store.Get(r.Context(), sv.store.Key(info.Namespace, info.Name))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		sc, err := scaleOf(sv, obj)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeObject(w, r, http.StatusOK, sc)
		return
	}
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
	manager, err := fieldManagerOf(r, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	scaleGVK := autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	ctx := withWriteOptions(r.Context(), writeOptions{manager: manager})
	out, err := s.updateObject(ctx, sv, info, "scale", func(cur runtime.Object) (runtime.Object, error) {
		current, err := scaleOf(sv, cur)
		if err != nil {
			return nil, err
		}
		want := &autoscalingv1.Scale{}
		if info.Verb == "patch" {
			pt := types.PatchType(mediaType(r))
			switch pt {
			case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
			default:
				return nil, unsupportedPatch(string(pt))
			}
			if err := patchInto(w, r, pt, data, current, scaleGVK, want, nil); err != nil {
				return nil, err
			}
		} else if err := decodeInto(w, r, data, mediaType(r), scaleGVK, want); err != nil {
			return nil, err
		}
		if want.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(scaleGVK.GroupKind(), info.Name, field.ErrorList{
				field.Invalid(field.NewPath("spec", "replicas"), want.Spec.Replicas, "must be greater than or equal to 0")})
		}
		if want.ResourceVersion != "" && want.ResourceVersion != current.ResourceVersion {
			return nil, apierrors.NewConflict(sv.GroupResource(), info.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		obj := cur.DeepCopyObject()
		sv.Scale.SetReplicas(obj, want.Spec.Replicas)
		return obj, nil
	}, dry)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sc, err := scaleOf(sv, out)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeObject(w, r, http.StatusOK, sc)
}

// bind assigns an object to a node, as the scheduler does through
// pods/binding; the kind's strategy decides what that changes.
func (s *Server) bind(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	dry, err := dryRun(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	b := &corev1.Binding{}
	if err := decodeBody(w, r, corev1.SchemeGroupVersion.WithKind("Binding"), b); err != nil {
		s.writeError(w, r, err)
		return
	}
	if b.Name != "" && b.Name != info.Name {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", b.Name, info.Name)))
		return
	}
	if b.Target.Name == "" {
		s.writeError(w, r, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), info.Name,
			field.ErrorList{field.Required(field.NewPath("target", "name"), "")}))
		return
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		s.writeError(w, r, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), info.Name,
			field.ErrorList{field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"})}))
		return
	}
	_, err = s.updateObject(r.Context(), sv, info, info.Subresource, func(cur runtime.Object) (runtime.Object, error) {
		return sv.Bind(cur, b)
	}, dry)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeObject(w, r, http.StatusCreated, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
}
