package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/kelp-project/kelp/agent/kubelet"
	"github.com/kelp-project/kelp/agent/kubelet/kubelettest"
	"github.com/kelp-project/kelp/server/pki"
)

// refusals counts the API's 403s to a client.
type refusals struct {
	mu   sync.Mutex
	seen []string
	next http.RoundTripper
}

func (f *refusals) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := f.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusForbidden {
		f.mu.Lock()
		f.seen = append(f.seen, r.Method+" "+r.URL.String())
		f.mu.Unlock()
	}
	return resp, err
}

// The real kubelet, on an in-memory runtime and network, runs a pod that
// uses a Secret volume and ConfigMap env, reports it Running, records
// Events and confirms its deletion, all as system:node:n1, and the API
// server refuses none of its requests.
func TestKubeletRunsPodsUnderNodeCredentials(t *testing.T) {
	s := startServer(t, "--node-name", "n1")
	admin := s.client()
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()

	ca, err := pki.LoadOrCreateCA(filepath.Join(s.dataDir, "server", "tls"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ca.RESTConfig(s.config.Host, "system:node:n1", []string{"system:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	refused := &refusals{}
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { refused.next = rt; return refused }
	n1, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n1.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "n1"})

	rt := kubelettest.NewRuntime()
	dataDir := t.TempDir()
	k := kubelet.New(kubelet.Config{NodeName: "n1", NodeIP: "127.0.0.1", DataDir: dataDir, LogRoot: t.TempDir(), ClusterDNS: "10.43.0.10",
		ClientCA: ca.CertPEM, NewNetwork: func(string) (kubelet.Network, error) { return kubelettest.NewNetwork("10.42.0.9"), nil }}, n1, rt, recorder)
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()

	for _, obj := range []struct {
		create func() error
	}{
		{func() error {
			_, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
				StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{})
			return err
		}},
		{func() error {
			_, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
				Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{})
			return err
		}},
	} {
		if err := obj.create(); err != nil {
			t.Fatal(err)
		}
	}
	grace := int64(1)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{
		NodeName: "n1", TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{Name: "app", Image: "busybox:1.35",
			Env: []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}}}}},
		Volumes: []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}},
	}}
	created, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, timeout time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s within %s; 403s: %v", what, timeout, refused.seen)
			}
			select {
			case err := <-done:
				t.Fatalf("kubelet stopped: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitFor("web Running and Ready", 30*time.Second, func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	if data, err := os.ReadFile(filepath.Join(dataDir, "pods", string(created.UID), "volumes", "creds", "password")); err != nil || string(data) != "hunter2" {
		t.Errorf("secret volume: %q %v", data, err)
	}
	// The kube-api-access volume admission added holds a token the kubelet
	// requested as the node, bound to the pod, and the namespace and CA.
	var tokenVolume string
	for _, v := range created.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") {
			tokenVolume = filepath.Join(dataDir, "pods", string(created.UID), "volumes", v.Name)
		}
	}
	token, err := os.ReadFile(filepath.Join(tokenVolume, "token"))
	if err != nil {
		t.Fatalf("no token in the kube-api-access volume: %v", err)
	}
	if u, err := s.whoami(t, string(token)); err != nil || u.Username != "system:serviceaccount:default:default" ||
		len(u.Extra["authentication.kubernetes.io/pod-name"]) != 1 || u.Extra["authentication.kubernetes.io/pod-name"][0] != "web" {
		t.Errorf("the pod's token: %+v %v", u, err)
	}
	if ns, _ := os.ReadFile(filepath.Join(tokenVolume, "namespace")); string(ns) != "default" {
		t.Errorf("namespace file %q", ns)
	}
	if ca, _ := os.ReadFile(filepath.Join(tokenVolume, "ca.crt")); !strings.Contains(string(ca), "BEGIN CERTIFICATE") {
		t.Errorf("ca.crt %q", ca)
	}
	spec, _ := rt.SpecOf("app")
	if env := strings.Join(spec.Env, " "); !strings.Contains(env, "MODE=fast") {
		t.Errorf("env %s lacks MODE=fast", env)
	}
	waitFor("a kubelet Event", 10*time.Second, func() bool {
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Source.Host == "n1" && e.InvolvedObject.Name == "web" {
				return true
			}
		}
		return false
	})
	// Graceful deletion: the kubelet stops the pod and confirms.
	if err := admin.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("web deleted by its kubelet", 30*time.Second, func() bool {
		_, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	node, err := admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil || node.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
		t.Errorf("node status not posted: %v", err)
	}
	refused.mu.Lock()
	defer refused.mu.Unlock()
	if len(refused.seen) > 0 {
		t.Errorf("the API server refused the kubelet: %v", refused.seen)
	}
}
