package apiserver

import (
	"fmt"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	allowed := false
	for _, v := range found.verbs {
		allowed = allowed || v == verb
	}
	if !allowed {
		s.writeError(w, r, apierrors.NewMethodNotSupported(sv.GroupResource(), verb))
		return
	}
	switch info.Subresource {
	case "status":
		switch verb {
		case "get":
			s.get(w, r, info, sv)
		case "update":
			s.update(w, r, info, sv, "status")
		case "patch":
			s.patch(w, r, info, sv, "status")
		}
	case "scale":
		s.scale(w, r, info, sv)
	case "binding":
		s.bind(w, r, info, sv)
	case "finalize":
		s.update(w, r, info, sv, "finalize")
	case "log", "exec", "attach", "portforward":
		s.proxyToKubelet(w, r, info, sv)
	}
}

// scaleOf presents a workload's replica count as an autoscaling/v1 Scale.
// Its resourceVersion is the workload's, so a Scale write is a
// compare-and-swap on the workload.
func scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	var spec int32
	var status int32
	var sel *metav1.LabelSelector
	var om metav1.ObjectMeta
	switch o := obj.(type) {
	case *appsv1.Deployment:
		spec, status, sel, om = ptrOr(o.Spec.Replicas, 1), o.Status.Replicas, o.Spec.Selector, o.ObjectMeta
	case *appsv1.ReplicaSet:
		spec, status, sel, om = ptrOr(o.Spec.Replicas, 1), o.Status.Replicas, o.Spec.Selector, o.ObjectMeta
	case *appsv1.StatefulSet:
		spec, status, sel, om = ptrOr(o.Spec.Replicas, 1), o.Status.Replicas, o.Spec.Selector, o.ObjectMeta
	default:
		return nil, fmt.Errorf("%T has no scale subresource", obj)
	}
	selector := ""
	if sel != nil {
		if s, err := metav1.LabelSelectorAsSelector(sel); err == nil {
			selector = s.String()
		}
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: om.Name, Namespace: om.Namespace, UID: om.UID,
			ResourceVersion: om.ResourceVersion, CreationTimestamp: om.CreationTimestamp},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}, nil
}

func ptrOr(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}

func setReplicas(obj runtime.Object, n int32) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Replicas = &n
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = &n
	case *appsv1.StatefulSet:
		o.Spec.Replicas = &n
	}
}

func (s *Server) scale(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	if info.Verb == "get" {
		obj, err := sv.store.Get(r.Context(), sv.store.Key(info.Namespace, info.Name))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		sc, err := scaleOf(obj)
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
		current, err := scaleOf(cur)
		if err != nil {
			return nil, err
		}
		want := &autoscalingv1.Scale{}
		if info.Verb == "patch" {
			original, err := runtime.Encode(jsonSerializer, current)
			if err != nil {
				return nil, err
			}
			pt := types.PatchType(mediaType(r))
			switch pt {
			case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
			default:
				return nil, unsupportedPatch(string(pt))
			}
			patched, err := PatchJSON(pt, original, data, &autoscalingv1.Scale{})
			if err != nil {
				return nil, err
			}
			if err := decodeInto(w, r, patched, mediaJSON, scaleGVK, want); err != nil {
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
		setReplicas(obj, want.Spec.Replicas)
		return obj, nil
	}, dry)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sc, err := scaleOf(out)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeObject(w, r, http.StatusOK, sc)
}

// bind assigns a pod to a node, as the scheduler does through
// pods/binding. A pod is bound once: a second binding is a conflict.
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
	_, err = s.updateObject(r.Context(), sv, info, "binding", func(cur runtime.Object) (runtime.Object, error) {
		pod := cur.DeepCopyObject().(*corev1.Pod)
		if b.UID != "" && b.UID != pod.UID {
			return nil, apierrors.NewConflict(sv.GroupResource(), info.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID))
		}
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(sv.GroupResource(), info.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(sv.GroupResource(), info.Name, fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		setCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
		return pod, nil
	}, dry)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeObject(w, r, http.StatusCreated, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

func setCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status != c.Status {
				st.Conditions[i] = c
			}
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}
