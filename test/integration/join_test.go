package integration

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kelp-project/kelp/config"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	agentjoin "github.com/kelp-project/kelp/agent/join"
	"github.com/kelp-project/kelp/server/join"
)

// tokenFile reads one of the server's token files.
func (s *testServer) tokenFile(name string) string {
	s.t.Helper()
	st, err := os.Stat(filepath.Join(s.dataDir, "server", name))
	if err != nil || st.Mode().Perm() != 0o600 {
		s.t.Fatalf("%s: %v, mode %v", name, err, st.Mode().Perm())
	}
	return strings.TrimSpace(mustRead(s.t, filepath.Join(s.dataDir, "server", name)))
}

// joinAs joins s as node with token, from a data dir of its own, through
// agent/join as `kelp agent` does (without starting the agent itself).
func joinAs(t *testing.T, s *testServer, dataDir, node, token string) (*agentjoin.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return agentjoin.Join(ctx, agentjoin.Config{Server: s.config.Host, Token: token, DataDir: dataDir, NodeName: node, NodeIP: "127.0.0.1"})
}

func whoami(t *testing.T, rc *rest.Config) authenticationv1.UserInfo {
	t.Helper()
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctxT(t), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("whoami: %v", err)
	}
	return r.Status.UserInfo
}

// A node joins with the node-token and gets working credentials: a node
// identity, a proxy identity, a serving certificate from the cluster CA,
// and the cluster settings.
func TestJoinWithNodeToken(t *testing.T) {
	s := startServer(t, "--cluster-dns", "10.43.0.20")
	token := s.tokenFile("node-token")
	caPEM, code := s.raw("/cacerts")
	if code != 200 || !strings.HasPrefix(token, "K10"+join.CAHash([]byte(caPEM))+"::node:") {
		t.Fatalf("node-token %q does not carry the hash of /cacerts (%d)", token, code)
	}
	if srv := s.tokenFile("token"); !strings.HasPrefix(srv, "K10"+join.CAHash([]byte(caPEM))+"::server:") || srv == token {
		t.Fatalf("token %q", srv)
	}
	dir := t.TempDir()
	res, err := joinAs(t, s, dir, "node-a", token)
	if err != nil {
		t.Fatalf("join: %v\n%s", err, s.logs)
	}
	if u := whoami(t, res.Node); u.Username != "system:node:node-a" || !slices.Contains(u.Groups, "system:nodes") {
		t.Errorf("node identity %+v", u)
	}
	if u := whoami(t, res.Proxy); u.Username != "system:kube-proxy" {
		t.Errorf("proxy identity %+v", u)
	}
	// The node registers itself and the proxy reads Services, as the
	// kubelet and the service proxy will.
	node, err := kubernetes.NewForConfig(res.Node)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.CoreV1().Nodes().Create(ctxT(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("node creating its Node: %v", err)
	}
	proxy, err := kubernetes.NewForConfig(res.Proxy)
	if err != nil {
		t.Fatal(err)
	}
	// The proxy lists and watches Services (system:node-proxier); it
	// gets none by name.
	if _, err := proxy.CoreV1().Services("").List(ctxT(t), metav1.ListOptions{}); err != nil {
		t.Errorf("proxy listing Services: %v", err)
	}
	if want := (join.Settings{ClusterCIDR: "10.42.0.0/16", ServiceCIDR: "10.43.0.0/16", ClusterDNS: "10.43.0.20", ClusterDomain: "cluster.local", FlannelBackend: config.NodeNetwork}); res.Settings != want {
		t.Errorf("settings %+v, want %+v", res.Settings, want)
	}
	b, _ := pem.Decode([]byte(mustRead(t, res.ServingCertFile)))
	serving, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(caPEM))
	if _, err := serving.Verify(x509.VerifyOptions{Roots: pool, DNSName: "node-a", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("kubelet serving certificate: %v", err)
	}
	if !slices.ContainsFunc(serving.IPAddresses, net.ParseIP("127.0.0.1").Equal) {
		t.Errorf("serving certificate IPs %v lack the node IP", serving.IPAddresses)
	}
	for _, f := range []string{"node-password", "client-kubelet.key", "serving-kubelet.key", "client-kube-proxy.key", "kubelet.kubeconfig", "kubeproxy.kubeconfig"} {
		if st, err := os.Stat(filepath.Join(dir, "agent", f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("agent/%s: %v, mode %v", f, err, st.Mode().Perm())
		}
	}
	if _, err := s.client().CoreV1().Secrets("kube-system").Get(ctxT(t), "node-a.node-password.kelp", metav1.GetOptions{}); err != nil {
		t.Errorf("node password secret: %v", err)
	}
	// A second start keeps certificates that are far from expiry.
	before := mustRead(t, filepath.Join(dir, "agent", "client-kubelet.crt"))
	if _, err := joinAs(t, s, dir, "node-a", token); err != nil {
		t.Fatalf("second join: %v", err)
	}
	if after := mustRead(t, filepath.Join(dir, "agent", "client-kubelet.crt")); after != before {
		t.Error("a valid certificate was reissued at the second start")
	}
	// The tokens survive a restart, and the server secret is still the
	// admin's bearer token, bare or as the token file holds it.
	srv := s.tokenFile("token")
	s.restart()
	if s.tokenFile("node-token") != token || s.tokenFile("token") != srv {
		t.Error("tokens changed across a restart")
	}
	_, secret, _ := strings.Cut(strings.TrimPrefix(srv, "K10"), "::server:")
	for _, bearer := range []string{srv, secret} {
		if code := s.bearerGet(bearer, "/api/v1/namespaces"); code != 200 {
			t.Errorf("admin bearer token %q…: %d", bearer[:8], code)
		}
	}
	if code := s.bearerGet(token[strings.LastIndex(token, ":")+1:], "/api/v1/namespaces"); code != 401 {
		t.Errorf("the agent secret as a bearer token: %d, want 401", code)
	}
}

func (s *testServer) bearerGet(token, path string) int {
	s.t.Helper()
	rc := rest.AnonymousClientConfig(s.config)
	rc.BearerToken = token
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := hc.Get(s.config.Host + path)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// kelpAgent runs `kelp agent` against s and returns its output and error.
// Every case here must fail during the join; should one not, the runtime
// endpoint points nowhere, so the agent stops before touching the host.
func kelpAgent(t *testing.T, s *testServer, dataDir, node, token string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kelpBin, "agent", "--server", s.config.Host, "--token", token, "--data-dir", dataDir,
		"--node-name", node, "--node-ip", "127.0.0.1", "--container-runtime-endpoint", "unix:///nonexistent/containerd.sock",
		"--run-dir", filepath.Join(dataDir, "run"), "--pod-log-dir", filepath.Join(dataDir, "logs"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Each refusal stops `kelp agent` with a clear message and a non-zero exit.
func TestJoinRefusals(t *testing.T) {
	s := startServer(t)
	token := s.tokenFile("node-token")
	hash, _, _ := strings.Cut(strings.TrimPrefix(token, "K10"), "::")
	if _, err := joinAs(t, s, t.TempDir(), "taken", token); err != nil {
		t.Fatal(err)
	}
	expired := s.kelpToken(t, "create", "--ttl", "1s")[0]
	time.Sleep(2 * time.Second) // expiration has a resolution of a second
	for _, c := range []struct {
		name, node, token, want string
	}{
		{"wrong secret", "n1", "K10" + hash + "::node:wrong", "the server refused the token: the token is not valid for this server"},
		{"wrong bare secret", "n1", "wrong", "the token is not valid for this server"},
		{"wrong CA hash", "n1", "K10" + strings.Repeat("0", 64) + "::node:" + token[strings.LastIndex(token, ":")+1:], "the server's CA does not match the token's hash"},
		{"taken node name", "taken", token, "node name taken is already taken by another machine"},
		{"expired bootstrap token", "n1", expired, "bootstrap token " + expired[:6] + " expired at"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := kelpAgent(t, s, t.TempDir(), c.node, c.token)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("kelp agent: %v, want a failure saying %q:\n%s", err, c.want, out)
			}
			if strings.Contains(out, "containerd") {
				t.Errorf("the agent got past the join:\n%s", out)
			}
		})
	}
}

// `kubectl delete node` frees the name: the node's password goes with
// its Node, and another machine may then join under that name.
func TestDeletedNodeNameCanBeTaken(t *testing.T) {
	s := startServer(t)
	token := s.tokenFile("node-token")
	if _, err := joinAs(t, s, t.TempDir(), "reused", token); err != nil {
		t.Fatal(err)
	}
	if _, err := joinAs(t, s, t.TempDir(), "reused", token); err == nil || !strings.Contains(err.Error(), "already taken") {
		t.Fatalf("a second machine joined as a live node: %v", err)
	}
	ctx := context.Background()
	admin := s.client()
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "reused"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := s.kubectl("delete", "node", "reused"); err != nil {
		t.Fatalf("kubectl delete node: %v\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := admin.CoreV1().Secrets("kube-system").Get(ctx, "reused.node-password.kelp", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node password outlived its Node: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := joinAs(t, s, t.TempDir(), "reused", token); err != nil {
		t.Errorf("a new machine joining as the deleted node: %v", err)
	}
}

// kelpToken runs `kelp token ARGS` with the admin kubeconfig and returns
// its output lines.
func (s *testServer) kelpToken(t *testing.T, args ...string) []string {
	t.Helper()
	full := append([]string{"token", args[0], "--kubeconfig", s.kubeconfig}, args[1:]...)
	out, err := exec.Command(kelpBin, full...).CombinedOutput()
	if err != nil {
		t.Fatalf("kelp %s: %v\n%s", strings.Join(full, " "), err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// Bootstrap tokens from `kelp token create` join agents, show in `kelp
// token list`, and stop joining once deleted.
func TestBootstrapTokens(t *testing.T) {
	s := startServer(t)
	out := s.kelpToken(t, "create", "--description", "for node b", "--ttl", "2h")
	if len(out) != 2 {
		t.Fatalf("kelp token create: %q", out)
	}
	bare, full := out[0], out[1]
	id, _, ok := join.SplitBootstrapToken(bare)
	caPEM, _ := s.raw("/cacerts")
	if !ok || full != "K10"+join.CAHash([]byte(caPEM))+"::"+bare {
		t.Fatalf("kelp token create printed %q", out)
	}
	sec, err := s.client().CoreV1().Secrets("kube-system").Get(ctxT(t), "bootstrap-token-"+id, metav1.GetOptions{})
	if err != nil || sec.Type != "bootstrap.kubernetes.io/token" || string(sec.Data["usage-bootstrap-authentication"]) != "true" ||
		string(sec.Data["description"]) != "for node b" || len(sec.Data["expiration"]) == 0 {
		t.Fatalf("bootstrap token secret %+v, %v", sec, err)
	}
	list := s.kelpToken(t, "list")
	if len(list) != 2 || !strings.HasPrefix(list[0], "ID") || !strings.HasPrefix(list[1], id+" ") || !strings.Contains(list[1], "for node b") ||
		strings.Contains(strings.Join(list, "\n"), bare) {
		t.Errorf("kelp token list: %q", list)
	}
	for i, tok := range []string{full, bare} {
		res, err := joinAs(t, s, t.TempDir(), "node-b"+string(rune('0'+i)), tok)
		if err != nil {
			t.Fatalf("join with %q: %v", tok, err)
		}
		if u := whoami(t, res.Node); u.Username != "system:node:node-b"+string(rune('0'+i)) {
			t.Errorf("identity %+v", u)
		}
	}
	if got := s.kelpToken(t, "delete", id); len(got) != 1 || !strings.Contains(got[0], id) {
		t.Errorf("kelp token delete: %q", got)
	}
	if _, err := joinAs(t, s, t.TempDir(), "node-c", full); err == nil || !strings.Contains(err.Error(), "the token is not valid") {
		t.Errorf("join with a deleted token: %v", err)
	}
	if list := s.kelpToken(t, "list"); len(list) != 1 {
		t.Errorf("kelp token list after delete: %q", list)
	}
	if out, err := exec.Command(kelpBin, "token", "delete", "--kubeconfig", s.kubeconfig, id).CombinedOutput(); err == nil || !strings.Contains(string(out), "not found") {
		t.Errorf("deleting it again: %v %s", err, out)
	}
}

// The join endpoints answer only what they serve.
func TestJoinEndpointsUnauthenticated(t *testing.T) {
	s := startServer(t)
	if _, code := s.raw("/v1-kelp/config"); code != http.StatusUnauthorized {
		t.Errorf("/v1-kelp/config without a token: %d", code)
	}
	if body, code := s.raw("/cacerts"); code != 200 || !strings.Contains(body, "BEGIN CERTIFICATE") {
		t.Errorf("/cacerts: %d %q", code, body)
	}
}
