package runtime

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	kcontainerd "github.com/kelp-project/kelp/embedded/containerd"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
)

// imgTestArchive describes a tiny OCI archive built by the test.
type imgTestArchive struct {
	name       string // io.containerd.image.name annotation; "" for none
	entrypoint []string
	cmd        []string
	env        []string
	file       string // content of /hello.txt in the one layer
}

// imgTestTar writes path as an OCI image layout tar (oci-layout,
// index.json, blobs/sha256/...) with one gzip layer.
func imgTestTar(t *testing.T, path string, a imgTestArchive, gz bool) {
	t.Helper()
	blobs := map[digest.Digest][]byte{}
	add := func(b []byte) ocispec.Descriptor {
		d := digest.FromBytes(b)
		blobs[d] = b
		return ocispec.Descriptor{Digest: d, Size: int64(len(b))}
	}
	mustJSON := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// The layer: one small file.
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	content := []byte(a.file)
	if err := tw.WriteHeader(&tar.Header{Name: "hello.txt", Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	tw.Write(content)
	tw.Close()
	diffID := digest.FromBytes(layer.Bytes())
	var zl bytes.Buffer
	zw := gzip.NewWriter(&zl)
	zw.Write(layer.Bytes())
	zw.Close()
	layerDesc := add(zl.Bytes())
	layerDesc.MediaType = ocispec.MediaTypeImageLayerGzip

	cfg := ocispec.Image{
		Platform: ocispec.Platform{Architecture: goruntime.GOARCH, OS: "linux"},
		Config: ocispec.ImageConfig{
			Entrypoint: a.entrypoint,
			Cmd:        a.cmd,
			Env:        a.env,
			WorkingDir: "/",
			StopSignal: "SIGQUIT",
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
	}
	cfgDesc := add(mustJSON(cfg))
	cfgDesc.MediaType = ocispec.MediaTypeImageConfig

	manifest := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfgDesc,
		Layers:    []ocispec.Descriptor{layerDesc},
	}
	mDesc := add(mustJSON(manifest))
	mDesc.MediaType = ocispec.MediaTypeImageManifest
	mDesc.Platform = &ocispec.Platform{Architecture: goruntime.GOARCH, OS: "linux"}
	if a.name != "" {
		mDesc.Annotations = map[string]string{"io.containerd.image.name": a.name}
	}
	index := ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{mDesc},
	}

	var out bytes.Buffer
	var w *tar.Writer
	var zout *gzip.Writer
	if gz {
		zout = gzip.NewWriter(&out)
		w = tar.NewWriter(zout)
	} else {
		w = tar.NewWriter(&out)
	}
	put := func(name string, b []byte) {
		if err := w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	put("index.json", mustJSON(index))
	for d, b := range blobs {
		put("blobs/sha256/"+d.Encoded(), b)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if zout != nil {
		zout.Close()
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// imgTestRuntime starts a private containerd with the supervisor and
// connects a Runtime to it; both are torn down at the end of the test.
func imgTestRuntime(t *testing.T) *Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root: it starts a private containerd (run `go test` as root)")
	}
	if _, err := os.Stat("/usr/bin/containerd"); err != nil {
		t.Fatal("this test needs containerd at /usr/bin/containerd (apt-get install containerd)")
	}
	b := make([]byte, 4)
	rand.Read(b)
	runDir := "/run/kelp-test-" + hex.EncodeToString(b)
	t.Cleanup(func() { os.RemoveAll(runDir) })
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	sup, err := kcontainerd.Start(ctx, kcontainerd.Config{
		Dir:     filepath.Join(dir, "agent"),
		Address: filepath.Join(runDir, "containerd.sock"),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := sup.Stop(); err != nil {
			t.Errorf("stopping containerd: %v", err)
		}
	})
	r, err := New(context.Background(), Options{
		Address:      sup.Address(),
		StateDir:     filepath.Join(runDir, "runtime"),
		LogRoot:      filepath.Join(dir, "logs"),
		LoggerBinary: "/bin/true",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestNormalizeRefImage(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                     "docker.io/library/busybox:latest",
		"busybox:1.36":                "docker.io/library/busybox:1.36",
		"foo/bar:1":                   "docker.io/foo/bar:1",
		"registry.example:5000/a/b":   "registry.example:5000/a/b:latest",
		"docker.io/library/nginx:1.2": "docker.io/library/nginx:1.2",
		"busybox@sha256:" + sha("x"):  "docker.io/library/busybox@sha256:" + sha("x"),
	} {
		got, err := NormalizeRef(in)
		if err != nil || got != want {
			t.Errorf("NormalizeRef(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := NormalizeRef("UPPERCASE"); err == nil {
		t.Error("NormalizeRef accepted an invalid reference")
	}
	for in, want := range map[string]corev1.PullPolicy{
		"busybox":                    corev1.PullAlways,
		"busybox:latest":             corev1.PullAlways,
		"busybox:1.36":               corev1.PullIfNotPresent,
		"busybox@sha256:" + sha("x"): corev1.PullIfNotPresent,
	} {
		if got := defaultPullPolicy(in); got != want {
			t.Errorf("defaultPullPolicy(%q) = %s, want %s", in, got, want)
		}
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestImageImportAndEnsure(t *testing.T) {
	r := imgTestRuntime(t)
	ctx := context.Background()
	dir := t.TempDir()

	app := imgTestArchive{
		name:       "docker.io/kelp-test/app:1",
		entrypoint: []string{"/bin/app"},
		cmd:        []string{"--port", "8080"},
		env:        []string{"PATH=/bin", "GREETING=hi"},
		file:       "hello\n",
	}
	appTar := filepath.Join(dir, "app.tar")
	imgTestTar(t, appTar, app, false)

	start := time.Now()
	names, err := r.ImportArchive(ctx, appTar)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("import took %s", time.Since(start))
	if !slices.Equal(names, []string{"docker.io/kelp-test/app:1"}) {
		t.Fatalf("imported %v", names)
	}

	// Unpacked for overlayfs.
	ci, err := r.client.GetImage(r.ctx(ctx), names[0])
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := ci.IsUnpacked(r.ctx(ctx), Snapshotter); err != nil || !ok {
		t.Fatalf("image not unpacked for %s: %v", Snapshotter, err)
	}

	// IfNotPresent on a present image: no pull, fields from the config.
	img, err := r.EnsureImage(ctx, "kelp-test/app:1", corev1.PullIfNotPresent)
	if err != nil {
		t.Fatal(err)
	}
	cfgDesc, _ := ci.Config(r.ctx(ctx))
	want := Image{
		Ref: "docker.io/kelp-test/app:1", ID: cfgDesc.Digest.String(),
		Entrypoint: app.entrypoint, Cmd: app.cmd, Env: app.env,
		WorkingDir: "/", StopSignal: "SIGQUIT",
	}
	if !imgEqual(img, want) {
		t.Fatalf("EnsureImage = %+v\nwant %+v", img, want)
	}
	// Never on a present image works too; the default policy for a
	// non-latest tag is IfNotPresent.
	for _, p := range []corev1.PullPolicy{corev1.PullNever, ""} {
		if img, err := r.EnsureImage(ctx, "kelp-test/app:1", p); err != nil || img.ID != want.ID {
			t.Fatalf("EnsureImage(%q) = %+v, %v", p, img, err)
		}
	}

	// Always: the pull fails (no registry) and the local image is used.
	start = time.Now()
	img, err = r.EnsureImage(ctx, "kelp-test/app:1", corev1.PullAlways)
	if err != nil || img.ID != want.ID {
		t.Fatalf("EnsureImage(Always) on a local image = %+v, %v", img, err)
	}
	t.Logf("Always with local fallback took %s", time.Since(start))

	// Never on a missing image.
	_, err = r.EnsureImage(ctx, "kelp-test/missing:1", corev1.PullNever)
	var pe *PullError
	if !errors.As(err, &pe) || pe.Reason != "ErrImageNeverPull" {
		t.Fatalf("Never on a missing image: %v", err)
	}
	if pe.Message != `Container image "kelp-test/missing:1" is not present with pull policy of Never` {
		t.Errorf("message %q", pe.Message)
	}

	// IfNotPresent on a missing image: the pull fails promptly.
	start = time.Now()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = r.EnsureImage(pctx, "kelp-test/missing:1", corev1.PullIfNotPresent)
	cancel()
	took := time.Since(start)
	if !errors.As(err, &pe) || pe.Reason != "ErrImagePull" {
		t.Fatalf("IfNotPresent on a missing image: %v", err)
	}
	t.Logf("failed pull took %s: %s", took, pe.Message)
	if took > 10*time.Second {
		t.Errorf("failed pull took %s", took)
	}
	if want := `failed to pull and unpack image "docker.io/kelp-test/missing:1": `; len(pe.Message) < len(want) || pe.Message[:len(want)] != want {
		t.Errorf("message %q", pe.Message)
	}

	// An invalid name.
	if _, err := r.EnsureImage(ctx, "Not/Valid", ""); !errors.As(err, &pe) || pe.Reason != "InvalidImageName" {
		t.Fatalf("invalid name: %v", err)
	}

	// An archive without a name is an error.
	unnamed := filepath.Join(dir, "unnamed.tar")
	imgTestTar(t, unnamed, imgTestArchive{cmd: []string{"x"}, file: "unnamed\n"}, false)
	if names, err := r.ImportArchive(ctx, unnamed); err == nil {
		t.Fatalf("importing an unnamed archive gave %v and no error", names)
	}

	// A short name in the annotation is recorded under the normalised name.
	short := filepath.Join(dir, "short.tar")
	imgTestTar(t, short, imgTestArchive{name: "kelp-short:2", cmd: []string{"sh"}, file: "short\n"}, false)
	names, err = r.ImportArchive(ctx, short)
	if err != nil || !slices.Equal(names, []string{"docker.io/library/kelp-short:2"}) {
		t.Fatalf("short name import: %v, %v", names, err)
	}
	if _, err := r.EnsureImage(ctx, "kelp-short:2", corev1.PullNever); err != nil {
		t.Fatal(err)
	}
}

func imgEqual(a, b Image) bool {
	return a.Ref == b.Ref && a.ID == b.ID && slices.Equal(a.Entrypoint, b.Entrypoint) &&
		slices.Equal(a.Cmd, b.Cmd) && slices.Equal(a.Env, b.Env) && a.WorkingDir == b.WorkingDir &&
		a.User == b.User && a.StopSignal == b.StopSignal
}

func TestImageImportDir(t *testing.T) {
	r := imgTestRuntime(t)
	ctx := context.Background()
	dir := t.TempDir()
	imgTestTar(t, filepath.Join(dir, "a.tar"), imgTestArchive{name: "docker.io/kelp-test/a:1", cmd: []string{"a"}, file: "a\n"}, false)
	imgTestTar(t, filepath.Join(dir, "b.tar.gz"), imgTestArchive{name: "docker.io/kelp-test/b:1", cmd: []string{"b"}, file: "b\n"}, true)
	imgTestTar(t, filepath.Join(dir, "unnamed.tar"), imgTestArchive{cmd: []string{"u"}, file: "u\n"}, false)
	os.WriteFile(filepath.Join(dir, "README.txt"), []byte("not an image"), 0o644)
	os.WriteFile(filepath.Join(dir, "broken.tar"), []byte("not a tar"), 0o644)

	if err := r.ImportDir(ctx, dir); err != nil {
		t.Fatal(err)
	}
	is := r.client.ImageService()
	updated := map[string]time.Time{}
	for _, n := range []string{"docker.io/kelp-test/a:1", "docker.io/kelp-test/b:1"} {
		img, err := is.Get(r.ctx(ctx), n)
		if err != nil {
			t.Fatalf("%s not imported: %v", n, err)
		}
		updated[n] = img.UpdatedAt
	}

	// Second pass: nothing changed, nothing imported.
	if err := r.ImportDir(ctx, dir); err != nil {
		t.Fatal(err)
	}
	for n, at := range updated {
		img, err := is.Get(r.ctx(ctx), n)
		if err != nil {
			t.Fatal(err)
		}
		if !img.UpdatedAt.Equal(at) {
			t.Errorf("%s imported again although its archive did not change", n)
		}
	}

	// A new archive appears: the watcher (inotify) picks it up.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { r.WatchImageDir(wctx, dir); close(done) }()
	imgTestTar(t, filepath.Join(dir, "c.tgz"), imgTestArchive{name: "docker.io/kelp-test/c:1", cmd: []string{"c"}, file: "c\n"}, true)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := is.Get(r.ctx(ctx), "docker.io/kelp-test/c:1"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not import c.tgz")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	// A missing directory is not an error.
	if err := r.ImportDir(ctx, filepath.Join(dir, "nope")); err != nil {
		t.Fatal(err)
	}
}

// imgTestDockerTar writes a docker-save style archive (manifest.json with
// RepoTags, the config, one uncompressed layer).
func imgTestDockerTar(t *testing.T, path, repoTag string) {
	t.Helper()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	lw.WriteHeader(&tar.Header{Name: "docker.txt", Mode: 0o644, Size: 3, Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)})
	lw.Write([]byte("hi\n"))
	lw.Close()
	cfg, _ := json.Marshal(ocispec.Image{
		Platform: ocispec.Platform{Architecture: goruntime.GOARCH, OS: "linux"},
		Config:   ocispec.ImageConfig{Cmd: []string{"docker-cmd"}},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(layer.Bytes())}},
	})
	cfgName := digest.FromBytes(cfg).Encoded() + ".json"
	manifest, _ := json.Marshal([]map[string]any{{
		"Config": cfgName, "RepoTags": []string{repoTag}, "Layers": []string{"l1/layer.tar"},
	}})
	var out bytes.Buffer
	w := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		b    []byte
	}{{"manifest.json", manifest}, {cfgName, cfg}, {"l1/layer.tar", layer.Bytes()}} {
		w.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.b)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)})
		w.Write(f.b)
	}
	w.Close()
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestImageImportDockerSave(t *testing.T) {
	r := imgTestRuntime(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "docker.tar")
	imgTestDockerTar(t, path, "kelp-docker:3")
	names, err := r.ImportArchive(ctx, path)
	if err != nil || !slices.Equal(names, []string{"docker.io/library/kelp-docker:3"}) {
		t.Fatalf("docker-save import: %v, %v", names, err)
	}
	img, err := r.EnsureImage(ctx, "kelp-docker:3", corev1.PullNever)
	if err != nil || !slices.Equal(img.Cmd, []string{"docker-cmd"}) {
		t.Fatalf("EnsureImage = %+v, %v", img, err)
	}
}
