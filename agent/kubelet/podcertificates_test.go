package kubelet

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/pki/pkitest"
)

// podCertificateKubelet is a test kubelet whose API has the node and the
// default service account (with UIDs), and names generated requests.
func podCertificateKubelet(t *testing.T) *testKubelet {
	t.Helper()
	tk := newTestKubelet(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tk.podCertificates.informer.run(ctx)
	var n atomic.Int32
	tk.client.PrependReactor("create", "podcertificaterequests", func(a clienttesting.Action) (bool, runtime.Object, error) {
		r := a.(clienttesting.CreateAction).GetObject().(*certificatesv1.PodCertificateRequest)
		if r.Name == "" {
			r.Name = fmt.Sprintf("%s%d", r.GenerateName, n.Add(1))
		}
		return false, nil, nil
	})
	if _, err := tk.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "default", UID: "uid-sa"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return tk
}

func podCertificatePod(name string, src corev1.PodCertificateProjection) *corev1.Pod {
	pod := testPod(name, "app")
	pod.Spec.ServiceAccountName = "default"
	pod.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(int32(0o644)), Sources: []corev1.VolumeProjection{{PodCertificate: &src}}}}}}
	return pod
}

// requests lists the requests in the fake API, oldest first.
func requests(t *testing.T, tk *testKubelet) []certificatesv1.PodCertificateRequest {
	t.Helper()
	l, err := tk.client.CertificatesV1().PodCertificateRequests("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// issue answers a request as a signer would: a certificate for the stub
// request's key from a throwaway CA, valid from now for lifetime.
func issue(t *testing.T, tk *testKubelet, r certificatesv1.PodCertificateRequest, now time.Time, lifetime time.Duration) string {
	t.Helper()
	stub, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil {
		t.Fatal(err)
	}
	chain := pkitest.IssuedPEM(t, r.Spec.PodName, stub.PublicKey, now, lifetime)
	r.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions:       []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.NewTime(now)}},
		CertificateChain: "text the pod never sees\n" + chain,
		NotBefore:        ptr.To(metav1.NewTime(now)), NotAfter: ptr.To(metav1.NewTime(now.Add(lifetime))),
		BeginRefreshAt: ptr.To(metav1.NewTime(now.Add(lifetime / 2))),
	}
	if _, err := tk.client.CertificatesV1().PodCertificateRequests("default").UpdateStatus(context.Background(), &r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return chain
}

// waitKick waits for the pod's worker to be woken by the informer.
func waitKick(t *testing.T, w *podWorker) {
	t.Helper()
	select {
	case <-w.kickCh:
	case <-time.After(10 * time.Second):
		t.Fatal("the request changed and the pod's worker was not woken")
	}
}

// untilVolume syncs the pod's volumes until ok accepts the result: the
// informer shows a request's new status some time after the worker's
// kick (which may also be an earlier event's).
func untilVolume(t *testing.T, tk *testKubelet, pod *corev1.Pod, ok func(error) bool) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := tk.prepareVolumes(context.Background(), pod)
		if ok(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func drainKicks(w *podWorker) {
	for {
		select {
		case <-w.kickCh:
		default:
			return
		}
	}
}

// The first sync makes a key and a request naming the pod, its service
// account and the node (with UIDs), whose stub PKCS#10 request is signed
// by that key; the volume waits (upstream's words) until the signer
// issues; then the bundle file is the key then the chain, and the key is
// the certificate's. At beginRefreshAt a new key is requested while the
// old files stay, and the new ones replace them once issued.
func TestPodCertificateIssueAndRefresh(t *testing.T) {
	tk := podCertificateKubelet(t)
	pod := podCertificatePod("web", corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ECDSAP256",
		CredentialBundlePath: "bundle.pem", KeyPath: "key.pem", CertificateChainPath: "chain.pem",
		MaxExpirationSeconds: ptr.To[int32](3600), UserAnnotations: map[string]string{"example.com/a": "b"}})
	tk.addPod(t, pod)
	w := tk.worker(t, pod)
	ctx := context.Background()

	err := tk.prepareVolumes(ctx, pod)
	if err == nil || err.Error() != `MountVolume.SetUp failed for volume "creds" : credential bundle is not issued yet` {
		t.Fatalf("before issuance: %v", err)
	}
	reqs := requests(t, tk)
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	s := r.Spec
	if s.SignerName != "example.com/s" || s.PodName != "web" || s.PodUID != pod.UID || s.ServiceAccountName != "default" || s.ServiceAccountUID != "uid-sa" ||
		s.NodeName != "node-1" || s.NodeUID != "uid-node-1" || *s.MaxExpirationSeconds != 3600 || s.UnverifiedUserAnnotations["example.com/a"] != "b" {
		t.Errorf("request spec %+v", s)
	}
	if len(r.OwnerReferences) != 1 || r.OwnerReferences[0].UID != pod.UID || r.OwnerReferences[0].Kind != "Pod" {
		t.Errorf("owner references %+v, want the pod", r.OwnerReferences)
	}
	stub, err := x509.ParseCertificateRequest(s.StubPKCS10Request)
	if err != nil || stub.CheckSignature() != nil {
		t.Fatalf("stub request does not prove the key: %v", err)
	}
	if pub, ok := stub.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("key %T, want ECDSA P-256", stub.PublicKey)
	}
	// Waiting again makes no second request.
	if err := tk.prepareVolumes(ctx, pod); err == nil {
		t.Fatal("mounted before issuance")
	}
	if n := len(requests(t, tk)); n != 1 {
		t.Fatalf("%d requests while waiting, want 1", n)
	}

	now := time.Now().Truncate(time.Second)
	drainKicks(w)
	chain := issue(t, tk, r, now, time.Hour)
	waitKick(t, w)
	if err := untilVolume(t, tk, pod, func(err error) bool { return err == nil }); err != nil {
		t.Fatal(err)
	}
	dir := tk.volumeDir(pod, "creds")
	read := func(name string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	key, gotChain, bundle := read("key.pem"), read("chain.pem"), read("bundle.pem")
	if gotChain != chain {
		t.Errorf("chain file %q, want only the certificate", gotChain)
	}
	if bundle != key+chain || !strings.HasPrefix(key, "-----BEGIN PRIVATE KEY-----") {
		t.Errorf("bundle %q, want the key then the chain", bundle)
	}
	block, _ := pem.Decode([]byte(key))
	priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !priv.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(stub.PublicKey) {
		t.Error("the key file is not the requested key")
	}
	if fi, _ := os.Stat(filepath.Join(dir, "key.pem")); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want the default mode 0644", fi.Mode().Perm())
	}

	// Past beginRefreshAt (half the lifetime, plus at most the jitter):
	// a second request, the old files kept meanwhile.
	tk.podCertificates.now = func() time.Time { return now.Add(30*time.Minute + podCertificateJitter + time.Second) }
	if err := tk.prepareVolumes(ctx, pod); err != nil {
		t.Fatal(err)
	}
	reqs = requests(t, tk)
	if len(reqs) != 2 {
		t.Fatalf("%d requests after beginRefreshAt, want 2", len(reqs))
	}
	if read("key.pem") != key {
		t.Error("the key changed before the refresh was issued")
	}
	refresh := reqs[0]
	if refresh.Name == r.Name {
		refresh = reqs[1]
	}
	drainKicks(w)
	newChain := issue(t, tk, refresh, now, time.Hour)
	waitKick(t, w)
	_ = untilVolume(t, tk, pod, func(error) bool { return read("chain.pem") == newChain })
	if read("chain.pem") != newChain || read("key.pem") == key {
		t.Error("the refreshed certificate and key were not written")
	}
}

// Denied is an event on the pod and final: the volume keeps failing with
// upstream's words, and no new request is made.
func TestPodCertificateDenied(t *testing.T) {
	tk := podCertificateKubelet(t)
	pod := podCertificatePod("web", corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "c.pem"})
	tk.addPod(t, pod)
	w := tk.worker(t, pod)
	ctx := context.Background()
	if err := tk.prepareVolumes(ctx, pod); err == nil {
		t.Fatal("mounted before issuance")
	}
	r := requests(t, tk)[0]
	if _, ok := mustStub(t, r).PublicKey.(ed25519.PublicKey); !ok {
		t.Error("ED25519 asked, another key made")
	}
	r.Status.Conditions = []metav1.Condition{{Type: "Denied", Status: metav1.ConditionTrue, Reason: "NotAllowed", Message: "no", LastTransitionTime: metav1.Now()}}
	drainKicks(w)
	if _, err := tk.client.CertificatesV1().PodCertificateRequests("default").UpdateStatus(ctx, &r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitKick(t, w)
	want := `PodCertificateRequest was permanently denied: reason="NotAllowed" message="no"`
	_ = untilVolume(t, tk, pod, func(err error) bool { return err != nil && strings.HasSuffix(err.Error(), want) })
	for range 2 {
		if err := tk.prepareVolumes(ctx, pod); err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Fatalf("after denial: %v, want %q", err, want)
		}
	}
	if n := len(requests(t, tk)); n != 1 {
		t.Errorf("%d requests after a denial, want 1", n)
	}
	found := false
	for len(tk.events.Events) > 0 && !found {
		e := <-tk.events.Events
		found = strings.HasPrefix(e, "Warning Denied NotAllowed") || strings.Contains(e, "was denied")
	}
	if !found {
		t.Error("no Denied event on the pod")
	}
}

func mustStub(t *testing.T, r certificatesv1.PodCertificateRequest) *x509.CertificateRequest {
	t.Helper()
	stub, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil {
		t.Fatal(err)
	}
	return stub
}

// Each key type pod validation admits makes a key of that type, proven by
// its stub request.
func TestNewPodCertificateKey(t *testing.T) {
	for keyType, want := range map[string]string{"ECDSAP256": "P-256", "ECDSAP384": "P-384", "ECDSAP521": "P-521", "ED25519": "ed25519", "RSA3072": "3072"} {
		_, der, err := newPodCertificateKey(keyType)
		if err != nil {
			t.Fatal(err)
		}
		req, err := x509.ParseCertificateRequest(der)
		if err != nil || req.CheckSignature() != nil {
			t.Fatalf("%s: stub request %v", keyType, err)
		}
		var got string
		switch pub := req.PublicKey.(type) {
		case *ecdsa.PublicKey:
			got = pub.Curve.Params().Name
		case ed25519.PublicKey:
			got = "ed25519"
		case *rsa.PublicKey:
			got = fmt.Sprint(pub.Size() * 8)
		}
		if got != want {
			t.Errorf("%s made %s", keyType, got)
		}
	}
	if _, _, err := newPodCertificateKey("DSA"); err == nil {
		t.Error("an unknown key type made a key")
	}
}
