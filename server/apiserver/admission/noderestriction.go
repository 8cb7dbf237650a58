package admission

import (
	"context"
	"fmt"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// nodeRestriction is upstream's NodeRestriction plugin: the Node authorizer
// lets every node write Nodes, pods and Leases in general, and this plugin
// narrows each write to the node's own objects, with upstream's messages.
// A node may
//
//   - create, update and patch only its own Node, never with a
//     configSource, never changing its taints, and setting only the labels
//     a kubelet owns (kubelet.kubernetes.io/, node.kubernetes.io/ and the
//     well-known hostname, os, arch, zone, region and instance-type ones):
//     a node that could label or untaint itself could steer workloads
//     meant for other nodes to itself;
//   - update the status of pods bound to it, without changing their labels;
//   - delete and evict pods bound to it (the kubelet confirms graceful deletion);
//   - create no pods: upstream allows mirror pods of static pods, which
//     kelp's kubelet does not run, so every create is refused;
//   - write only its own Lease in kube-node-lease;
//   - change nothing of a PersistentVolumeClaim but its status' capacity
//     and conditions;
//   - request service-account tokens (serviceaccounts/token) only bound
//     to a pod, by UID, that is bound to it (the Node authorizer has
//     checked the ServiceAccount is one of its pods').
//
// It runs first among the validating plugins, so it judges the object as
// it will be stored (after the strategy's preparation: a status write
// carries the stored spec and labels), and on deletes, which kelp admits
// only in the validating phase.
type nodeRestriction struct {
	pods ObjectGetter
}

var (
	nodesResource  = corev1.SchemeGroupVersion.WithResource("nodes").GroupResource()
	pvcsResource   = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims").GroupResource()
	leasesResource = coordinationv1.SchemeGroupVersion.WithResource("leases").GroupResource()
	// serviceAccountsResource is also ServiceAccount admission's lookup.
	serviceAccountsResource = corev1.SchemeGroupVersion.WithResource("serviceaccounts").GroupResource()
)

func (n nodeRestriction) Validate(ctx context.Context, a *Attributes) error {
	node, isNode := auth.NodeIdentity(a.User)
	if !isNode {
		return nil
	}
	if node == "" {
		return forbidden(a, "could not determine node from user %q", a.User.Name)
	}
	switch a.Resource.GroupResource() {
	case podsResource.GroupResource():
		switch a.Subresource {
		case "":
			return admitPod(node, a)
		case "status":
			return admitPodStatus(node, a)
		case "eviction":
			return n.admitPodEviction(ctx, node, a)
		default:
			return forbidden(a, "unexpected pod subresource %q, only 'status' and 'eviction' are allowed", a.Subresource)
		}
	case nodesResource:
		return admitNode(node, a)
	case pvcsResource:
		if a.Subresource != "status" {
			return forbidden(a, "may only update PVC status")
		}
		return admitPVCStatus(node, a)
	case leasesResource:
		return admitLease(node, a)
	case serviceAccountsResource:
		if a.Subresource == "token" {
			return n.admitTokenRequest(ctx, node, a)
		}
	}
	return nil
}

// admitPodEviction is upstream's: a node evicts only pods bound to it; a
// missing pod is left to the eviction's own 404.
func (n nodeRestriction) admitPodEviction(ctx context.Context, node string, a *Attributes) error {
	if a.Operation != "CREATE" {
		return forbidden(a, "unexpected operation %s", a.Operation)
	}
	name := a.Name
	if name == "" {
		if acc, err := meta.Accessor(a.Object); err == nil {
			name = acc.GetName()
		}
	}
	if name == "" {
		return forbidden(a, "could not determine pod from request data")
	}
	obj, err := n.pods.Get(ctx, a.Namespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return forbidden(a, "%v", err)
	}
	if pod, ok := obj.(*corev1.Pod); !ok || pod.Spec.NodeName != node {
		return forbidden(a, "node %s can only evict pods with spec.nodeName set to itself", node)
	}
	return nil
}

// admitTokenRequest is upstream's admitServiceAccount, with its messages.
func (n nodeRestriction) admitTokenRequest(ctx context.Context, node string, a *Attributes) error {
	if a.Operation != "CREATE" {
		return nil
	}
	tr, ok := a.Object.(*authenticationv1.TokenRequest)
	if !ok {
		return forbidden(a, "unexpected type %T", a.Object)
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.Kind != "Pod" {
		return forbidden(a, "node requested token not bound to a pod")
	}
	if ref.UID == "" {
		return forbidden(a, "node requested token with a pod binding without a uid")
	}
	obj, err := n.pods.Get(ctx, a.Namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return forbidden(a, "error looking up pod %s/%s: %v", a.Namespace, ref.Name, err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return forbidden(a, "unexpected type %T", obj)
	}
	if ref.UID != pod.UID {
		return forbidden(a, "the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID)
	}
	if pod.Spec.NodeName != node {
		return forbidden(a, "node requested token bound to a pod scheduled on a different node")
	}
	return nil
}

// forbidden is upstream's admission.NewForbidden: 403 on the request's
// resource and object name.
func forbidden(a *Attributes, format string, args ...any) error {
	name := a.Name
	if name == "" && a.Object != nil {
		if acc, err := meta.Accessor(a.Object); err == nil {
			name = acc.GetName()
		}
	}
	return apierrors.NewForbidden(a.Resource.GroupResource(), name, fmt.Errorf(format, args...))
}

func admitPod(node string, a *Attributes) error {
	switch a.Operation {
	case "CREATE":
		pod, ok := a.Object.(*corev1.Pod)
		if !ok {
			return forbidden(a, "unexpected type %T", a.Object)
		}
		if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; !mirror {
			return forbidden(a, "pod does not have %q annotation, node %q can only create mirror pods", corev1.MirrorPodAnnotationKey, node)
		}
		// kelp's kubelet runs no static pods, so it has no mirror pods to
		// create; refusing them all is narrower than upstream's checks.
		return forbidden(a, "node %q may not create mirror pods: kelp runs no static pods", node)
	case "DELETE":
		pod, ok := a.OldObject.(*corev1.Pod)
		if !ok {
			return forbidden(a, "unexpected type %T", a.OldObject)
		}
		if pod.Spec.NodeName != node {
			return forbidden(a, "node %q can only delete pods with spec.nodeName set to itself", node)
		}
		return nil
	}
	return forbidden(a, "unexpected operation %q, node %q can only create and delete mirror pods", a.Operation, node)
}

func admitPodStatus(node string, a *Attributes) error {
	if a.Operation != "UPDATE" {
		return forbidden(a, "unexpected operation %q", a.Operation)
	}
	old, ok := a.OldObject.(*corev1.Pod)
	if !ok {
		return forbidden(a, "unexpected type %T", a.OldObject)
	}
	if old.Spec.NodeName != node {
		return forbidden(a, "node %q can only update pod status for pods with spec.nodeName set to itself", node)
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return forbidden(a, "unexpected type %T", a.Object)
	}
	if !labels.Equals(old.Labels, pod.Labels) {
		return forbidden(a, "node %q cannot update labels through pod status", node)
	}
	if !apiequality.Semantic.DeepEqual(old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses) {
		return forbidden(a, "node %q cannot update resource claim statues", node)
	}
	return nil
}

func admitNode(node string, a *Attributes) error {
	if a.Name != node {
		return forbidden(a, "node %q is not allowed to modify node %q", node, a.Name)
	}
	switch a.Operation {
	case "CREATE":
		n, ok := a.Object.(*corev1.Node)
		if !ok {
			return forbidden(a, "unexpected type %T", a.Object)
		}
		// The Node authorizer scopes a node's reads to what its spec
		// names, so a self-chosen config source would widen them.
		if n.Spec.ConfigSource != nil {
			return forbidden(a, "node %q is not allowed to create pods with a non-nil configSource", node)
		}
		if bad := forbiddenLabels(modifiedLabels(n.Labels, nil)); len(bad) > 0 {
			return forbidden(a, "node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", "))
		}
	case "UPDATE":
		n, ok := a.Object.(*corev1.Node)
		if !ok {
			return forbidden(a, "unexpected type %T", a.Object)
		}
		old, ok := a.OldObject.(*corev1.Node)
		if !ok {
			return forbidden(a, "unexpected type %T", a.OldObject)
		}
		if n.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(n.Spec.ConfigSource, old.Spec.ConfigSource) {
			return forbidden(a, "node %q is not allowed to update configSource to a new non-nil configSource", node)
		}
		// Taints keep workloads off a node; the node may not lift its own.
		if !apiequality.Semantic.DeepEqual(n.Spec.Taints, old.Spec.Taints) {
			return forbidden(a, "node %q is not allowed to modify taints", node)
		}
		if bad := forbiddenLabels(modifiedLabels(n.Labels, old.Labels)); len(bad) > 0 {
			return forbidden(a, "is not allowed to modify labels: %s", strings.Join(bad, ", "))
		}
	}
	return nil
}

// modifiedLabels are the keys added, removed or changed between a and b.
func modifiedLabels(a, b map[string]string) []string {
	set := map[string]bool{}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			set[k] = true
		}
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || v != w {
			set[k] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	return out
}

// kubeletLabels are the well-known labels a kubelet sets on its own Node
// (upstream's k8s.io/kubelet/pkg/apis.IsKubeletLabel).
var kubeletLabels = map[string]bool{
	corev1.LabelHostname:                true,
	corev1.LabelTopologyZone:            true,
	corev1.LabelTopologyRegion:          true,
	corev1.LabelFailureDomainBetaZone:   true,
	corev1.LabelFailureDomainBetaRegion: true,
	corev1.LabelInstanceType:            true,
	corev1.LabelInstanceTypeStable:      true,
	corev1.LabelOSStable:                true,
	corev1.LabelArchStable:              true,
	corev1.LabelWindowsBuild:            true,
	"beta.kubernetes.io/os":             true,
	"beta.kubernetes.io/arch":           true,
}

func labelNamespace(key string) string {
	if ns, _, ok := strings.Cut(key, "/"); ok {
		return ns
	}
	return ""
}

func inNamespace(ns, suffix string) bool { return ns == suffix || strings.HasSuffix(ns, "."+suffix) }

// isKubeletLabel: the well-known ones, and [*.]kubelet.kubernetes.io/ and
// [*.]node.kubernetes.io/.
func isKubeletLabel(key string) bool {
	ns := labelNamespace(key)
	return kubeletLabels[key] || inNamespace(ns, corev1.LabelNamespaceSuffixKubelet) || inNamespace(ns, corev1.LabelNamespaceSuffixNode)
}

// forbiddenLabels are the keys a node may not add, remove or change on
// itself: [*.]node-restriction.kubernetes.io/, and every other
// kubernetes.io or k8s.io label a kubelet does not own (node-role.kubernetes.io/
// among them). Other labels are the cluster's to police. Sorted.
func forbiddenLabels(keys []string) []string {
	var out []string
	for _, k := range keys {
		ns := labelNamespace(k)
		kubernetes := inNamespace(ns, "kubernetes.io") || inNamespace(ns, "k8s.io")
		if inNamespace(ns, corev1.LabelNamespaceNodeRestriction) || (kubernetes && !isKubeletLabel(k)) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func admitPVCStatus(node string, a *Attributes) error {
	if a.Operation != "UPDATE" {
		return forbidden(a, "unexpected operation %q", a.Operation)
	}
	cur, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok {
		return forbidden(a, "unexpected type %T", a.Object)
	}
	old, ok := a.OldObject.(*corev1.PersistentVolumeClaim)
	if !ok {
		return forbidden(a, "unexpected type %T", a.OldObject)
	}
	strip := func(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
		c = c.DeepCopy()
		c.ResourceVersion, c.ManagedFields = "", nil
		c.Status.Capacity, c.Status.Conditions = nil, nil
		c.Status.AllocatedResources, c.Status.AllocatedResourceStatuses = nil, nil
		return c
	}
	if !apiequality.Semantic.DeepEqual(strip(old), strip(cur)) {
		return forbidden(a, "node %q is not allowed to update fields other than status.capacity and status.conditions", node)
	}
	return nil
}

func admitLease(node string, a *Attributes) error {
	if a.Namespace != corev1.NamespaceNodeLease {
		return forbidden(a, "can only access leases in the %q system namespace", corev1.NamespaceNodeLease)
	}
	name := a.Name
	if a.Operation == "CREATE" {
		// On create the name is the object's.
		lease, ok := a.Object.(*coordinationv1.Lease)
		if !ok {
			return forbidden(a, "unexpected type %T", a.Object)
		}
		name = lease.Name
	}
	if name != node {
		return forbidden(a, "can only access node lease with the same name as the requesting node")
	}
	return nil
}
