package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kelp-project/kelp/test/images"
)

// lastLine is the newest line a container has logged.
func (c *cluster) lastLine(ns, pod, container string) string {
	c.t.Helper()
	out, err := c.kubectl("-n", ns, "logs", pod, "-c", container, "--tail", "1")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// A pod's in-cluster client (rest.InClusterConfig, the kube-api-access
// volume the ServiceAccount admission adds) has exactly the rights RBAC
// gives its ServiceAccount: 403 listing pods before a RoleBinding to view,
// 200 after, and still 403 in another namespace.
func TestServiceAccountInClusterClient(t *testing.T) {
	c := startCluster(t)
	c.apply(t, `apiVersion: v1
kind: Namespace
metadata: {name: sa-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: sa-b}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: lister, namespace: sa-a}
---
apiVersion: v1
kind: Pod
metadata: {name: incluster, namespace: sa-a}
spec:
  serviceAccountName: lister
  containers:
  - {name: own, image: `+images.InCluster+`, imagePullPolicy: IfNotPresent, args: ["-interval=1s"]}
  - {name: other, image: `+images.InCluster+`, imagePullPolicy: IfNotPresent, args: ["-interval=1s", "-namespace=sa-b"]}
`)
	c.waitFor(90*time.Second, "the incluster pod's first attempts", func() bool {
		return strings.Contains(c.lastLine("sa-a", "incluster", "own"), "status=") &&
			strings.Contains(c.lastLine("sa-a", "incluster", "other"), "status=")
	})
	if line := c.lastLine("sa-a", "incluster", "own"); !strings.Contains(line, "status=403") {
		t.Fatalf("before the RoleBinding: %q, want status=403", line)
	}
	// The volume holds the namespace and the cluster CA as upstream's.
	if out := c.mustKubectl("-n", "sa-a", "exec", "incluster", "-c", "own", "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"); strings.TrimSpace(out) != "sa-a" {
		t.Errorf("namespace file %q", out)
	}
	if out := c.mustKubectl("-n", "sa-a", "exec", "incluster", "-c", "own", "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"); !strings.Contains(out, "BEGIN CERTIFICATE") {
		t.Errorf("ca.crt %q", out)
	}

	c.mustKubectl("-n", "sa-a", "create", "rolebinding", "lister-view", "--clusterrole", "view", "--serviceaccount", "sa-a:lister")
	c.waitFor(30*time.Second, "listing allowed after the RoleBinding", func() bool {
		return strings.Contains(c.lastLine("sa-a", "incluster", "own"), "status=200 pods=1")
	})
	time.Sleep(2 * time.Second) // a few more attempts in sa-b
	if line := c.lastLine("sa-a", "incluster", "other"); !strings.Contains(line, "status=403") {
		t.Errorf("in another namespace: %q, want status=403", line)
	}
}

// The kubelet refreshes a projected token before it expires: at 80% of a
// ten-minute token (the shortest the API mints) the file holds a new one,
// which authenticates as the pod's ServiceAccount. This test takes about
// nine minutes.
func TestServiceAccountTokenRefreshedBeforeExpiry(t *testing.T) {
	c := startCluster(t)
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: short-token}
spec:
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    volumeMounts: [{name: tok, mountPath: /var/run/secrets/tokens}]
  volumes:
  - name: tok
    projected:
      sources:
      - serviceAccountToken: {path: token, expirationSeconds: 600}
`)
	read := func() string {
		out, err := c.kubectl("exec", "short-token", "--", "cat", "/var/run/secrets/tokens/token")
		if err != nil {
			return ""
		}
		return strings.TrimSpace(out)
	}
	c.waitFor(60*time.Second, "the first token", func() bool { return read() != "" })
	first, start := read(), time.Now()
	var second string
	c.waitFor(9*time.Minute, "a refreshed token", func() bool {
		second = read()
		return second != "" && second != first
	})
	// Refreshed at 80% of 600 s (within a kubelet resync), before expiry.
	if took := time.Since(start); took > 9*time.Minute+30*time.Second || took < 7*time.Minute {
		t.Errorf("refreshed after %s, want about 8 min (80%% of 10)", took)
	}
	cfg := &rest.Config{Host: c.config.Host, BearerToken: second, TLSClientConfig: rest.TLSClientConfig{CAData: c.config.CAData}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the refreshed token: %v", err)
	}
	if u := r.Status.UserInfo; u.Username != "system:serviceaccount:default:default" ||
		len(u.Extra["authentication.kubernetes.io/pod-name"]) != 1 || u.Extra["authentication.kubernetes.io/pod-name"][0] != "short-token" {
		t.Errorf("refreshed token is %+v", u)
	}
}
