package auth

import (
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeObjects is NodeObjects over fixed pods and claims.
type fakeObjects struct {
	pods []*corev1.Pod
	pvcs []*corev1.PersistentVolumeClaim
	pcrs []*certificatesv1.PodCertificateRequest
}

func (f fakeObjects) PodsOnNode(namespace, node string) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, p := range f.pods {
		if (namespace == "" || p.Namespace == namespace) && p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f fakeObjects) Pod(namespace, name string) (*corev1.Pod, error) {
	for _, p := range f.pods {
		if p.Namespace == namespace && p.Name == name {
			return p, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

func (f fakeObjects) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	for _, c := range f.pvcs {
		if c.Namespace == namespace && c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
}

// testPods: web on n1 uses Secrets and ConfigMaps in every way a pod can,
// a claim and a service account; other on n2 uses its own; pending is
// bound to nobody.
func testObjects() fakeObjects {
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.PodSpec{
		NodeName:           "n1",
		ServiceAccountName: "web-sa",
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "pull"}},
		InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init-env"}}}}}},
		Containers: []corev1.Container{{Name: "app",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-env"}}}},
			Env: []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "key-secret"}, Key: "k"}}},
				{Name: "B", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "key-config"}, Key: "k"}}},
			}}},
		Volumes: []corev1.Volume{
			{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-config"}}}},
			{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-secret"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
			{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-secret"}}}},
		},
	}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"}, Spec: corev1.PodSpec{
		NodeName: "n2",
		Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "n2-secret"}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "n2-data"}}}},
	}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pending"}, Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "pending-secret"}}}},
	}}
	return fakeObjects{pods: []*corev1.Pod{web, other, pending}, pvcs: []*corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "n2-data"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-n2"}},
	}}
}

func res(verb, group, ns, resource, name, sub string) Attributes {
	return Attributes{IsResource: true, Verb: verb, Group: group, Version: "v1", Namespace: ns, Resource: resource, Name: name, Subresource: sub}
}

func withSelector(a Attributes, sel string) Attributes {
	a.FieldSelector = fields.ParseSelectorOrDie(sel).Requirements()
	return a
}

func TestNodeAuthorizer(t *testing.T) {
	az := NodeAuthorizer{Objects: testObjects()}
	n1 := &User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	const noRelation = "no relationship found between node 'n1' and this object"
	for _, tc := range []struct {
		name   string
		attrs  Attributes
		want   Decision
		reason string
	}{
		// Its own Node, and only its own.
		{"get own node", res("get", "", "", "nodes", "n1", ""), DecisionAllow, ""},
		{"watch own node by name", res("watch", "", "", "nodes", "n1", ""), DecisionAllow, ""},
		{"get other node", res("get", "", "", "nodes", "n2", ""), DecisionNoOpinion, "node 'n1' cannot read 'n2', only its own Node object"},
		{"list all nodes", res("list", "", "", "nodes", "", ""), DecisionNoOpinion, "node 'n1' cannot read all nodes, only its own Node object"},
		{"create node (admission checks the name)", res("create", "", "", "nodes", "", ""), DecisionAllow, ""},
		{"update node (admission checks the name)", res("update", "", "", "nodes", "n1", ""), DecisionAllow, ""},
		{"patch node status", res("patch", "", "", "nodes", "n1", "status"), DecisionAllow, ""},
		{"delete own node", res("delete", "", "", "nodes", "n1", ""), DecisionNoOpinion, ""},
		{"delete other node", res("delete", "", "", "nodes", "n2", ""), DecisionNoOpinion, ""},
		{"deletecollection nodes", res("deletecollection", "", "", "nodes", "", ""), DecisionNoOpinion, ""},
		{"get node status", res("get", "", "", "nodes", "n1", "status"), DecisionNoOpinion, ""},
		{"node proxy", res("get", "", "", "nodes", "n1", "proxy"), DecisionNoOpinion, ""},

		// Pods: its own, and lists scoped to itself.
		{"get own pod", res("get", "", "default", "pods", "web", ""), DecisionAllow, ""},
		{"get other node's pod", res("get", "", "default", "pods", "other", ""), DecisionNoOpinion, noRelation},
		{"get unbound pod", res("get", "", "default", "pods", "pending", ""), DecisionNoOpinion, noRelation},
		{"get missing pod", res("get", "", "default", "pods", "gone", ""), DecisionNoOpinion, noRelation},
		{"watch own pods", withSelector(res("watch", "", "", "pods", "", ""), "spec.nodeName=n1"), DecisionAllow, ""},
		{"list own pods in a namespace, more terms", withSelector(res("list", "", "default", "pods", "", ""), "status.phase=Running,spec.nodeName=n1"), DecisionAllow, ""},
		{"list all pods", res("list", "", "", "pods", "", ""), DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector"},
		{"list other node's pods", withSelector(res("list", "", "", "pods", "", ""), "spec.nodeName=n2"), DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector"},
		{"list pods not on it", withSelector(res("list", "", "", "pods", "", ""), "spec.nodeName!=n1"), DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector"},
		{"watch own pod by name", res("watch", "", "default", "pods", "web", ""), DecisionAllow, ""},
		{"watch other pod by name", res("watch", "", "default", "pods", "other", ""), DecisionNoOpinion, noRelation},
		{"patch own pod status", res("patch", "", "default", "pods", "web", "status"), DecisionAllow, ""},
		{"patch other pod status (admission refuses)", res("patch", "", "default", "pods", "other", "status"), DecisionAllow, ""},
		{"delete pod (admission checks the binding)", res("delete", "", "default", "pods", "web", ""), DecisionAllow, ""},
		{"create pod (admission: mirror pods only)", res("create", "", "default", "pods", "", ""), DecisionAllow, ""},
		{"update pod spec", res("update", "", "default", "pods", "web", ""), DecisionNoOpinion, ""},
		{"bind a pod", res("create", "", "default", "pods", "web", "binding"), DecisionNoOpinion, ""},
		{"exec into own pod", res("create", "", "default", "pods", "web", "exec"), DecisionNoOpinion, ""},
		{"evict a pod", res("create", "", "default", "pods", "web", "eviction"), DecisionAllow, ""},
		{"deletecollection pods", res("deletecollection", "", "default", "pods", "", ""), DecisionNoOpinion, ""},

		// Secrets and ConfigMaps its pods reference, by name only.
		{"image pull secret", res("get", "", "default", "secrets", "pull", ""), DecisionAllow, ""},
		{"init container envFrom secret", res("get", "", "default", "secrets", "init-env", ""), DecisionAllow, ""},
		{"secretKeyRef", res("get", "", "default", "secrets", "key-secret", ""), DecisionAllow, ""},
		{"secret volume", res("get", "", "default", "secrets", "vol-secret", ""), DecisionAllow, ""},
		{"projected secret", res("get", "", "default", "secrets", "proj-secret", ""), DecisionAllow, ""},
		{"csi node publish secret", res("get", "", "default", "secrets", "csi-secret", ""), DecisionAllow, ""},
		{"watch referenced secret by name", res("watch", "", "default", "secrets", "vol-secret", ""), DecisionAllow, ""},
		{"unrelated secret", res("get", "", "default", "secrets", "admin-token", ""), DecisionNoOpinion, noRelation},
		{"other node's secret", res("get", "", "default", "secrets", "n2-secret", ""), DecisionNoOpinion, noRelation},
		{"unbound pod's secret", res("get", "", "default", "secrets", "pending-secret", ""), DecisionNoOpinion, noRelation},
		{"referenced name in another namespace", res("get", "", "kube-system", "secrets", "vol-secret", ""), DecisionNoOpinion, noRelation},
		{"list secrets", res("list", "", "default", "secrets", "", ""), DecisionNoOpinion, "No Object name found"},
		{"list secrets everywhere", res("list", "", "", "secrets", "", ""), DecisionNoOpinion, "can only read namespaced object of this type"},
		{"update referenced secret", res("update", "", "default", "secrets", "vol-secret", ""), DecisionNoOpinion, "can only read resources of this type"},
		{"configMapRef", res("get", "", "default", "configmaps", "app-env", ""), DecisionAllow, ""},
		{"configMapKeyRef", res("get", "", "default", "configmaps", "key-config", ""), DecisionAllow, ""},
		{"configmap volume", res("get", "", "default", "configmaps", "vol-config", ""), DecisionAllow, ""},
		{"projected configmap", res("list", "", "default", "configmaps", "kube-root-ca.crt", ""), DecisionAllow, ""},
		{"unrelated configmap", res("get", "", "default", "configmaps", "other", ""), DecisionNoOpinion, noRelation},
		{"a configmap named like a referenced secret", res("get", "", "default", "configmaps", "vol-secret", ""), DecisionNoOpinion, noRelation},

		// Claims, volumes, service accounts.
		{"referenced claim", res("get", "", "default", "persistentvolumeclaims", "data", ""), DecisionAllow, ""},
		{"ephemeral claim", res("get", "", "default", "persistentvolumeclaims", "web-scratch", ""), DecisionAllow, ""},
		{"other node's claim", res("get", "", "default", "persistentvolumeclaims", "n2-data", ""), DecisionNoOpinion, noRelation},
		{"list claims", res("list", "", "default", "persistentvolumeclaims", "", ""), DecisionNoOpinion, "can only get individual resources of this type"},
		{"claim status", res("patch", "", "default", "persistentvolumeclaims", "data", "status"), DecisionAllow, ""},
		{"volume behind a referenced claim", res("get", "", "", "persistentvolumes", "pv-data", ""), DecisionAllow, ""},
		{"other node's volume", res("get", "", "", "persistentvolumes", "pv-n2", ""), DecisionNoOpinion, noRelation},
		{"token for own pod's service account", res("create", "", "default", "serviceaccounts", "web-sa", "token"), DecisionAllow, ""},
		{"token for another service account", res("create", "", "default", "serviceaccounts", "default", "token"), DecisionNoOpinion, noRelation},
		{"get own pod's service account", res("get", "", "default", "serviceaccounts", "web-sa", ""), DecisionAllow, ""},
		{"get another service account", res("get", "", "default", "serviceaccounts", "default", ""), DecisionNoOpinion, noRelation},
		{"list service accounts", res("list", "", "default", "serviceaccounts", "", ""), DecisionNoOpinion, "can only create tokens for individual service accounts"},

		// Leases: its own in kube-node-lease.
		{"get own lease", res("get", "coordination.k8s.io", "kube-node-lease", "leases", "n1", ""), DecisionAllow, ""},
		{"update own lease", res("update", "coordination.k8s.io", "kube-node-lease", "leases", "n1", ""), DecisionAllow, ""},
		{"create lease (admission checks the name)", res("create", "coordination.k8s.io", "kube-node-lease", "leases", "", ""), DecisionAllow, ""},
		{"update other lease", res("update", "coordination.k8s.io", "kube-node-lease", "leases", "n2", ""), DecisionNoOpinion, "can only access node lease with the same name as the requesting node"},
		{"lease elsewhere", res("update", "coordination.k8s.io", "kube-system", "leases", "n1", ""), DecisionNoOpinion, `can only access leases in the "kube-node-lease" system namespace`},
		{"list leases", res("list", "coordination.k8s.io", "kube-node-lease", "leases", "", ""), DecisionNoOpinion, "can only get, create, update, patch, or delete a node lease"},

		// Static rules.
		{"create event", res("create", "", "default", "events", "", ""), DecisionAllow, ""},
		{"patch event", res("patch", "", "default", "events", "web.1", ""), DecisionAllow, ""},
		{"delete event", res("delete", "", "default", "events", "web.1", ""), DecisionNoOpinion, ""},
		{"events.k8s.io event", res("create", "events.k8s.io", "default", "events", "", ""), DecisionNoOpinion, ""},
		{"watch services", res("watch", "", "", "services", "", ""), DecisionAllow, ""},
		{"update service", res("update", "", "default", "services", "web", ""), DecisionNoOpinion, ""},
		{"service status", res("get", "", "default", "services", "web", "status"), DecisionNoOpinion, ""},
		{"get endpoints", res("get", "", "default", "endpoints", "web", ""), DecisionAllow, ""},
		{"list endpointslices", res("list", "discovery.k8s.io", "", "endpointslices", "", ""), DecisionNoOpinion, ""},
		{"token review", res("create", "authentication.k8s.io", "", "tokenreviews", "", ""), DecisionAllow, ""},
		{"access review", res("create", "authorization.k8s.io", "", "subjectaccessreviews", "", ""), DecisionAllow, ""},
		{"deployments", res("list", "apps", "", "deployments", "", ""), DecisionNoOpinion, ""},
		{"namespaces", res("get", "", "", "namespaces", "default", ""), DecisionNoOpinion, ""},

		// Discovery is not the Node authorizer's.
		{"discovery", Attributes{Verb: "get", Path: "/api"}, DecisionNoOpinion, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, reason := az.Authorize(n1, tc.attrs)
			if d != tc.want || reason != tc.reason {
				t.Errorf("got %s %q, want %s %q", d, reason, tc.want, tc.reason)
			}
		})
	}
}

func TestNodeAuthorizerIdentity(t *testing.T) {
	az := NodeAuthorizer{Objects: testObjects()}
	secret := res("get", "", "default", "secrets", "vol-secret", "")
	for _, tc := range []struct {
		name   string
		user   *User
		want   Decision
		reason string
	}{
		{"the node its pod is on", &User{Name: "system:node:n1", Groups: []string{"system:nodes"}}, DecisionAllow, ""},
		{"another node", &User{Name: "system:node:n2", Groups: []string{"system:nodes"}}, DecisionNoOpinion, "no relationship found between node 'n2' and this object"},
		// Not nodes: the next authorizer decides.
		{"node name without the group", &User{Name: "system:node:n1"}, DecisionNoOpinion, ""},
		{"the group without a node name", &User{Name: "bob", Groups: []string{"system:nodes"}}, DecisionNoOpinion, ""},
		{"an admin", &User{Name: "kelp-admin", Groups: []string{"system:masters"}}, DecisionNoOpinion, ""},
		{"a node without a name", &User{Name: "system:node:", Groups: []string{"system:nodes"}}, DecisionNoOpinion, `unknown node for user "system:node:"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, reason := az.Authorize(tc.user, secret)
			if d != tc.want || reason != tc.reason {
				t.Errorf("got %s %q, want %s %q", d, reason, tc.want, tc.reason)
			}
		})
	}
}

// decide is an Authorizer with a fixed answer that counts its calls.
type decide struct {
	d      Decision
	reason string
	calls  *int
}

func (f decide) Authorize(*User, Attributes) (Decision, string) {
	*f.calls++
	return f.d, f.reason
}

func TestChain(t *testing.T) {
	u := &User{Name: "bob"}
	for _, tc := range []struct {
		name       string
		answers    []decide
		want       Decision
		wantReason string
		wantCalls  []int
	}{
		{"first allow wins", []decide{{d: DecisionNoOpinion, reason: "not mine"}, {d: DecisionAllow}, {d: DecisionDeny}}, DecisionAllow, "", []int{1, 1, 0}},
		{"first deny wins", []decide{{d: DecisionDeny, reason: "never"}, {d: DecisionAllow}}, DecisionDeny, "never", []int{1, 0}},
		{"nobody decides: the reasons, in order", []decide{{reason: "a"}, {}, {reason: "b"}}, DecisionNoOpinion, "a\nb", []int{1, 1, 1}},
		{"empty chain refuses", nil, DecisionNoOpinion, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := make([]int, len(tc.answers))
			var c Chain
			for i, a := range tc.answers {
				a.calls = &calls[i]
				c = append(c, a)
			}
			d, reason := c.Authorize(u, Attributes{})
			if d != tc.want || reason != tc.wantReason {
				t.Errorf("got %s %q, want %s %q", d, reason, tc.want, tc.wantReason)
			}
			for i := range calls {
				if calls[i] != tc.wantCalls[i] {
					t.Errorf("authorizer %d called %d times, want %d", i, calls[i], tc.wantCalls[i])
				}
			}
		})
	}
}

// The chain kelp serves with: nodes get what the Node authorizer gives
// them and, through RBAC, discovery and the self reviews; admins are not
// affected by it.
func TestNodeThenRBACChain(t *testing.T) {
	c := Chain{PrivilegedGroup{}, NodeAuthorizer{Objects: testObjects()}, RBAC{Index: policyIndex(t)}}
	n1 := &User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	admin := &User{Name: "kelp-admin", Groups: []string{"system:masters", "system:authenticated"}}
	unrelated := res("get", "", "default", "secrets", "admin-token", "")
	if d, reason := c.Authorize(n1, unrelated); d != DecisionNoOpinion || reason != "no relationship found between node 'n1' and this object" {
		t.Errorf("node, unrelated secret: %s %q", d, reason)
	}
	msg := Forbidden(n1, unrelated, "no relationship found between node 'n1' and this object").Error()
	if want := `secrets "admin-token" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node 'n1' and this object`; msg != want {
		t.Errorf("403\n got %s\nwant %s", msg, want)
	}
	for _, a := range []Attributes{{Verb: "get", Path: "/apis"}, res("create", "authorization.k8s.io", "", "selfsubjectaccessreviews", "", ""),
		res("get", "", "default", "secrets", "vol-secret", "")} {
		if d, _ := c.Authorize(n1, a); d != DecisionAllow {
			t.Errorf("node: %s %s%s: %s", a.Verb, a.Resource, a.Path, d)
		}
	}
	if d, _ := c.Authorize(admin, unrelated); d != DecisionAllow {
		t.Errorf("admin: %s", d)
	}
	// A node in system:masters is an admin: the Node authorizer has no
	// opinion to stop it, as upstream's RBAC would allow it too.
	masterNode := &User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:masters"}}
	if d, _ := c.Authorize(masterNode, unrelated); d != DecisionAllow {
		t.Errorf("node in system:masters: %s", d)
	}
	if !strings.HasPrefix(ForbiddenMessage(n1, unrelated), `secrets "admin-token" is forbidden`) {
		t.Errorf("ForbiddenMessage: %s", ForbiddenMessage(n1, unrelated))
	}
}
