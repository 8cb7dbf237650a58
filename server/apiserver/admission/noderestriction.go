package admission

import (
	"context"
	"fmt"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

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
//     checked the ServiceAccount is one of its pods');
//   - create PodCertificateRequests (nothing else: reading them is the
//     Node authorizer's) only naming itself (name and UID), a pod bound to
//     it (name and UID, not a mirror pod) and that pod's service account
//     (name and UID), for a signer the pod projects a podCertificate of,
//     or one the node is granted request-serviceaccounts-podcertificate-signer
//     on (upstream's check; RBAC names the signer with / as :). A UID
//     mismatch or a missing object is a plain error, not 403, as
//     upstream: the node's cache may lag and a retry may pass.
//
// It runs first among the validating plugins, so it judges the object as
// it will be stored (after the strategy's preparation: a status write
// carries the stored spec and labels), and on deletes, which kelp admits
// only in the validating phase.
type nodeRestriction struct {
	pods ObjectGetter
	// nodes, serviceAccounts and authz judge a node's
	// PodCertificateRequests.
	nodes, serviceAccounts ObjectGetter
	authz                  auth.Authorizer
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
	case podCertificateRequestResource.GroupResource():
		return n.admitPodCertificateRequest(ctx, node, a)
	}
	return nil
}

// admitPodCertificateRequest is upstream's, with its messages.
func (n nodeRestriction) admitPodCertificateRequest(ctx context.Context, node string, a *Attributes) error {
	if a.Operation != "CREATE" {
		return forbidden(a, "unexpected operation %v", a.Operation)
	}
	if a.Subresource != "" {
		return forbidden(a, "unexpected subresource %v", a.Subresource)
	}
	req, ok := a.Object.(*certificatesv1.PodCertificateRequest)
	if !ok {
		return forbidden(a, "unexpected type %T", a.Object)
	}
	s := &req.Spec
	if string(s.NodeName) != node {
		return forbidden(a, "PodCertificateRequest.Spec.NodeName=%q, which is not the requesting node %q", s.NodeName, node)
	}
	obj, err := getter(n.nodes).Get(ctx, "", node)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("while retrieving node %q named in the PodCertificateRequest: %w", s.NodeName, err)
	}
	if err != nil {
		return forbidden(a, "while retrieving node %q named in the PodCertificateRequest: %v", s.NodeName, err)
	}
	podKey := a.Namespace + "/" + s.PodName
	if nodeObj, ok := obj.(*corev1.Node); !ok || nodeObj.UID != s.NodeUID {
		return fmt.Errorf("PodCertificateRequest for pod %q names node UID %q, inconsistent with the running node (%q)", podKey, s.NodeUID, uidOf(obj))
	}
	obj, err = getter(n.pods).Get(ctx, a.Namespace, s.PodName)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("while retrieving pod %q named in the PodCertificateRequest: %w", podKey, err)
	}
	if err != nil {
		return forbidden(a, "while retrieving pod %q named in the PodCertificateRequest: %v", podKey, err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return forbidden(a, "unexpected type %T", obj)
	}
	if s.PodUID != pod.UID {
		return fmt.Errorf("PodCertificateRequest for pod %q contains pod UID (%q) which differs from running pod %q", podKey, s.PodUID, string(pod.UID))
	}
	if pod.Spec.NodeName != node {
		return forbidden(a, "pod %q is not running on node %q named in the PodCertificateRequest", podKey, s.NodeName)
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return forbidden(a, "pod %q is a mirror pod", podKey)
	}
	if s.ServiceAccountName != pod.Spec.ServiceAccountName {
		return forbidden(a, "PodCertificateRequest for pod %q contains serviceAccountName (%q) that differs from running pod (%q)", podKey, s.ServiceAccountName, pod.Spec.ServiceAccountName)
	}
	obj, err = getter(n.serviceAccounts).Get(ctx, a.Namespace, s.ServiceAccountName)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("while retrieving service account %q named in the PodCertificateRequest: %w", a.Namespace+"/"+s.ServiceAccountName, err)
	}
	if err != nil {
		return forbidden(a, "while retrieving service account %q named in the PodCertificateRequest: %v", a.Namespace+"/"+s.ServiceAccountName, err)
	}
	if uid := uidOf(obj); s.ServiceAccountUID != types.UID(uid) {
		return fmt.Errorf("PodCertificateRequest for pod %q names service account UID %q, which differs from the running service account (%q)", podKey, s.ServiceAccountUID, uid)
	}
	if projectsPodCertificate(pod, s.SignerName) {
		return nil
	}
	// Otherwise the node must be granted the signer for the service
	// account, as upstream's validateNodePodCertificateSigner.
	if n.authz != nil {
		d, _ := n.authz.Authorize(a.User, auth.Attributes{IsResource: true, Verb: "request-serviceaccounts-podcertificate-signer",
			Group: a.Resource.Group, Version: a.Resource.Version, Resource: strings.ReplaceAll(s.SignerName, "/", ":"),
			Namespace: a.Namespace, Name: s.ServiceAccountName})
		if d == auth.DecisionAllow {
			return nil
		}
	}
	return forbidden(a, "pod %q does not mount a podCertificate projected volume for signer %q", podKey, s.SignerName)
}

// projectsPodCertificate: the pod has a projected podCertificate source
// for signer.
func projectsPodCertificate(pod *corev1.Pod, signer string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.PodCertificate != nil && src.PodCertificate.SignerName == signer {
				return true
			}
		}
	}
	return false
}

func uidOf(obj runtime.Object) string {
	if acc, err := meta.Accessor(obj); err == nil {
		return string(acc.GetUID())
	}
	return ""
}

// getter is g, or, when a plugin was built without one (unit tests of
// other checks), one that finds nothing.
func getter(g ObjectGetter) ObjectGetter {
	if g == nil {
		return noObjects{}
	}
	return g
}

type noObjects struct{}

func (noObjects) Get(_ context.Context, _, name string) (runtime.Object, error) {
	return nil, apierrors.NewNotFound(corev1.Resource(""), name)
}
func (noObjects) List(context.Context, string) ([]runtime.Object, error) { return nil, nil }

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
