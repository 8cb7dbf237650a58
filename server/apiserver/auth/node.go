package auth

import (
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/kelp-project/kelp/config"
	volumeclaims "github.com/kelp-project/kelp/server/claims"
)

// NodeObjects is what the Node authorizer reads to relate a node to other
// objects: the pods bound to it and the claims they use, from the API
// server's watch caches (apiserver implements it over the same caches
// admission reads). Everything returned is shared and must not be changed.
type NodeObjects interface {
	// PodsOnNode returns the pods in namespace ("" for every namespace)
	// whose spec.nodeName is node.
	PodsOnNode(namespace, node string) ([]*corev1.Pod, error)
	// Pod and PersistentVolumeClaim return one object, or an error
	// (NotFound when there is none).
	Pod(namespace, name string) (*corev1.Pod, error)
	PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error)
	// PodCertificateRequest returns one request, or an error.
	PodCertificateRequest(namespace, name string) (*certificatesv1.PodCertificateRequest, error)
}

// NodeIdentity returns the node a user is: system:node:<name> in group
// system:nodes, as upstream's default node identifier. isNode is false for
// everyone else; name is empty for a node user without a name.
func NodeIdentity(u *User) (name string, isNode bool) {
	if u == nil || !slices.Contains(u.Groups, config.NodesGroup) {
		return "", false
	}
	name, ok := strings.CutPrefix(u.Name, config.NodeUserPrefix)
	return name, ok
}

// NodeAuthorizer is upstream's Node authorizer (with AuthorizeNodeWithSelectors,
// GA since 1.34): a kubelet may read and write what the pods bound to its
// node need, and nothing of other nodes. For node users it allows:
//
//   - its own Node: get, list and watch by name (a metadata.name field
//     selector), create, update, patch, and update/patch of nodes/status;
//     NodeRestriction admission keeps writes to its own object, its taints
//     and its labels outside the kubelet's prefixes;
//   - pods: get of a pod bound to it; list and watch only with the field
//     selector spec.nodeName=<itself>; create and delete, update/patch of
//     pods/status and create of pods/eviction, each limited by
//     NodeRestriction to pods bound to it (create only to mirror pods);
//   - get, list and watch (by name) of the Secrets and ConfigMaps, get of
//     the PersistentVolumeClaims (and update/patch of their status) and of
//     the PersistentVolumes behind them, and get of the ServiceAccounts
//     (and create of their serviceaccounts/token), that pods bound to it
//     reference;
//   - its own Lease in kube-node-lease: get, create, update, patch, delete;
//   - PodCertificateRequests: create (NodeRestriction keeps it to its own
//     pods'), get of one whose spec.nodeName is itself, list and watch only
//     with the field selector spec.nodeName=<itself>; never their status;
//   - upstream's static node rules for everything else (reads of Services,
//     get of Endpoints, writes of core Events, token and access reviews,
//     CSRs, CSIDrivers, RuntimeClasses).
//
// Everything else gets no opinion with upstream's reason, so the next
// authorizer may still allow it (RBAC: discovery and the self reviews,
// through system:authenticated). Other users get no opinion.
//
// The relations come from the watch caches, not from a graph: a request
// for a Secret scans the pods of its namespace bound to the node. The
// kubelet learns of its pods from watches served by those same caches, so
// a pod the kubelet knows about is already there when it asks.
type NodeAuthorizer struct {
	Objects NodeObjects
}

var (
	secretsResource   = schema.GroupResource{Resource: "secrets"}
	configMapResource = schema.GroupResource{Resource: "configmaps"}
	podsResource      = schema.GroupResource{Resource: "pods"}
	nodesResource     = schema.GroupResource{Resource: "nodes"}
	pvcResource       = schema.GroupResource{Resource: "persistentvolumeclaims"}
	pvResource        = schema.GroupResource{Resource: "persistentvolumes"}
	svcAcctResource   = schema.GroupResource{Resource: "serviceaccounts"}
	leaseResource     = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	pcrResource       = schema.GroupResource{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}
)

// nodeLeaseNamespace holds the nodes' Leases.
const nodeLeaseNamespace = corev1.NamespaceNodeLease

func (n NodeAuthorizer) Authorize(u *User, a Attributes) (Decision, string) {
	node, isNode := NodeIdentity(u)
	if !isNode {
		return DecisionNoOpinion, ""
	}
	if node == "" {
		return DecisionNoOpinion, fmt.Sprintf("unknown node for user %q", u.Name)
	}
	if a.IsResource {
		switch (schema.GroupResource{Group: a.Group, Resource: a.Resource}) {
		case secretsResource:
			return n.readNamespaced(node, a, secretRelated)
		case configMapResource:
			return n.readNamespaced(node, a, configMapRelated)
		case pvcResource:
			if a.Subresource == "status" {
				if a.Verb != "update" && a.Verb != "patch" {
					return DecisionNoOpinion, "can only get/update/patch this type"
				}
				return n.related(node, a, pvcRelated)
			}
			return n.get(node, a, pvcRelated)
		case pvResource:
			return n.get(node, a, n.pvRelated)
		case svcAcctResource:
			if a.Verb == "get" && a.Subresource == "" {
				// Upstream's, with PodCertificateRequest (GA in 1.37): the
				// kubelet reads a pod's ServiceAccount for the UID its
				// PodCertificateRequests name.
				return n.related(node, a, serviceAccountRelated)
			}
			if a.Verb != "create" || a.Name == "" {
				return DecisionNoOpinion, "can only create tokens for individual service accounts"
			}
			if a.Subresource != "token" {
				return DecisionNoOpinion, "can only create token subresource of serviceaccount"
			}
			return n.related(node, a, serviceAccountRelated)
		case leaseResource:
			return authorizeLease(node, a)
		case nodesResource:
			return authorizeNode(node, a)
		case podsResource:
			return n.authorizePod(node, a)
		case pcrResource:
			return n.authorizePodCertificateRequest(node, a)
		}
	}
	if a.IsResource && a.Subresource == "" && nodeRules[ruleKey{a.Group, a.Resource}][a.Verb] {
		return DecisionAllow, ""
	}
	return DecisionNoOpinion, ""
}

// ruleKey is a group and resource of a static rule.
type ruleKey struct{ group, resource string }

func verbs(vs ...string) map[string]bool {
	m := map[string]bool{}
	for _, v := range vs {
		m[v] = true
	}
	return m
}

// nodeRules are upstream's static node rules (bootstrappolicy.NodeRules)
// for the resources the authorizer does not subdivide.
var nodeRules = map[ruleKey]map[string]bool{
	{"authentication.k8s.io", "tokenreviews"}:             verbs("create"),
	{"authorization.k8s.io", "subjectaccessreviews"}:      verbs("create"),
	{"authorization.k8s.io", "localsubjectaccessreviews"}: verbs("create"),
	// Service links in the pods' environment.
	{"", "services"}:  verbs("get", "list", "watch"),
	{"", "endpoints"}: verbs("get"),
	{"", "events"}:    verbs("create", "update", "patch"),
	// A kubelet rotating its own client certificate.
	{"certificates.k8s.io", "certificatesigningrequests"}: verbs("create", "get", "list", "watch"),
	{"storage.k8s.io", "csidrivers"}:                      verbs("get", "list", "watch"),
	{"node.k8s.io", "runtimeclasses"}:                     verbs("get", "list", "watch"),
	// Trust anchors for clusterTrustBundle projected volumes: public, so
	// every node reads (and watches) them all, as upstream.
	{"certificates.k8s.io", "clustertrustbundles"}: verbs("get", "list", "watch"),
}

// relation reports whether pod, bound to the node, references the object
// named name in its namespace.
type relation func(pod *corev1.Pod, name string) bool

// readNamespaced authorizes get, list and watch of one named object (a
// list or watch names it with a metadata.name field selector).
func (n NodeAuthorizer) readNamespaced(node string, a Attributes, rel relation) (Decision, string) {
	switch a.Verb {
	case "get", "list", "watch":
	default:
		return DecisionNoOpinion, "can only read resources of this type"
	}
	if a.Subresource != "" {
		return DecisionNoOpinion, "cannot read subresource"
	}
	if a.Namespace == "" {
		return DecisionNoOpinion, "can only read namespaced object of this type"
	}
	return n.related(node, a, rel)
}

// get authorizes get of one object related to the node.
func (n NodeAuthorizer) get(node string, a Attributes, rel relation) (Decision, string) {
	if a.Verb != "get" {
		return DecisionNoOpinion, "can only get individual resources of this type"
	}
	if a.Subresource != "" {
		return DecisionNoOpinion, "cannot get subresource"
	}
	return n.related(node, a, rel)
}

// related allows a request for the named object when a pod bound to the
// node references it (for a cluster-scoped object, a pod in any
// namespace).
func (n NodeAuthorizer) related(node string, a Attributes, rel relation) (Decision, string) {
	if a.Name == "" {
		return DecisionNoOpinion, "No Object name found"
	}
	pods, err := n.Objects.PodsOnNode(a.Namespace, node)
	if err == nil {
		for _, p := range pods {
			if p.Spec.NodeName == node && rel(p, a.Name) {
				return DecisionAllow, ""
			}
		}
	}
	return DecisionNoOpinion, fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

func authorizeLease(node string, a Attributes) (Decision, string) {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return DecisionNoOpinion, "can only get, create, update, patch, or delete a node lease"
	}
	if a.Namespace != nodeLeaseNamespace {
		return DecisionNoOpinion, fmt.Sprintf("can only access leases in the %q system namespace", nodeLeaseNamespace)
	}
	// A create carries its name in the body, which NodeRestriction checks.
	if a.Verb != "create" && a.Name != node {
		return DecisionNoOpinion, "can only access node lease with the same name as the requesting node"
	}
	return DecisionAllow, ""
}

func authorizeNode(node string, a Attributes) (Decision, string) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "create", "update", "patch":
			// NodeRestriction keeps the write to the node's own object.
			return DecisionAllow, ""
		case "get", "list", "watch":
			// By name, not by existence: the kubelet reads its Node before
			// it has created it.
			switch a.Name {
			case node:
				return DecisionAllow, ""
			case "":
				return DecisionNoOpinion, fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node)
			default:
				return DecisionNoOpinion, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", node, a.Name)
			}
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			// NodeRestriction keeps it to the node's own status.
			return DecisionAllow, ""
		}
	}
	return DecisionNoOpinion, ""
}

func (n NodeAuthorizer) authorizePod(node string, a Attributes) (Decision, string) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "get":
			return n.boundPod(node, a)
		case "list", "watch":
			for _, req := range a.FieldSelector {
				if req.Field == "spec.nodeName" && req.Operator == selection.Equals && req.Value == node {
					return DecisionAllow, ""
				}
			}
			if a.Name != "" {
				return n.boundPod(node, a)
			}
			return DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector"
		case "create", "delete":
			// NodeRestriction: mirror pods only, pods bound to the node only.
			return DecisionAllow, ""
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			// NodeRestriction: pods bound to the node only.
			return DecisionAllow, ""
		}
	case "eviction":
		if a.Verb == "create" {
			return DecisionAllow, ""
		}
	}
	return DecisionNoOpinion, ""
}

// boundPod allows a read of one pod bound to the node.
func (n NodeAuthorizer) boundPod(node string, a Attributes) (Decision, string) {
	if a.Name == "" {
		return DecisionNoOpinion, "No Object name found"
	}
	if p, err := n.Objects.Pod(a.Namespace, a.Name); err == nil && p.Spec.NodeName == node {
		return DecisionAllow, ""
	}
	return DecisionNoOpinion, fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

func secretRelated(p *corev1.Pod, name string) bool {
	found := false
	visitPodSecrets(p, func(s string) {
		if s == name {
			found = true
		}
	})
	return found
}

func configMapRelated(p *corev1.Pod, name string) bool {
	found := false
	visitPodConfigMaps(p, func(c string) {
		if c == name {
			found = true
		}
	})
	return found
}

func serviceAccountRelated(p *corev1.Pod, name string) bool {
	return p.Spec.ServiceAccountName == name
}

func pvcRelated(p *corev1.Pod, name string) bool {
	return slices.Contains(volumeclaims.OfPod(p), name)
}

// pvRelated: a pod bound to the node uses a claim bound to the volume.
func (n NodeAuthorizer) pvRelated(p *corev1.Pod, name string) bool {
	for _, claim := range volumeclaims.OfPod(p) {
		pvc, err := n.Objects.PersistentVolumeClaim(p.Namespace, claim)
		if err == nil && pvc.Spec.VolumeName == name {
			return true
		}
	}
	return false
}

// podEnv visits the env of a pod's init, app and ephemeral containers,
// where containers name Secrets and ConfigMaps.
func podEnv(p *corev1.Pod, visit func(env []corev1.EnvVar, from []corev1.EnvFromSource)) {
	for _, c := range p.Spec.InitContainers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range p.Spec.Containers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range p.Spec.EphemeralContainers {
		visit(c.Env, c.EnvFrom)
	}
}

// visitPodSecrets calls f with every Secret name a pod references, as
// upstream's VisitPodSecretNames: image pull secrets, env, and volumes.
func visitPodSecrets(p *corev1.Pod, f func(string)) {
	for _, s := range p.Spec.ImagePullSecrets {
		f(s.Name)
	}
	podEnv(p, func(env []corev1.EnvVar, from []corev1.EnvFromSource) {
		for _, e := range from {
			if e.SecretRef != nil {
				f(e.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				f(e.ValueFrom.SecretKeyRef.Name)
			}
		}
	})
	ref := func(r *corev1.LocalObjectReference) {
		if r != nil {
			f(r.Name)
		}
	}
	for _, v := range p.Spec.Volumes {
		s := v.VolumeSource
		switch {
		case s.Secret != nil:
			f(s.Secret.SecretName)
		case s.Projected != nil:
			for _, src := range s.Projected.Sources {
				if src.Secret != nil {
					f(src.Secret.Name)
				}
			}
		case s.AzureFile != nil:
			f(s.AzureFile.SecretName)
		case s.CephFS != nil:
			ref(s.CephFS.SecretRef)
		case s.Cinder != nil:
			ref(s.Cinder.SecretRef)
		case s.FlexVolume != nil:
			ref(s.FlexVolume.SecretRef)
		case s.ISCSI != nil:
			ref(s.ISCSI.SecretRef)
		case s.RBD != nil:
			ref(s.RBD.SecretRef)
		case s.ScaleIO != nil:
			ref(s.ScaleIO.SecretRef)
		case s.StorageOS != nil:
			ref(s.StorageOS.SecretRef)
		case s.CSI != nil:
			ref(s.CSI.NodePublishSecretRef)
		}
	}
}

// visitPodConfigMaps calls f with every ConfigMap name a pod references:
// env and volumes.
func visitPodConfigMaps(p *corev1.Pod, f func(string)) {
	podEnv(p, func(env []corev1.EnvVar, from []corev1.EnvFromSource) {
		for _, e := range from {
			if e.ConfigMapRef != nil {
				f(e.ConfigMapRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				f(e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	})
	for _, v := range p.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			f(v.ConfigMap.Name)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					f(src.ConfigMap.Name)
				}
			}
		}
	}
}

// authorizePodCertificateRequest is upstream's: the kubelet creates the
// requests of its pods and follows them until issued, and nothing else.
func (n NodeAuthorizer) authorizePodCertificateRequest(node string, a Attributes) (Decision, string) {
	if a.Subresource != "" {
		return DecisionNoOpinion, "nodes may not access the status subresource of PodCertificateRequests"
	}
	switch a.Verb {
	case "create":
		// NodeRestriction admission checks what the request names.
		return DecisionAllow, ""
	case "get":
		if a.Name == "" {
			return DecisionNoOpinion, "No Object name found"
		}
		if r, err := n.Objects.PodCertificateRequest(a.Namespace, a.Name); err == nil && string(r.Spec.NodeName) == node {
			return DecisionAllow, ""
		}
		return DecisionNoOpinion, fmt.Sprintf("no relationship found between node '%s' and this object", node)
	case "list", "watch":
		for _, req := range a.FieldSelector {
			if req.Field == "spec.nodeName" && req.Operator == selection.Equals && req.Value == node {
				return DecisionAllow, ""
			}
		}
		return DecisionNoOpinion, "can only list/watch podcertificaterequests with nodeName field selector"
	}
	return DecisionNoOpinion, fmt.Sprintf("nodes may not %s podcertificaterequests", a.Verb)
}
