package runtime

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/namespaces"

	"github.com/kelp-project/kelp/runtime/containerlog"
)

// The container tests share one private containerd (started in TestMain
// when running as root) and one busybox image imported into it. The test
// binary doubles as the logging binary and the log daemon: the shim and
// New run it with their arguments, and TestMain hands those invocations
// to containerlog.Main.

const testImageRef = "docker.io/kelp/busybox-test:1"

var (
	testRT      *Runtime
	testSetup   error // why testRT is nil
	testCgRoot  string
	testDir     string
	testCtrd    *exec.Cmd
	testSockDir string
)

func TestMain(m *testing.M) {
	if containerlog.IsInvocation(os.Args[1:]) {
		if err := containerlog.Main(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		testSetup = fmt.Errorf("container tests need root (euid %d)", os.Geteuid())
	} else {
		testSetup = setupContainerd()
	}
	code := m.Run()
	teardown()
	os.Exit(code)
}

// needRuntime fails (never skips) a test that needs containerd.
func needRuntime(t *testing.T) *Runtime {
	t.Helper()
	if testRT == nil {
		t.Fatalf("no containerd for this test: %v", testSetup)
	}
	return testRT
}

func setupContainerd() error {
	var err error
	testDir, err = os.MkdirTemp("", "kelp-rt-")
	if err != nil {
		return err
	}
	tag := randomHex(4)
	testSockDir = "/run/kelp-rt-" + tag
	testCgRoot = "/kelp-test-" + tag
	if err := os.MkdirAll(testSockDir, 0o700); err != nil {
		return err
	}
	sock := filepath.Join(testSockDir, "c.sock")
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = %q
`, filepath.Join(testDir, "root"), filepath.Join(testDir, "state"), sock, sock+".ttrpc", filepath.Join(testSockDir, "debug.sock"))
	cfgPath := filepath.Join(testDir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(testDir, "containerd.log"))
	if err != nil {
		return err
	}
	testCtrd = exec.Command("/usr/bin/containerd", "--config", cfgPath)
	testCtrd.Stdout, testCtrd.Stderr = logf, logf
	if err := testCtrd.Start(); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("containerd did not start; see %s", logf.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
	rt, err := New(ctx, Options{
		Address:      sock,
		StateDir:     filepath.Join(testDir, "kelp"),
		CgroupRoot:   testCgRoot,
		LogRoot:      filepath.Join(testDir, "logs"),
		LoggerBinary: exe,
	})
	if err != nil {
		return err
	}
	if _, err := rt.Version(ctx); err != nil {
		return err
	}
	if err := importTestImage(ctx, rt); err != nil {
		return fmt.Errorf("import test image: %w", err)
	}
	testRT = rt
	return nil
}

// teardown removes every container, stops containerd (by PID), removes
// our cgroup tree, unmounts anything left under the temp dir and deletes it.
func teardown() {
	if testRT != nil {
		ctx := namespaces.WithNamespace(context.Background(), Namespace)
		if cs, err := testRT.client.Containers(ctx); err == nil {
			for _, c := range cs {
				_ = testRT.RemoveContainer(ctx, c.ID())
			}
		}
		_ = testRT.StopLogDaemon()
		_ = testRT.Close()
	}
	if testCtrd != nil && testCtrd.Process != nil {
		_ = testCtrd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = testCtrd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = testCtrd.Process.Kill()
			<-done
		}
	}
	if testCgRoot != "" {
		removeCgroupTree(testCgRoot)
	}
	if testDir != "" {
		unmountUnder(testDir)
		_ = os.RemoveAll(testDir)
	}
	if testSockDir != "" {
		_ = os.RemoveAll(testSockDir)
	}
}

// removeCgroupTree rmdirs root and everything below it, deepest first, in
// every v1 hierarchy.
func removeCgroupTree(root string) {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hier {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mps []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mps = append(mps, f[4])
		}
	}
	for i := len(mps) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mps[i], syscall.MNT_DETACH)
	}
}

// importTestImage builds an OCI archive holding the static busybox with
// applet symlinks, a passwd with root and nobody, and imports it.
func importTestImage(ctx context.Context, rt *Runtime) error {
	archive, err := buildTestArchive()
	if err != nil {
		return err
	}
	imgs, err := rt.client.Import(rt.ctx(ctx), bytes.NewReader(archive))
	if err != nil {
		return err
	}
	if len(imgs) == 0 {
		return fmt.Errorf("archive imported no image")
	}
	img := containerd.NewImage(rt.client, imgs[0])
	return img.Unpack(rt.ctx(ctx), snapshotter)
}

func buildTestArchive() ([]byte, error) {
	layer, diffID, err := buildTestLayer()
	if err != nil {
		return nil, err
	}
	config, _ := json.Marshal(map[string]any{
		"architecture": goarch(),
		"os":           "linux",
		"config":       map[string]any{"Env": []string{"PATH=/bin", "FOO=image", "BAR=image"}, "Cmd": []string{"sh"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	desc := func(mt string, b []byte) map[string]any {
		return map[string]any{"mediaType": mt, "digest": digestOf(b), "size": len(b)}
	}
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        desc("application/vnd.oci.image.config.v1+json", config),
		"layers":        []any{desc("application/vnd.oci.image.layer.v1.tar+gzip", layer)},
	})
	md := desc("application/vnd.oci.image.manifest.v1+json", manifest)
	md["annotations"] = map[string]string{"io.containerd.image.name": testImageRef}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{md}})

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(config), config},
		{blobPath(manifest), manifest},
		{blobPath(layer), layer},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), tw.Close()
}

var testApplets = []string{"sh", "sleep", "cat", "echo", "ls", "id", "hostname", "env", "wget", "head",
	"dd", "yes", "tr", "touch", "grep", "pwd", "true", "false", "mkdir", "rm", "wc", "seq", "printf", "test", "ps", "kill", "readlink"}

func buildTestLayer() (gz []byte, diffID string, err error) {
	bb, err := os.ReadFile("/usr/bin/busybox")
	if err != nil {
		return nil, "", err
	}
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	dir := func(name string, mode int64) {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode})
	}
	file := func(name string, mode int64, data []byte) {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))})
		_, _ = tw.Write(data)
	}
	for _, d := range []string{"bin/", "etc/", "proc/", "sys/", "dev/", "root/"} {
		dir(d, 0o755)
	}
	dir("tmp/", 0o1777)
	file("bin/busybox", 0o755, bb)
	for _, a := range testApplets {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777})
	}
	file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"))
	file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(raw.Bytes())
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return z.Bytes(), digestOf(raw.Bytes()), nil
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func blobPath(b []byte) string {
	return "blobs/sha256/" + strings.TrimPrefix(digestOf(b), "sha256:")
}

// testImage is the image as EnsureImage would describe it.
func testImage() Image {
	return Image{Ref: testImageRef, Cmd: []string{"sh"}, Env: []string{"PATH=/bin", "FOO=image", "BAR=image"}}
}

// newSpec is a container running cmd (via the image's Cmd rules: cmd is
// the pod's command) with its log under the test's temp dir. The
// container is removed when the test ends.
func newSpec(t *testing.T, rt *Runtime, cmd ...string) ContainerSpec {
	t.Helper()
	id := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-")) + "-" + randomHex(3)
	t.Cleanup(func() {
		if err := rt.RemoveContainer(context.Background(), id); err != nil {
			t.Errorf("cleanup %s: %v", id, err)
		}
	})
	return ContainerSpec{
		ID:           id,
		Labels:       map[string]string{"io.kubernetes.container.name": "c", "test": t.Name()},
		Image:        testImage(),
		Command:      cmd,
		CgroupParent: filepath.Join(rt.opts.CgroupRoot, "burstable", "pod-"+id),
		LogPath:      filepath.Join(rt.opts.LogRoot, "ns_pod_"+id, "c", "0.log"),
	}
}

// run creates and starts spec.
func run(t *testing.T, rt *Runtime, spec ContainerSpec) {
	t.Helper()
	ctx := context.Background()
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
}

// waitState polls until the container reaches want.
func waitState(t *testing.T, rt *Runtime, id string, want State, timeout time.Duration) ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := rt.ContainerStatus(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s: state %s after %s, want %s", id, st.State, timeout, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readLog waits for the logger to have written n lines and returns them.
func readLog(t *testing.T, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(b) > 0 && len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("log %s: want %d lines, have %q", path, n, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func goarch() string { return goruntime.GOARCH }
