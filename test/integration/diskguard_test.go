package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/apiserver"
)

// requireRoot fails, never skips: these tests mount filesystems.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root: it mounts a loop-device ext4 filesystem as the data dir")
	}
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// loopFS is an ext4 filesystem of sizeMiB on a loop device, mounted; it is
// unmounted and the device detached at cleanup (after the server, which is
// started later, has stopped). No blocks are reserved for root, so statfs's
// available space is all there is.
func loopFS(t *testing.T, sizeMiB int) string {
	t.Helper()
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	mustRun(t, "truncate", "-s", fmt.Sprintf("%dM", sizeMiB), img)
	mustRun(t, "mkfs.ext4", "-q", "-F", "-m", "0", img)
	dev := mustRun(t, "losetup", "--find", "--show", img)
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v\n%s", dev, err, out)
		}
	})
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "mount", dev, mnt)
	t.Cleanup(func() {
		var out []byte
		var err error
		for i := 0; i < 50; i++ { // the server's files may take a moment to close
			if out, err = exec.Command("umount", mnt).CombinedOutput(); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("umount %s: %v\n%s", mnt, err, out)
	})
	return mnt
}

func statfs(t *testing.T, path string) (avail, total uint64) {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		t.Fatal(err)
	}
	return fs.Bavail * uint64(fs.Bsize), fs.Blocks * uint64(fs.Bsize)
}

// startServerIn is startServer with the data dir at dataDir.
func startServerIn(t *testing.T, dataDir string, args ...string) *testServer {
	t.Helper()
	dir := t.TempDir()
	s := &testServer{t: t, dataDir: dataDir, kubeconfig: filepath.Join(dir, "kubeconfig"),
		cacheDir: filepath.Join(dir, "kubectl-cache"), extraArgs: args, port: "0"}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func want507(t *testing.T, what string, err error, dataDir string) {
	t.Helper()
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		t.Fatalf("%s: %v, want a Status error", what, err)
	}
	st := se.Status()
	if st.Code != http.StatusInsufficientStorage || st.Reason != "InsufficientStorage" ||
		!strings.Contains(st.Message, dataDir) || !strings.Contains(st.Message, "MiB free") {
		t.Fatalf("%s: %d %s %q, want 507 InsufficientStorage naming %s and its free space", what, st.Code, st.Reason, st.Message, dataDir)
	}
}

// A full disk refuses writes with 507 and leaves the server up: reads,
// watches, a node's heartbeats and deletes go on; once space is freed the
// writes are accepted again, without a restart, and every write that was
// acknowledged is there.
func TestFullDiskRefusesWritesAndRecovers(t *testing.T) {
	requireRoot(t)
	mnt := loopFS(t, 300)
	dataDir := filepath.Join(mnt, "data")
	s := startServerIn(t, dataDir) // the default --storage-min-free
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	cs := s.client()
	node, _ := s.nodeClient("n1")

	// A node registers and takes its Lease, as a kubelet does.
	if _, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	holder, d := "n1", int32(40)
	if _, err := node.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A kubelet on a disk under 10% free reports DiskPressure (the unit
	// tests of nodestatus hold that), and the node lifecycle controller
	// keeps new pods away with the disk-pressure taint.
	if err := setNodeConditions(ctx, node, "n1",
		corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
		corev1.NodeCondition{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasDiskPressure", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the disk-pressure taint", func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == corev1.TaintNodeDiskPressure && t.Effect == corev1.TaintEffectNoSchedule
		})
	})
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fill"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("fill"))
	cms := factory.Core().V1().ConfigMaps()
	informer := cms.Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer did not sync")
	}

	// Ballast leaves a little above the guard's threshold.
	minFree, err := apiserver.ParseMinFree(config.StorageMinFree)
	if err != nil {
		t.Fatal(err)
	}
	avail, total := statfs(t, mnt)
	threshold, reserve := minFree.Limits(total)
	const headroom = 4 << 20
	if avail < threshold+headroom {
		t.Fatalf("%d MiB free after start, want more than the threshold %d MiB + 4", avail>>20, threshold>>20)
	}
	ballast := filepath.Join(mnt, "ballast")
	f, err := os.Create(ballast)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(avail-threshold-headroom)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	time.Sleep(1500 * time.Millisecond) // the guard reads free space every second
	t.Logf("filesystem %d MiB, threshold %d MiB, reserve %d MiB; ballast leaves %d MiB free",
		total>>20, threshold>>20, reserve>>20, func() uint64 { a, _ := statfs(t, mnt); return a >> 20 }())

	// ConfigMaps of 100 KiB until they are refused, and stay refused: the
	// guard counts what it admits against its last reading, so its first
	// refusals may come just before the disk itself is below the
	// threshold, and the next reading lets a few more in.
	value := strings.Repeat("k", 100<<10)
	var acked []string
	var refusal error
	var refusedSince time.Time
	for i := 0; i < 2000; i++ {
		name := fmt.Sprintf("cm-%04d", i)
		_, err := cs.CoreV1().ConfigMaps("fill").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string]string{"v": value}}, metav1.CreateOptions{})
		if err == nil {
			acked = append(acked, name)
			refusedSince = time.Time{}
			continue
		}
		want507(t, fmt.Sprintf("create after %d accepted", len(acked)), err, dataDir)
		refusal = err
		if refusedSince.IsZero() {
			refusedSince = time.Now()
		}
		if time.Since(refusedSince) > 2500*time.Millisecond { // two readings or more
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if refusal == nil || time.Since(refusedSince) < 2500*time.Millisecond {
		t.Fatalf("ConfigMaps of 100 KiB were accepted until the end (%d accepted, last error %v) on a %d MiB filesystem", len(acked), refusal, total>>20)
	}
	free, _ := statfs(t, mnt)
	t.Logf("%d creates accepted, then: %v (%.1f MiB free)", len(acked), refusal, float64(free)/(1<<20))
	if len(acked) == 0 {
		t.Fatal("no create was accepted with room above the threshold")
	}
	if free < reserve {
		t.Fatalf("free space %d MiB fell below the reserve %d MiB", free>>20, reserve>>20)
	}

	// Reads work, through kubectl and the informer; kubectl shows the 507.
	if out := s.mustKubectl("get", "configmaps", "-n", "fill", "-o", "name"); !strings.Contains(out, "configmap/"+acked[0]) {
		t.Errorf("kubectl get configmaps: %s", out)
	}
	out, err := s.kubectl("create", "configmap", "refused", "-n", "fill", "--from-literal=a=b")
	if err == nil || !strings.Contains(out, "insufficient storage") || !strings.Contains(out, dataDir) {
		t.Errorf("kubectl create on a full disk: %v\n%s", err, out)
	}
	var cached int
	waitFor(t, "the informer has every accepted ConfigMap", func() bool {
		l, _ := cms.Lister().ConfigMaps("fill").List(labels.Everything())
		l = slices.DeleteFunc(l, func(cm *corev1.ConfigMap) bool { return cm.Name == "kube-root-ca.crt" })
		if len(l) != cached {
			cached = len(l)
			t.Logf("informer: %d of %d", cached, len(acked))
		}
		return len(l) == len(acked)
	})

	// The node's heartbeats go on.
	if err := setNodeConditions(ctx, node, "n1", corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}); err != nil {
		t.Errorf("node status update on a full disk: %v", err)
	}
	l, err := node.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if _, err := node.CoordinationV1().Leases("kube-node-lease").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Errorf("Lease renewal on a full disk: %v", err)
	}
	// A delete is accepted, and the watch delivers it.
	deleted := acked[len(acked)-1]
	acked = acked[:len(acked)-1]
	if err := cs.CoreV1().ConfigMaps("fill").Delete(ctx, deleted, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete on a full disk: %v", err)
	}
	waitFor(t, "the informer sees the delete", func() bool {
		_, err := cms.Lister().ConfigMaps("fill").Get(deleted)
		return apierrors.IsNotFound(err)
	})
	if s.cmd.ProcessState != nil {
		t.Fatalf("kelp server exited:\n%s", s.logs)
	}
	if body, code := s.raw("/readyz"); code != 200 {
		t.Fatalf("/readyz on a full disk: %d %s", code, body)
	}

	// A restart on the full disk comes up and serves reads, writes still
	// refused.
	s.restart()
	if _, err := cs.CoreV1().ConfigMaps("fill").Get(ctx, acked[0], metav1.GetOptions{}); err != nil {
		t.Fatalf("get after a restart on the full disk: %v", err)
	}
	_, err = cs.CoreV1().ConfigMaps("fill").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "refused-after-restart"}}, metav1.CreateOptions{})
	want507(t, "create after a restart on the full disk", err, dataDir)

	// Space is freed: creates succeed again, without a restart.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, "creates accepted again", func() bool {
		_, err := cs.CoreV1().ConfigMaps("fill").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"},
			Data: map[string]string{"v": value}}, metav1.CreateOptions{})
		return err == nil
	})
	t.Logf("writes accepted again %s after the ballast went", time.Since(start).Round(time.Millisecond))
	acked = append(acked, "after")
	list, err := cs.CoreV1().ConfigMaps("fill").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" { // the ServiceAccount controller's
			have[cm.Name] = cm.Data["v"] == value
		}
	}
	for _, name := range acked {
		if !have[name] {
			t.Errorf("acknowledged ConfigMap %s is missing or changed", name)
		}
	}
	if len(have) != len(acked) {
		t.Errorf("%d ConfigMaps listed, %d acknowledged", len(have), len(acked))
	}
	if !strings.Contains(s.logs.String(), "refusing writes (507)") || !strings.Contains(s.logs.String(), "writes are accepted") {
		t.Errorf("the server's log does not tell when writes were refused and accepted again:\n%s", s.logs)
	}
}

// On a filesystem too small for etcd's WAL, kelp server says so in one
// line and exits 1.
func TestTinyDiskIsOneLineError(t *testing.T) {
	requireRoot(t)
	mnt := loopFS(t, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kelpBin, "server", "--data-dir", filepath.Join(mnt, "data"), "--https-listen-port", "0",
		"--bind-address", "127.0.0.1", "--write-kubeconfig", filepath.Join(t.TempDir(), "kubeconfig"), "--disable-agent")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("kelp server on 64 MiB: %v, want exit code 1\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	text := string(out)
	if len(lines) != 1 || !strings.Contains(text, "MiB needed") || !strings.Contains(text, "MiB available") ||
		strings.Contains(text, "panic") || strings.Contains(text, "goroutine") {
		t.Fatalf("output is not one line naming the space needed and available:\n%s", out)
	}
	t.Logf("%s", out)
}

// setNodeConditions writes a node's conditions as a kubelet does, again
// on a conflict: the controllers write the Node too (its podCIDR, taints).
func setNodeConditions(ctx context.Context, cs kubernetes.Interface, name string, conds ...corev1.NodeCondition) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = conds
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}
