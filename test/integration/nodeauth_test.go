package integration

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fieldsel "k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kelp-project/kelp/agent/kubelet/nodestatus"
	"github.com/kelp-project/kelp/server/pki"
)

// nodeClient signs a node's client certificate (CN system:node:<name>, O
// system:nodes) with the server's CA, as the join endpoints will, and
// returns a clientset and a kubeconfig for it.
func (s *testServer) nodeClient(name string) (*kubernetes.Clientset, string) {
	s.t.Helper()
	return s.userClient("system:node:"+name, "system:nodes")
}

// userClient is a clientset and a kubeconfig for a client certificate of
// user in groups, signed by the server's CA.
func (s *testServer) userClient(user string, groups ...string) (*kubernetes.Clientset, string) {
	s.t.Helper()
	rc := s.userConfig(user, groups...)
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		s.t.Fatal(err)
	}
	kubeconfig := filepath.Join(s.t.TempDir(), "user.kubeconfig")
	if err := pki.WriteKubeconfig(kubeconfig, 0o600, s.config.Host, rc.CAData, rc.CertData, rc.KeyData); err != nil {
		s.t.Fatal(err)
	}
	return cs, kubeconfig
}

// userConfig is the client configuration of a client certificate of user
// in groups, signed by the server's CA.
func (s *testServer) userConfig(user string, groups ...string) *rest.Config {
	s.t.Helper()
	ca, err := pki.LoadOrCreateCA(filepath.Join(s.dataDir, "server", "tls"))
	if err != nil {
		s.t.Fatal(err)
	}
	rc, err := ca.RESTConfig(s.config.Host, user, groups)
	if err != nil {
		s.t.Fatal(err)
	}
	return rc
}

func wantForbidden(t *testing.T, what string, err error, msg string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want 403", what, err)
		return
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("%s: message %q lacks %q", what, err.Error(), msg)
	}
}

// A node's credentials reach what its pods need and nothing else: the Node
// authorizer and NodeRestriction admission, end to end over HTTPS with a
// real client certificate.
func TestNodeCredentialsAreLimited(t *testing.T) {
	s := startServer(t)
	admin := s.client()
	n1, n1Kubeconfig := s.nodeClient("n1")
	ctx := ctxT(t)

	// The node registers itself; another node exists.
	if _, err := n1.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Labels: map[string]string{"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("n1 registering itself: %v", err)
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-creds", "unrelated"} {
		if _, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name, node, secret string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}}, Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: "busybox:1.35"}},
			Volumes:    []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}},
		}}
	}
	for _, p := range []*corev1.Pod{pod("web", "n1", "web-creds"), pod("other", "n2", "unrelated")} {
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Refused.
	err := n1.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{})
	wantForbidden(t, "delete another Node", err, `User "system:node:n1" cannot delete resource "nodes"`)
	_, err = n1.CoreV1().Secrets("default").Get(ctx, "unrelated", metav1.GetOptions{})
	wantForbidden(t, "read an unrelated Secret", err,
		`secrets "unrelated" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node 'n1' and this object`)
	statusPatch := []byte(`{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`)
	_, err = n1.CoreV1().Pods("default").Patch(ctx, "other", types.StrategicMergePatchType, statusPatch, metav1.PatchOptions{}, "status")
	wantForbidden(t, "patch another node's pod status", err, `node "n1" can only update pod status for pods with spec.nodeName set to itself`)
	err = n1.CoreV1().Pods("default").Delete(ctx, "other", metav1.DeleteOptions{})
	wantForbidden(t, "delete another node's pod", err, `node "n1" can only delete pods with spec.nodeName set to itself`)
	_, err = n1.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	wantForbidden(t, "list every pod", err, "can only list/watch pods with spec.nodeName field selector")
	_, err = n1.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	wantForbidden(t, "list Secrets", err, "secrets")
	_, err = n1.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
	wantForbidden(t, "read another Node", err, "node 'n1' cannot read 'n2', only its own Node object")
	_, err = n1.CoreV1().Pods("default").Create(ctx, pod("sneaky", "n1", "unrelated"), metav1.CreateOptions{})
	wantForbidden(t, "create a pod", err, `node "n1" can only create mirror pods`)
	_, err = n1.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":"true"}}}`), metav1.PatchOptions{})
	wantForbidden(t, "give itself a role", err, "is not allowed to modify labels: node-role.kubernetes.io/control-plane")
	_, err = n1.CoreV1().Nodes().Patch(ctx, "n2", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	wantForbidden(t, "label another Node", err, `node "n1" is not allowed to modify node "n2"`)
	_, err = n1.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{})
	wantForbidden(t, "create another node's Lease", err, "can only access node lease with the same name as the requesting node")
	_, err = n1.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	wantForbidden(t, "read a Namespace", err, "namespaces")

	// Allowed: what its own pods and its own objects need.
	if s, err := n1.CoreV1().Secrets("default").Get(ctx, "web-creds", metav1.GetOptions{}); err != nil || string(s.Data["k"]) != "v" {
		t.Errorf("read the Secret its pod uses: %v", err)
	}
	// A per-object watch, as upstream's kubelet makes: list by name.
	if l, err := n1.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{FieldSelector: fieldsel.OneTermEqualSelector("metadata.name", "web-creds").String()}); err != nil || len(l.Items) != 1 {
		t.Errorf("list the Secret its pod uses by name: %v", err)
	}
	own, err := n1.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fieldsel.OneTermEqualSelector("spec.nodeName", "n1").String()})
	if err != nil || len(own.Items) != 1 || own.Items[0].Name != "web" {
		t.Errorf("list its own pods: %v %v", err, own)
	}
	if _, err := n1.CoreV1().Pods("default").Patch(ctx, "web", types.StrategicMergePatchType, statusPatch, metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("patch its own pod's status: %v", err)
	}
	node, err := n1.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read its own Node: %v", err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := n1.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Errorf("update its own Node status: %v", err)
	}
	holder, secs, now := "n1", int32(40), metav1.NewMicroTime(time.Now())
	lease, err := n1.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create its own Lease: %v", err)
	}
	renewed := metav1.NewMicroTime(time.Now())
	lease.Spec.RenewTime = &renewed
	if _, err := n1.CoordinationV1().Leases("kube-node-lease").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Errorf("renew its own Lease: %v", err)
	}
	if _, err := n1.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}, Reason: "Started", Message: "started",
		Source: corev1.EventSource{Component: "kubelet", Host: "n1"}, Type: corev1.EventTypeNormal}, metav1.CreateOptions{}); err != nil {
		t.Errorf("create an Event: %v", err)
	}
	if _, err := n1.CoreV1().Services("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list Services (service links): %v", err)
	}
	if _, err := n1.Discovery().ServerGroups(); err != nil {
		t.Errorf("discovery: %v", err)
	}
	// The kubelet confirms its own pod's graceful deletion.
	if err := n1.CoreV1().Pods("default").Delete(ctx, "web", *metav1.NewDeleteOptions(0)); err != nil {
		t.Errorf("delete its own pod: %v", err)
	}

	// kubectl with the node's kubeconfig: can-i answers from the same
	// authorizers, and a refused read exits non-zero with the 403.
	nodeKubectl := func(args ...string) (string, error) {
		return s.kubectl(append([]string{"--kubeconfig", n1Kubeconfig}, args...)...)
	}
	// kubectl prints the reason after "no - ".
	if out, _ := nodeKubectl("auth", "can-i", "get", "secrets/unrelated"); strings.TrimSpace(out) != "no - no relationship found between node 'n1' and this object" {
		t.Errorf("can-i get an unrelated secret: %q", out)
	}
	// Its pod is gone, and with it the node's access to the pod's Secret.
	if out, _ := nodeKubectl("auth", "can-i", "get", "secrets/web-creds"); !strings.HasPrefix(out, "no") {
		t.Errorf("can-i get a deleted pod's secret: %q", out)
	}
	_, err = n1.CoreV1().Secrets("default").Get(ctx, "web-creds", metav1.GetOptions{})
	wantForbidden(t, "read a deleted pod's Secret", err, "no relationship found")
	if out, err := nodeKubectl("auth", "can-i", "get", "nodes/n1"); err != nil || !strings.HasSuffix(strings.TrimSpace(out), "yes") {
		t.Errorf("can-i get its own node: %v %q", err, out)
	}
	if out, err := nodeKubectl("get", "secret", "unrelated"); err == nil || !strings.Contains(out, "Forbidden") {
		t.Errorf("kubectl get an unrelated secret: %v %q", err, out)
	}
	// The admin is not limited by any of it.
	if _, err := admin.CoreV1().Secrets("default").Get(ctx, "unrelated", metav1.GetOptions{}); err != nil {
		t.Errorf("admin: %v", err)
	}
}

// The 403 is upstream's Status: reason Forbidden, the details naming the
// resource and object.
func TestNodeForbiddenStatus(t *testing.T) {
	s := startServer(t)
	n1, _ := s.nodeClient("n1")
	ctx := context.Background()
	_, err := n1.CoreV1().Secrets("kube-system").Get(ctx, "anything", metav1.GetOptions{})
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Fatalf("err %v", err)
	}
	st := status.Status()
	if st.Code != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden || st.Details == nil ||
		st.Details.Kind != "secrets" || st.Details.Name != "anything" {
		t.Errorf("status %+v", st)
	}
}

// versionOnly is the container runtime as the node status sees it.
type versionOnly struct{}

func (versionOnly) Version(context.Context) (string, error) { return "2.1.0", nil }

// The kubelet's own node status code registers, reports and renews under
// the node's credentials; the server gives its own node the control-plane
// role the kubelet may not give itself.
func TestKubeletNodeStatusUnderNodeCredentials(t *testing.T) {
	s := startServer(t, "--node-name", "n1")
	admin := s.client()
	n1, _ := s.nodeClient("n1")
	ctx := ctxT(t)
	r := nodestatus.New(nodestatus.Config{NodeName: "n1", NodeIP: "192.0.2.10", KubeletPort: 10250, Version: "v1.37.2",
		Labels: map[string]string{"node.kubernetes.io/pool": "edge"}}, n1, versionOnly{}, nodestatus.Host{DataDir: t.TempDir()})
	regCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	node, err := r.Register(regCtx)
	if err != nil {
		t.Fatalf("register: %v\n%s", err, s.logs.String())
	}
	if node.Spec.PodCIDR == "" || node.Labels["node.kubernetes.io/pool"] != "edge" {
		t.Errorf("registered %+v", node.ObjectMeta)
	}
	r.NetworkReady()
	r.SyncStatus(ctx)
	for _, what := range []string{"creates", "renews"} {
		if err := r.RenewLease(ctx); err != nil {
			t.Fatalf("RenewLease %s the Lease: %v", what, err)
		}
	}
	got, err := admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := false
	for _, c := range got.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready {
		t.Errorf("node status not posted: %+v", got.Status.Conditions)
	}
	if l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n1", metav1.GetOptions{}); err != nil ||
		l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "n1" || len(l.OwnerReferences) != 1 {
		t.Errorf("lease %+v %v", l, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err == nil && n.Labels["node-role.kubernetes.io/control-plane"] == "true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not label its node: %v", n.Labels)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Re-registration after the role label leaves it, and is admitted.
	if _, err := r.Register(regCtx); err != nil {
		t.Errorf("re-register: %v", err)
	}
	// The kubelet's pod watch.
	w, err := n1.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: fieldsel.OneTermEqualSelector("spec.nodeName", "n1").String()})
	if err != nil {
		t.Fatalf("watch its pods: %v", err)
	}
	w.Stop()
}
