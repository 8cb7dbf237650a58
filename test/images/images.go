// Package images builds the container images kelp's tests run, as OCI image
// layout archives that a node agent imports from its air-gap directory
// (<data-dir>/agent/images/*.tar). No registry is needed: busybox comes from
// the host's Debian busybox-static and the demo app is compiled from
// test/images/demo, the in-cluster API client from test/images/incluster.
//
// The archives are reproducible (fixed timestamps, sorted contents, a
// -trimpath build) and cached: Build only rebuilds when an input is newer
// than the archives.
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Image names (full references) the archives carry in io.containerd.image.name.
const (
	Busybox = "docker.io/library/busybox:1.35" // Debian busybox-static is 1.35
	Demo    = "docker.io/kelp/demo:v1"
	DemoV2  = "docker.io/kelp/demo:v2" // same binary, VERSION=v2 in its config Env, for rolling-update tests
	// InCluster runs test/images/incluster: client-go's InClusterConfig
	// listing the pods of its namespace (service-account token tests).
	InCluster = "docker.io/kelp/incluster:v1"
)

// Archive file names Build writes, in the order it returns them.
const (
	BusyboxArchive   = "busybox.tar"
	DemoArchive      = "demo-v1.tar"
	DemoV2Archive    = "demo-v2.tar"
	InClusterArchive = "incluster-v1.tar"
)

// BusyboxPath is where Build takes the static busybox binary from.
var BusyboxPath = "/usr/bin/busybox"

// OCI media types and annotations.
const (
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"

	AnnotationImageName = "io.containerd.image.name"
	AnnotationRefName   = "org.opencontainers.image.ref.name"
)

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// epoch is the timestamp of every file and of the image config, so the
// digests only change when the contents do.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Build writes busybox.tar, demo-v1.tar, demo-v2.tar and incluster-v1.tar
// (OCI image layout archives) into dir, creating it if needed, and returns
// their paths in that order. It compiles test/images/demo and
// test/images/incluster with the go toolchain (CGO_ENABLED=0)
// and takes busybox from /usr/bin/busybox, which must be static (Debian's
// busybox-static). When the archives exist and are newer than every input,
// nothing is rebuilt. Concurrent callers (parallel test binaries) are
// serialised with a lock file in dir.
func Build(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	paths := []string{
		filepath.Join(dir, BusyboxArchive),
		filepath.Join(dir, DemoArchive),
		filepath.Join(dir, DemoV2Archive),
		filepath.Join(dir, InClusterArchive),
	}
	if err := checkBusybox(BusyboxPath); err != nil {
		return nil, err
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	demoDir := filepath.Join(root, "test", "images", "demo")
	inClusterDir := filepath.Join(root, "test", "images", "incluster")

	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	newest, err := newestInput(demoDir, inClusterDir)
	if err != nil {
		return nil, err
	}
	if upToDate(paths, newest) {
		return paths, nil
	}

	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	demoBin, inClusterBin := filepath.Join(tmp, "demo"), filepath.Join(tmp, "incluster")
	if err := compile(root, "./test/images/demo", demoBin); err != nil {
		return nil, err
	}
	if err := compile(root, "./test/images/incluster", inClusterBin); err != nil {
		return nil, err
	}
	bbFiles, err := busyboxFiles(BusyboxPath)
	if err != nil {
		return nil, err
	}
	demoData, err := os.ReadFile(demoBin)
	if err != nil {
		return nil, err
	}
	demoFiles := append(append([]file(nil), bbFiles...), file{name: "demo", mode: 0o755, data: demoData})
	inClusterData, err := os.ReadFile(inClusterBin)
	if err != nil {
		return nil, err
	}
	inClusterFiles := append(append([]file(nil), bbFiles...), file{name: "incluster", mode: 0o755, data: inClusterData})

	demoConfig := func(version string) containerConfig {
		return containerConfig{
			ExposedPorts: map[string]struct{}{"8000/tcp": {}},
			Env:          []string{defaultPath, "VERSION=" + version},
			Entrypoint:   []string{"/demo"},
			WorkingDir:   "/",
			StopSignal:   "SIGTERM",
		}
	}
	images := []struct {
		ref    string
		files  []file
		config containerConfig
	}{
		{Busybox, bbFiles, containerConfig{Env: []string{defaultPath}, Cmd: []string{"sh"}, WorkingDir: "/"}},
		{Demo, demoFiles, demoConfig("v1")},
		{DemoV2, demoFiles, demoConfig("v2")},
		{InCluster, inClusterFiles, containerConfig{Env: []string{defaultPath}, Entrypoint: []string{"/incluster"}, WorkingDir: "/", StopSignal: "SIGTERM"}},
	}
	for i, img := range images {
		if err := writeArchive(paths[i], img.ref, img.files, img.config); err != nil {
			return nil, fmt.Errorf("building %s: %w", img.ref, err)
		}
	}
	return paths, nil
}

// checkBusybox makes sure path is a statically linked ELF binary.
func checkBusybox(path string) error {
	hint := "install Debian's static busybox: apt-get install busybox-static"
	f, err := elf.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("images: %s is missing; %s", path, hint)
		}
		return fmt.Errorf("images: %s is not a usable ELF binary (%v); %s", path, err, hint)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("images: %s is dynamically linked, it would not run in an image on its own; %s", path, hint)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("images: %s needs shared libraries %v; %s", path, libs, hint)
	}
	return nil
}

// moduleRoot finds the kelp module root: two directories above this source
// file when the source is there, else `go env GOMOD`.
func moduleRoot() (string, error) {
	if _, src, _, ok := runtime.Caller(0); ok {
		root := filepath.Dir(filepath.Dir(filepath.Dir(src)))
		if _, err := os.Stat(filepath.Join(root, "test", "images", "demo", "main.go")); err == nil {
			return root, nil
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("images: finding the module root with `go env GOMOD`: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("images: cannot find the kelp module root (run from inside the repository)")
	}
	return filepath.Dir(gomod), nil
}

// lockDir takes an exclusive flock on dir/.images.lock.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".images.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("images: locking %s: %w", f.Name(), err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// newestInput returns the latest modification time of the inputs: the
// busybox binary, the demo sources and this package's own sources.
func newestInput(progDirs ...string) (time.Time, error) {
	var newest time.Time
	consider := func(path string) error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		if fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
		return nil
	}
	if err := consider(BusyboxPath); err != nil {
		return newest, err
	}
	dirs := append(slices.Clone(progDirs), filepath.Dir(progDirs[0]))
	for _, d := range dirs {
		srcs, err := filepath.Glob(filepath.Join(d, "*.go"))
		if err != nil {
			return newest, err
		}
		for _, s := range srcs {
			if strings.HasSuffix(s, "_test.go") {
				continue
			}
			if err := consider(s); err != nil {
				return newest, err
			}
		}
	}
	return newest, nil
}

func upToDate(paths []string, newest time.Time) bool {
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil || !fi.ModTime().After(newest) {
			return false
		}
	}
	return true
}

// compile builds the static program pkg (relative to root) into out.
func compile(root, pkg, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w -buildid=", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("images: compiling %s: %v\n%s", pkg, err, output)
	}
	return nil
}

// file is one entry of a layer. Directories have names ending in "/",
// symlinks a non-empty link.
type file struct {
	name string
	mode int64
	link string
	data []byte
}

// busyboxFiles is the busybox root filesystem: the binary, a symlink in /bin
// for every applet it lists, users and groups, and the usual empty dirs.
func busyboxFiles(path string) ([]file, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("images: %s --list: %w", path, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	sort.Strings(applets)
	if len(applets) == 0 {
		return nil, fmt.Errorf("images: %s --list printed no applets", path)
	}

	files := []file{
		{name: "bin/", mode: 0o755},
		{name: "dev/", mode: 0o755},
		{name: "etc/", mode: 0o755},
		{name: "proc/", mode: 0o555},
		{name: "root/", mode: 0o700},
		{name: "sys/", mode: 0o555},
		{name: "tmp/", mode: 0o1777},
		{name: "var/", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnogroup:x:65534:\n")},
		{name: "bin/busybox", mode: 0o755, data: bin},
	}
	for _, a := range applets {
		files = append(files, file{name: "bin/" + a, mode: 0o777, link: "busybox"})
	}
	return files, nil
}

// layerTar renders files as an uncompressed tar.
func layerTar(files []file) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case strings.HasSuffix(f.name, "/"):
			h.Typeflag = tar.TypeDir
		case f.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *Platform         `json:"platform,omitempty"`
}

// Platform is the platform of an image manifest.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Index is the index.json of an OCI image layout.
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType,omitempty"`
	Manifests     []Descriptor `json:"manifests"`
}

// Manifest is an OCI image manifest.
type Manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

// Config is an OCI image configuration (the parts this package writes).
type Config struct {
	Created      string          `json:"created"`
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Config       containerConfig `json:"config"`
	RootFS       RootFS          `json:"rootfs"`
}

// RootFS lists the diff_ids (digests of the uncompressed layers).
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type containerConfig struct {
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	StopSignal   string              `json:"StopSignal,omitempty"`
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeArchive writes an OCI image layout archive for one single-layer image
// to path, atomically (temp file plus rename).
func writeArchive(path, ref string, files []file, cc containerConfig) error {
	layer, err := layerTar(files)
	if err != nil {
		return err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(layer); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}

	config, err := json.Marshal(Config{
		Created:      epoch.Format(time.RFC3339),
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config:       cc,
		RootFS:       RootFS{Type: "layers", DiffIDs: []string{digestOf(layer)}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeManifest,
		Config:        Descriptor{MediaType: MediaTypeConfig, Digest: digestOf(config), Size: int64(len(config))},
		Layers:        []Descriptor{{MediaType: MediaTypeLayer, Digest: digestOf(gz.Bytes()), Size: int64(gz.Len())}},
	})
	if err != nil {
		return err
	}
	tag := ref[strings.LastIndex(ref, ":")+1:]
	index, err := json.Marshal(Index{
		SchemaVersion: 2,
		MediaType:     "application/vnd.oci.image.index.v1+json",
		Manifests: []Descriptor{{
			MediaType:   MediaTypeManifest,
			Digest:      digestOf(manifest),
			Size:        int64(len(manifest)),
			Annotations: map[string]string{AnnotationImageName: ref, AnnotationRefName: tag},
			Platform:    &Platform{Architecture: runtime.GOARCH, OS: "linux"},
		}},
	})
	if err != nil {
		return err
	}

	entries := []file{
		{name: "oci-layout", mode: 0o644, data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{name: "index.json", mode: 0o644, data: index},
		{name: "blobs/", mode: 0o755},
		{name: "blobs/sha256/", mode: 0o755},
	}
	for _, blob := range [][]byte{manifest, config, gz.Bytes()} {
		entries = append(entries, file{
			name: "blobs/sha256/" + strings.TrimPrefix(digestOf(blob), "sha256:"),
			mode: 0o644, data: blob,
		})
	}
	archive, err := layerTar(entries)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, archive, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
