package statefulset

import (
	"regexp"
	"strconv"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubectl/pkg/util/podutils"
)

var podKind = v1.SchemeGroupVersion.WithKind("Pod")

// memberName splits a pod name into <set>-<ordinal>, as upstream reads a
// StatefulSet's pods: ordinal -1 when the name has no numeric suffix.
var memberName = regexp.MustCompile(`^(.*)-([0-9]+)$`)

func parentAndOrdinal(pod *v1.Pod) (string, int) {
	m := memberName.FindStringSubmatch(pod.Name)
	if m == nil {
		return "", -1
	}
	n, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return m[1], -1
	}
	return m[1], int(n)
}

func ordinalOf(pod *v1.Pod) int {
	_, o := parentAndOrdinal(pod)
	return o
}

func isMember(set *apps.StatefulSet, pod *v1.Pod) bool {
	parent, _ := parentAndOrdinal(pod)
	return parent == set.Name
}

func replicasOf(set *apps.StatefulSet) int {
	if set.Spec.Replicas == nil {
		return 1
	}
	return int(*set.Spec.Replicas)
}

// startOrdinal is spec.ordinals.start (0 without it); the set's pods are
// start .. start+replicas-1.
func startOrdinal(set *apps.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

func inRange(set *apps.StatefulSet, pod *v1.Pod) bool {
	o := ordinalOf(pod)
	return o >= startOrdinal(set) && o < startOrdinal(set)+replicasOf(set)
}

func podName(set *apps.StatefulSet, ordinal int) string {
	return set.Name + "-" + strconv.Itoa(ordinal)
}

func claimName(set *apps.StatefulSet, template *v1.PersistentVolumeClaim, ordinal int) string {
	return template.Name + "-" + set.Name + "-" + strconv.Itoa(ordinal)
}

// identityMatches: the pod is the set's member by name and namespace and
// carries its identity labels.
func identityMatches(set *apps.StatefulSet, pod *v1.Pod) bool {
	parent, o := parentAndOrdinal(pod)
	return o >= 0 && parent == set.Name && pod.Namespace == set.Namespace &&
		pod.Labels[apps.StatefulSetPodNameLabel] == pod.Name && pod.Labels[apps.PodIndexLabel] == strconv.Itoa(o)
}

// setIdentity gives pod the identity labels of its ordinal.
func setIdentity(pod *v1.Pod) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[apps.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[apps.PodIndexLabel] = strconv.Itoa(ordinalOf(pod))
}

// storageMatches: every volumeClaimTemplate is a volume of the pod
// pointing at the ordinal's claim.
func storageMatches(set *apps.StatefulSet, pod *v1.Pod) bool {
	o := ordinalOf(pod)
	if o < 0 {
		return false
	}
	vols := make(map[string]*v1.Volume, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	for i := range set.Spec.VolumeClaimTemplates {
		t := &set.Spec.VolumeClaimTemplates[i]
		v := vols[t.Name]
		if v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claimName(set, t, o) {
			return false
		}
	}
	return true
}

// claimsOf are the claims ordinal's pod uses, one per template, in
// template order: named <template>-<set>-<ordinal>, labelled with the
// template's labels overlaid by the selector's matchLabels, as upstream.
func claimsOf(set *apps.StatefulSet, ordinal int) []*v1.PersistentVolumeClaim {
	out := make([]*v1.PersistentVolumeClaim, 0, len(set.Spec.VolumeClaimTemplates))
	for i := range set.Spec.VolumeClaimTemplates {
		t := &set.Spec.VolumeClaimTemplates[i]
		c := t.DeepCopy()
		c.Name = claimName(set, t, ordinal)
		c.Namespace = set.Namespace
		c.ResourceVersion = ""
		c.UID = ""
		c.OwnerReferences = nil
		c.Status = v1.PersistentVolumeClaimStatus{}
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		if set.Spec.Selector != nil {
			for k, v := range set.Spec.Selector.MatchLabels {
				c.Labels[k] = v
			}
		}
		out = append(out, c)
	}
	return out
}

// newPod is ordinal's pod from set's template (set being the StatefulSet
// at the revision the pod is made for): identity labels, the revision
// label, hostname and subdomain, a volume per claim template (replacing a
// template volume of the same name), and set as its controller.
func newPod(set *apps.StatefulSet, ordinal int, revision string) *v1.Pod {
	t := set.Spec.Template.DeepCopy()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            podName(set, ordinal),
			Namespace:       set.Namespace,
			GenerateName:    set.Name + "-",
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)},
		},
		Spec: t.Spec,
	}
	setIdentity(pod)
	pod.Labels[apps.StatefulSetRevisionLabel] = revision
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = set.Spec.ServiceName
	claims := claimsOf(set, ordinal)
	vols := make([]v1.Volume, 0, len(claims)+len(pod.Spec.Volumes))
	byTemplate := map[string]bool{}
	for i, c := range claims {
		name := set.Spec.VolumeClaimTemplates[i].Name
		byTemplate[name] = true
		vols = append(vols, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name}}})
	}
	for _, v := range pod.Spec.Volumes {
		if !byTemplate[v.Name] {
			vols = append(vols, v)
		}
	}
	if len(vols) > 0 {
		pod.Spec.Volumes = vols
	}
	return pod
}

func revisionOf(pod *v1.Pod) string { return pod.Labels[apps.StatefulSetRevisionLabel] }

// isCreated: the pod exists in the API (a pod built for creation has no
// phase yet).
func isCreated(pod *v1.Pod) bool { return pod.Status.Phase != "" }

func isTerminating(pod *v1.Pod) bool { return pod.DeletionTimestamp != nil }

func isFinished(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded
}

func isRunningAndReady(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodRunning && podutils.IsPodReady(pod)
}

func isAvailable(pod *v1.Pod, minReadySeconds int32, now time.Time) bool {
	return podutils.IsPodAvailable(pod, minReadySeconds, metav1.NewTime(now))
}

// isUnavailable is upstream's: not Running and Ready, being deleted, or
// not yet Ready for minReadySeconds.
func isUnavailable(pod *v1.Pod, minReadySeconds int32, now time.Time) bool {
	return !isRunningAndReady(pod) || isTerminating(pod) || !isAvailable(pod, minReadySeconds, now)
}

// ---- PersistentVolumeClaim retention (upstream's StatefulSetAutoDeletePVC) ----
//
// A claim's ownerReferences say when the garbage collector deletes it:
//
//	whenScaled Retain, whenDeleted Retain: no reference
//	whenScaled Retain, whenDeleted Delete: the set (as controller)
//	whenScaled Delete, whenDeleted Retain: the pod, once its ordinal is condemned
//	whenScaled Delete, whenDeleted Delete: the set while in range, the pod once condemned
//
// References left by an earlier set or pod of the same name (another UID)
// or another controller mean the claim is someone else's: it is left alone.

func retentionOf(set *apps.StatefulSet) apps.StatefulSetPersistentVolumeClaimRetentionPolicy {
	p := apps.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: apps.RetainPersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  apps.RetainPersistentVolumeClaimRetentionPolicyType,
	}
	if r := set.Spec.PersistentVolumeClaimRetentionPolicy; r != nil {
		if r.WhenDeleted != "" {
			p.WhenDeleted = r.WhenDeleted
		}
		if r.WhenScaled != "" {
			p.WhenScaled = r.WhenScaled
		}
	}
	return p
}

// refers reports whether ref names obj (kind and name, whatever the UID).
func refers(ref *metav1.OwnerReference, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	return ref.APIVersion == gvk.GroupVersion().String() && ref.Kind == gvk.Kind && ref.Name == obj.GetName()
}

func hasOwner(claim *v1.PersistentVolumeClaim, owner metav1.Object) bool {
	if owner.GetUID() == "" {
		return false
	}
	for _, r := range claim.OwnerReferences {
		if r.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// hasStaleOwner: a reference to obj's name under another UID (an earlier
// object of that name).
func hasStaleOwner(claim *v1.PersistentVolumeClaim, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	for i := range claim.OwnerReferences {
		if refers(&claim.OwnerReferences[i], obj, gvk) {
			return claim.OwnerReferences[i].UID != obj.GetUID()
		}
	}
	return false
}

func retainsAll(p apps.StatefulSetPersistentVolumeClaimRetentionPolicy) bool {
	return p.WhenDeleted == apps.RetainPersistentVolumeClaimRetentionPolicyType && p.WhenScaled == apps.RetainPersistentVolumeClaimRetentionPolicyType
}

// hasOtherController: under a deleting policy, a controller of the claim
// other than the set and the pod (a same-named one of another UID counts).
func hasOtherController(claim *v1.PersistentVolumeClaim, set *apps.StatefulSet, pod *v1.Pod) bool {
	if retainsAll(retentionOf(set)) {
		return false
	}
	for i := range claim.OwnerReferences {
		r := &claim.OwnerReferences[i]
		switch {
		case refers(r, set, controllerKind):
			if r.UID != set.UID {
				return true
			}
		case refers(r, pod, podKind):
			if r.UID != pod.UID {
				return true
			}
		case r.Controller != nil && *r.Controller:
			return true
		}
	}
	return false
}

func hasNonControllerRef(claim *v1.PersistentVolumeClaim, set *apps.StatefulSet, pod *v1.Pod) bool {
	for _, r := range claim.OwnerReferences {
		if (r.UID == set.UID || (pod.UID != "" && r.UID == pod.UID)) && (r.Controller == nil || !*r.Controller) {
			return true
		}
	}
	return false
}

// claimOwnersUpToDate reports whether claim's references already say what
// the policy wants for pod.
func claimOwnersUpToDate(claim *v1.PersistentVolumeClaim, set *apps.StatefulSet, pod *v1.Pod) bool {
	if hasStaleOwner(claim, set, controllerKind) || hasStaleOwner(claim, pod, podKind) {
		return true
	}
	if hasOtherController(claim, set, pod) {
		return !hasOwner(claim, set) && !hasOwner(claim, pod)
	}
	if hasNonControllerRef(claim, set, pod) {
		return false
	}
	wantSet, wantPod := wantedOwners(set, pod)
	return hasOwner(claim, set) == wantSet && hasOwner(claim, pod) == wantPod
}

func wantedOwners(set *apps.StatefulSet, pod *v1.Pod) (wantSet, wantPod bool) {
	p := retentionOf(set)
	condemned := !inRange(set, pod)
	del := apps.DeletePersistentVolumeClaimRetentionPolicyType
	switch {
	case p.WhenScaled == del && p.WhenDeleted == del:
		return !condemned, condemned
	case p.WhenScaled == del:
		return false, condemned
	case p.WhenDeleted == del:
		return true, false
	}
	return false, false
}

// setClaimOwners rewrites claim's references to the set and the pod as the
// policy wants; with another controller present it only drops ours.
func setClaimOwners(claim *v1.PersistentVolumeClaim, set *apps.StatefulSet, pod *v1.Pod) {
	other := hasOtherController(claim, set, pod)
	refs := make([]metav1.OwnerReference, 0, len(claim.OwnerReferences)+1)
	for i := range claim.OwnerReferences {
		r := &claim.OwnerReferences[i]
		if !refers(r, set, controllerKind) && !refers(r, pod, podKind) {
			refs = append(refs, *r)
		}
	}
	if !other {
		wantSet, wantPod := wantedOwners(set, pod)
		if wantSet {
			refs = append(refs, *metav1.NewControllerRef(set, controllerKind))
		}
		if wantPod && pod.UID != "" {
			refs = append(refs, *metav1.NewControllerRef(pod, podKind))
		}
	}
	if len(refs) == 0 {
		refs = nil
	}
	claim.OwnerReferences = refs
}
