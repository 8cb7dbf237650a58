package admission

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// testPods are pod web on n1 and pod db on n2, for token requests.
func testPods() *fakeObjects {
	return &fakeObjects{items: map[string]runtime.Object{
		"default/web": &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"}, Spec: corev1.PodSpec{NodeName: "n1"}},
		"default/db":  &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", UID: "uid-db"}, Spec: corev1.PodSpec{NodeName: "n2"}},
	}}
}

func tokenFor(kind, name, uid string) *authenticationv1.TokenRequest {
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: kind, APIVersion: "v1", Name: name, UID: types.UID(uid)}}}
}

func TestNodeRestriction(t *testing.T) {
	n1 := &auth.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	admin := &auth.User{Name: "kelp-admin", Groups: []string{"system:masters", "system:authenticated"}}
	nodesGVR := corev1.SchemeGroupVersion.WithResource("nodes")
	leasesGVR := coordinationv1.SchemeGroupVersion.WithResource("leases")
	pvcGVR := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	saGVR := corev1.SchemeGroupVersion.WithResource("serviceaccounts")

	node := func(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	pod := func(name, nodeName string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: nodeName}}
	}
	kubeletLabels := map[string]string{"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": "a",
		"node.kubernetes.io/instance-type": "pi4", "kubelet.kubernetes.io/x": "1", "example.node.kubernetes.io/y": "2", "team": "edge"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	noSchedule := corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: name}}
	}
	pvc := func(capacity string, labels map[string]string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data", Labels: labels}}
		if capacity != "" {
			c.Status.Phase = corev1.ClaimBound
			c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}}
		}
		return c
	}

	for _, tc := range []struct {
		name      string
		user      *auth.User
		op        string
		gvr       schema.GroupVersionResource
		sub       string
		namespace string
		objName   string
		obj, old  runtime.Object
		wantMsg   string // empty: admitted
	}{
		// Its own Node only.
		{name: "register itself with the kubelet's labels", op: "CREATE", gvr: nodesGVR, objName: "n1", obj: node("n1", kubeletLabels)},
		{name: "register another node", op: "CREATE", gvr: nodesGVR, objName: "n2", obj: node("n2", nil),
			wantMsg: `nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"`},
		{name: "register with a role label", op: "CREATE", gvr: nodesGVR, objName: "n1",
			obj:     node("n1", with(kubeletLabels, "node-role.kubernetes.io/control-plane", "true", "node-restriction.kubernetes.io/gpu", "yes")),
			wantMsg: `nodes "n1" is forbidden: node "n1" is not allowed to set the following labels: node-restriction.kubernetes.io/gpu, node-role.kubernetes.io/control-plane`},
		{name: "register with a configSource", op: "CREATE", gvr: nodesGVR, objName: "n1",
			obj:     &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ConfigSource: &corev1.NodeConfigSource{}}},
			wantMsg: `nodes "n1" is forbidden: node "n1" is not allowed to create pods with a non-nil configSource`},
		{name: "update own labels the kubelet owns", op: "UPDATE", gvr: nodesGVR, objName: "n1",
			obj: node("n1", with(kubeletLabels, "kubernetes.io/hostname", "renamed", "team", "core")), old: node("n1", kubeletLabels)},
		{name: "keep a role label someone else set", op: "UPDATE", gvr: nodesGVR, objName: "n1",
			obj: node("n1", with(kubeletLabels, "node-role.kubernetes.io/control-plane", "true", "kubelet.kubernetes.io/x", "2")),
			old: node("n1", with(kubeletLabels, "node-role.kubernetes.io/control-plane", "true"))},
		{name: "remove a role label", op: "UPDATE", gvr: nodesGVR, objName: "n1",
			obj: node("n1", kubeletLabels), old: node("n1", with(kubeletLabels, "node-role.kubernetes.io/control-plane", "true")),
			wantMsg: `nodes "n1" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/control-plane`},
		{name: "add a k8s.io label", op: "UPDATE", gvr: nodesGVR, objName: "n1",
			obj: node("n1", with(kubeletLabels, "example.k8s.io/x", "1")), old: node("n1", kubeletLabels),
			wantMsg: `nodes "n1" is forbidden: is not allowed to modify labels: example.k8s.io/x`},
		{name: "lift its own taint", op: "UPDATE", gvr: nodesGVR, objName: "n1",
			obj: node("n1", nil), old: node("n1", nil, noSchedule),
			wantMsg: `nodes "n1" is forbidden: node "n1" is not allowed to modify taints`},
		{name: "status update keeps the taints", op: "UPDATE", gvr: nodesGVR, sub: "status", objName: "n1",
			obj: node("n1", nil, noSchedule), old: node("n1", nil, noSchedule)},
		{name: "update another node's status", op: "UPDATE", gvr: nodesGVR, sub: "status", objName: "n2",
			obj: node("n2", nil), old: node("n2", nil),
			wantMsg: `nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"`},
		{name: "an admin may do all of it", user: admin, op: "UPDATE", gvr: nodesGVR, objName: "n2",
			obj: node("n2", map[string]string{"node-role.kubernetes.io/control-plane": "true"}), old: node("n2", nil, noSchedule)},

		// Pods.
		{name: "status of its own pod", op: "UPDATE", gvr: podsGVR, sub: "status", namespace: "default", objName: "web",
			obj: pod("web", "n1", map[string]string{"app": "web"}), old: pod("web", "n1", map[string]string{"app": "web"})},
		{name: "status of another node's pod", op: "UPDATE", gvr: podsGVR, sub: "status", namespace: "default", objName: "other",
			obj: pod("other", "n2", nil), old: pod("other", "n2", nil),
			wantMsg: `pods "other" is forbidden: node "n1" can only update pod status for pods with spec.nodeName set to itself`},
		{name: "labels through pod status", op: "UPDATE", gvr: podsGVR, sub: "status", namespace: "default", objName: "web",
			obj: pod("web", "n1", map[string]string{"app": "evil"}), old: pod("web", "n1", map[string]string{"app": "web"}),
			wantMsg: `pods "web" is forbidden: node "n1" cannot update labels through pod status`},
		{name: "delete its own pod", op: "DELETE", gvr: podsGVR, namespace: "default", objName: "web", old: pod("web", "n1", nil)},
		{name: "delete another node's pod", op: "DELETE", gvr: podsGVR, namespace: "default", objName: "other", old: pod("other", "n2", nil),
			wantMsg: `pods "other" is forbidden: node "n1" can only delete pods with spec.nodeName set to itself`},
		{name: "delete an unbound pod", op: "DELETE", gvr: podsGVR, namespace: "default", objName: "pending", old: pod("pending", "", nil),
			wantMsg: `pods "pending" is forbidden: node "n1" can only delete pods with spec.nodeName set to itself`},
		{name: "create a pod", op: "CREATE", gvr: podsGVR, namespace: "default", objName: "new", obj: pod("new", "n1", nil),
			wantMsg: `pods "new" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "n1" can only create mirror pods`},
		{name: "create a mirror pod", op: "CREATE", gvr: podsGVR, namespace: "default", objName: "static-n1",
			obj:     &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "static-n1", Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}, Spec: corev1.PodSpec{NodeName: "n1"}},
			wantMsg: `pods "static-n1" is forbidden: node "n1" may not create mirror pods: kelp runs no static pods`},
		{name: "update a pod", op: "UPDATE", gvr: podsGVR, namespace: "default", objName: "web", obj: pod("web", "n1", nil), old: pod("web", "n1", nil),
			wantMsg: `pods "web" is forbidden: unexpected operation "UPDATE", node "n1" can only create and delete mirror pods`},
		{name: "bind a pod", op: "UPDATE", gvr: podsGVR, sub: "binding", namespace: "default", objName: "web", obj: pod("web", "n1", nil), old: pod("web", "", nil),
			wantMsg: `pods "web" is forbidden: unexpected pod subresource "binding", only 'status' and 'eviction' are allowed`},
		// Evictions of its own pods only; a missing pod is the eviction's 404.
		{name: "evict its own pod", op: "CREATE", gvr: podsGVR, sub: "eviction", namespace: "default", objName: "web",
			obj: &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}},
		{name: "evict another node's pod", op: "CREATE", gvr: podsGVR, sub: "eviction", namespace: "default", objName: "db",
			obj:     &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}},
			wantMsg: `pods "db" is forbidden: node n1 can only evict pods with spec.nodeName set to itself`},
		{name: "evict a missing pod", op: "CREATE", gvr: podsGVR, sub: "eviction", namespace: "default", objName: "gone",
			obj: &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "default"}}},

		// Leases.
		{name: "create its own lease", op: "CREATE", gvr: leasesGVR, namespace: "kube-node-lease", objName: "n1", obj: lease("n1")},
		{name: "renew its own lease", op: "UPDATE", gvr: leasesGVR, namespace: "kube-node-lease", objName: "n1", obj: lease("n1"), old: lease("n1")},
		{name: "create another node's lease", op: "CREATE", gvr: leasesGVR, namespace: "kube-node-lease", objName: "n2", obj: lease("n2"),
			wantMsg: `leases.coordination.k8s.io "n2" is forbidden: can only access node lease with the same name as the requesting node`},
		{name: "renew another node's lease", op: "UPDATE", gvr: leasesGVR, namespace: "kube-node-lease", objName: "n2", obj: lease("n2"), old: lease("n2"),
			wantMsg: `leases.coordination.k8s.io "n2" is forbidden: can only access node lease with the same name as the requesting node`},
		{name: "a leader lease", op: "UPDATE", gvr: leasesGVR, namespace: "kube-system", objName: "kube-scheduler",
			obj: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"}}, old: &coordinationv1.Lease{},
			wantMsg: `leases.coordination.k8s.io "kube-scheduler" is forbidden: can only access leases in the "kube-node-lease" system namespace`},

		// Claims: status capacity and conditions only.
		{name: "claim status", op: "UPDATE", gvr: pvcGVR, sub: "status", namespace: "default", objName: "data", obj: pvc("1Gi", nil), old: pvc("", nil),
			wantMsg: `persistentvolumeclaims "data" is forbidden: node "n1" is not allowed to update fields other than status.capacity and status.conditions`},
		{name: "claim conditions", op: "UPDATE", gvr: pvcGVR, sub: "status", namespace: "default", objName: "data",
			obj: func() runtime.Object {
				c := pvc("", nil)
				c.Status.Conditions = pvc("x", nil).Status.Conditions
				return c
			}(), old: pvc("", nil)},
		{name: "claim spec", op: "UPDATE", gvr: pvcGVR, namespace: "default", objName: "data", obj: pvc("", map[string]string{"a": "b"}), old: pvc("", nil),
			wantMsg: `persistentvolumeclaims "data" is forbidden: may only update PVC status`},

		// Tokens only for pods bound to the node, by UID.
		{name: "token for own pod", op: "CREATE", gvr: saGVR, sub: "token", namespace: "default", objName: "app", obj: tokenFor("Pod", "web", "uid-web")},
		{name: "token unbound", op: "CREATE", gvr: saGVR, sub: "token", namespace: "default", objName: "app", obj: &authenticationv1.TokenRequest{},
			wantMsg: `serviceaccounts "app" is forbidden: node requested token not bound to a pod`},
		{name: "token bound to a secret", op: "CREATE", gvr: saGVR, sub: "token", namespace: "default", objName: "app", obj: tokenFor("Secret", "s", "x"),
			wantMsg: `serviceaccounts "app" is forbidden: node requested token not bound to a pod`},
		{name: "token without uid", op: "CREATE", gvr: saGVR, sub: "token", namespace: "default", objName: "app", obj: tokenFor("Pod", "web", ""),
			wantMsg: `serviceaccounts "app" is forbidden: node requested token with a pod binding without a uid`},
		{name: "token for a recreated pod", op: "CREATE", gvr: saGVR, sub: "token", namespace: "default", objName: "app", obj: tokenFor("Pod", "web", "old"),
			wantMsg: `serviceaccounts "app" is forbidden: the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated`},
		{name: "token for another node's pod", op: "CREATE", gvr: saGVR, sub: "token", namespace: "default", objName: "app", obj: tokenFor("Pod", "db", "uid-db"),
			wantMsg: `serviceaccounts "app" is forbidden: node requested token bound to a pod scheduled on a different node`},
		{name: "token for admins", op: "CREATE", gvr: saGVR, sub: "token", namespace: "default", objName: "app", obj: &authenticationv1.TokenRequest{}, user: admin},

		// Everything else is the authorizer's.
		{name: "an event", op: "CREATE", gvr: corev1.SchemeGroupVersion.WithResource("events"), namespace: "default", objName: "e",
			obj: &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := tc.user
			if user == nil {
				user = n1
			}
			err := nodeRestriction{pods: testPods()}.Validate(context.Background(), &Attributes{Operation: tc.op, Resource: tc.gvr, Subresource: tc.sub,
				Namespace: tc.namespace, Name: tc.objName, Object: tc.obj, OldObject: tc.old, User: user})
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("err = %v, want 403", err)
			}
			if err.Error() != tc.wantMsg {
				t.Errorf("message\n got %s\nwant %s", err.Error(), tc.wantMsg)
			}
		})
	}
}

// A node user without a name is refused everything, and the plugin is in
// the chain kelp serves with.
func TestNodeRestrictionInChain(t *testing.T) {
	c := newChain(t, &fakeNamespaces{items: map[string]*corev1.Namespace{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}}}})
	nameless := &auth.User{Name: "system:node:", Groups: []string{"system:nodes"}}
	err := c.Validate(context.Background(), &Attributes{Operation: "CREATE", Resource: corev1.SchemeGroupVersion.WithResource("events"),
		Namespace: "default", Name: "e", Object: &corev1.Event{}, User: nameless})
	if !apierrors.IsForbidden(err) || err.Error() != `events "e" is forbidden: could not determine node from user "system:node:"` {
		t.Errorf("nameless node: %v", err)
	}
	n1 := &auth.User{Name: "system:node:n1", Groups: []string{"system:nodes"}}
	err = c.Validate(context.Background(), &Attributes{Operation: "DELETE", Resource: podsGVR, Namespace: "default", Name: "other",
		OldObject: &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n2"}}, User: n1})
	if !apierrors.IsForbidden(err) {
		t.Errorf("chain let n1 delete n2's pod: %v", err)
	}
}
