package kubelet

import (
	"context"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/pki/pkitest"
)

func bundle(name, signer, pemData string, labels map[string]string) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: pemData}}
}

// trustBundleKubelet is a test kubelet whose fake API holds bundles, the
// informer stopped with the test.
func trustBundleKubelet(t *testing.T, bundles ...*certificatesv1.ClusterTrustBundle) *testKubelet {
	t.Helper()
	tk := newTestKubelet(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tk.trustBundles.informer.run(ctx)
	for _, b := range bundles {
		if _, err := tk.client.CertificatesV1().ClusterTrustBundles().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return tk
}

// blocks splits a PEM file into its blocks, as text.
func blocks(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	for {
		b, rest := pem.Decode(data)
		if b == nil {
			if len(strings.TrimSpace(string(rest))) != 0 {
				t.Fatalf("trailing bytes after the PEM blocks: %q", rest)
			}
			return out
		}
		out = append(out, string(pem.EncodeToMemory(b)))
		data = rest
	}
}

// A projection by name is that bundle's anchors; by signer, the distinct
// anchors of the signer's bundles the selector picks (nil none, empty
// all), never another signer's; a miss is an error unless optional, when
// the file is empty.
func TestTrustBundleLookups(t *testing.T) {
	a, b, c, other := pkitest.SelfSignedPEM(t, "a", true), pkitest.SelfSignedPEM(t, "b", true), pkitest.SelfSignedPEM(t, "c", true), pkitest.SelfSignedPEM(t, "other", true)
	tk := trustBundleKubelet(t,
		bundle("plain", "", a+b, nil),
		bundle("example.com:one:live", "example.com/one", a+c, map[string]string{"alive": "true"}),
		bundle("example.com:one:dead", "example.com/one", b, map[string]string{"alive": "false"}),
		bundle("example.com:two:live", "example.com/two", other, map[string]string{"alive": "true"}))
	ctx := context.Background()
	got := func(data []byte, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := blocks(t, data)
		slices.Sort(out)
		return out
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }

	if g := got(tk.trustBundles.byName(ctx, "plain", false)); !slices.Equal(g, sorted(a, b)) {
		t.Errorf("by name: %d blocks, want a and b", len(g))
	}
	if data, err := tk.trustBundles.byName(ctx, "missing", true); err != nil || len(data) != 0 {
		t.Errorf("optional missing bundle: %q, %v; want an empty file", data, err)
	}
	if _, err := tk.trustBundles.byName(ctx, "missing", false); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing bundle: %v, want not found", err)
	}
	live := &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "true"}}
	if g := got(tk.trustBundles.bySigner(ctx, "example.com/one", live, false)); !slices.Equal(g, sorted(a, c)) {
		t.Errorf("signer one, alive: %d blocks, want a and c", len(g))
	}
	// Empty selects all: a, c and b, each once although a is in two
	// bundles of the cluster.
	if g := got(tk.trustBundles.bySigner(ctx, "example.com/one", &metav1.LabelSelector{}, false)); !slices.Equal(g, sorted(a, b, c)) {
		t.Errorf("signer one, all: %d blocks, want a, b, c", len(g))
	}
	if _, err := tk.trustBundles.bySigner(ctx, "example.com/one", nil, false); err == nil ||
		err.Error() != "combination of signerName and labelSelector matched zero ClusterTrustBundles" {
		t.Errorf("nil selector: %v, want upstream's zero-match error", err)
	}
	if data, err := tk.trustBundles.bySigner(ctx, "example.com/one", nil, true); err != nil || len(data) != 0 {
		t.Errorf("nil selector, optional: %q, %v; want an empty file", data, err)
	}
	if data, err := tk.trustBundles.bySigner(ctx, "example.com/three", &metav1.LabelSelector{}, true); err != nil || len(data) != 0 {
		t.Errorf("unknown signer, optional: %q, %v; want an empty file", data, err)
	}
}

// The anchors' order is a shuffle that stays put for the kubelet's life:
// the same set gives the same bytes whatever the bundles' order, so the
// file is not rewritten at every sync.
func TestTrustBundleOrderIsStable(t *testing.T) {
	tk := newTestKubelet(t)
	var pems []string
	for _, cn := range []string{"a", "b", "c", "d", "e", "f"} {
		pems = append(pems, pkitest.SelfSignedPEM(t, cn, true))
	}
	first := tk.trustBundles.anchors([]*certificatesv1.ClusterTrustBundle{bundle("x", "", strings.Join(pems, ""), nil)})
	slices.Reverse(pems)
	second := tk.trustBundles.anchors([]*certificatesv1.ClusterTrustBundle{
		bundle("y", "", strings.Join(pems[:3], ""), nil), bundle("z", "", strings.Join(pems[2:], ""), nil)})
	if string(first) != string(second) {
		t.Error("the same anchors came out in another order")
	}
	if n := len(blocks(t, first)); n != 6 {
		t.Errorf("%d blocks, want 6", n)
	}
}

func trustBundlePod(src corev1.ClusterTrustBundleProjection) *corev1.Pod {
	pod := testPod("ctb", "app")
	pod.Spec.Volumes = []corev1.Volume{{Name: "anchors", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(int32(0o644)), Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &src}}}}}}
	return pod
}

// The projection's file is written 0644 (the defaultMode) into the pod's
// volume, and follows the bundle: a change wakes the pods that project
// bundles, and their next sync rewrites the file.
func TestTrustBundleVolumeFollowsTheBundle(t *testing.T) {
	first, second := pkitest.SelfSignedPEM(t, "first", true), pkitest.SelfSignedPEM(t, "second", true)
	tk := trustBundleKubelet(t, bundle("anchors", "", first, nil))
	pod := trustBundlePod(corev1.ClusterTrustBundleProjection{Name: ptr.To("anchors"), Path: "ca.pem"})
	tk.addPod(t, pod)
	w := tk.worker(t, pod)
	if err := tk.prepareVolumes(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(tk.volumeDir(pod, "anchors"), "ca.pem")
	read := func() string {
		t.Helper()
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if got := read(); got != first {
		t.Fatalf("file %q, want the bundle's certificate", got)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	// Drain the wake-ups of the informer's first list.
	select {
	case <-w.kickCh:
	default:
	}
	b, _ := tk.client.CertificatesV1().ClusterTrustBundles().Get(context.Background(), "anchors", metav1.GetOptions{})
	b.Spec.TrustBundle = second
	if _, err := tk.client.CertificatesV1().ClusterTrustBundles().Update(context.Background(), b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.kickCh:
	case <-time.After(10 * time.Second):
		t.Fatal("the bundle changed and the pod's worker was not woken")
	}
	if err := tk.prepareVolumes(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != second {
		t.Errorf("after the update the file is %q, want the new certificate", got)
	}
}

// A non-optional projection of a missing bundle fails the volume with
// upstream's words, so the pod does not start and its FailedMount Event
// says why.
func TestMissingTrustBundleFailsTheVolume(t *testing.T) {
	tk := trustBundleKubelet(t)
	pod := trustBundlePod(corev1.ClusterTrustBundleProjection{Name: ptr.To("does-not-exist"), Path: "ca.pem", Optional: ptr.To(false)})
	err := tk.prepareVolumes(context.Background(), pod)
	if err == nil {
		t.Fatal("a missing non-optional bundle mounted")
	}
	want := `MountVolume.SetUp failed for volume "anchors" : while getting ClusterTrustBundle: `
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("error %q, want %q... not found", err, want)
	}
}

// With an fsGroup the file is 0600 before the group is given read: 0640.
func TestTrustBundleFileWithFSGroup(t *testing.T) {
	tk := trustBundleKubelet(t, bundle("anchors", "", pkitest.SelfSignedPEM(t, "a", true), nil))
	pod := trustBundlePod(corev1.ClusterTrustBundleProjection{Name: ptr.To("anchors"), Path: "ca.pem"})
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
	if err := tk.prepareVolumes(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(tk.volumeDir(pod, "anchors"), "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
}
