package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readTar returns the regular files and symlinks (as "-> target") of a tar.
func readTar(t *testing.T, r io.Reader) (files map[string][]byte, links map[string]string) {
	t.Helper()
	files, links = map[string][]byte{}, map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, links
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch h.Typeflag {
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = b
		case tar.TypeSymlink:
			links[name] = h.Linkname
		case tar.TypeDir:
			files[name] = nil
		}
	}
}

// blob returns the blob a descriptor points at, checking digest and size.
func blob(t *testing.T, files map[string][]byte, d Descriptor, mediaType string) []byte {
	t.Helper()
	if d.MediaType != mediaType {
		t.Fatalf("descriptor media type %q, want %q", d.MediaType, mediaType)
	}
	b, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok {
		t.Fatalf("blob %s missing", d.Digest)
	}
	if got := digestOf(b); got != d.Digest {
		t.Fatalf("blob %s has digest %s", d.Digest, got)
	}
	if int64(len(b)) != d.Size {
		t.Fatalf("blob %s has size %d, descriptor says %d", d.Digest, len(b), d.Size)
	}
	return b
}

func checkArchive(t *testing.T, path, ref string, demo bool) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files, _ := readTar(t, f)

	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout = %q", got)
	}
	var index Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index has %d manifests", len(index.Manifests))
	}
	md := index.Manifests[0]
	if md.Annotations[AnnotationImageName] != ref {
		t.Fatalf("image name annotation = %q, want %q", md.Annotations[AnnotationImageName], ref)
	}
	if tag := ref[strings.LastIndex(ref, ":")+1:]; md.Annotations[AnnotationRefName] != tag {
		t.Fatalf("ref name annotation = %q, want %q", md.Annotations[AnnotationRefName], tag)
	}

	var m Manifest
	if err := json.Unmarshal(blob(t, files, md, MediaTypeManifest), &m); err != nil {
		t.Fatal(err)
	}
	if m.SchemaVersion != 2 || len(m.Layers) != 1 {
		t.Fatalf("manifest: schemaVersion %d, %d layers", m.SchemaVersion, len(m.Layers))
	}
	var c Config
	if err := json.Unmarshal(blob(t, files, m.Config, MediaTypeConfig), &c); err != nil {
		t.Fatal(err)
	}
	gz := blob(t, files, m.Layers[0], MediaTypeLayer)
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if c.RootFS.Type != "layers" || len(c.RootFS.DiffIDs) != 1 || c.RootFS.DiffIDs[0] != digestOf(layer) {
		t.Fatalf("rootfs %+v, want diff_id %s", c.RootFS, digestOf(layer))
	}
	if c.OS != "linux" || c.Architecture == "" {
		t.Fatalf("config os/arch = %s/%s", c.OS, c.Architecture)
	}
	if c.Config.Env[0] != defaultPath {
		t.Fatalf("Env = %v", c.Config.Env)
	}

	lf, links := readTar(t, bytes.NewReader(layer))
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(lf["bin/busybox"], bb) {
		t.Fatal("layer's /bin/busybox differs from " + BusyboxPath)
	}
	for _, applet := range []string{"sh", "wget", "sleep", "nc", "hostname", "httpd", "timeout"} {
		if target := links["bin/"+applet]; filepath.Base(target) != "busybox" {
			t.Fatalf("/bin/%s -> %q, want busybox", applet, target)
		}
	}
	if !strings.HasPrefix(string(lf["etc/passwd"]), "root:x:0:0:") {
		t.Fatalf("/etc/passwd = %q", lf["etc/passwd"])
	}
	if _, ok := lf["tmp/"]; !ok {
		t.Fatal("no /tmp")
	}

	if ref == InCluster {
		if len(lf["incluster"]) == 0 || strings.Join(c.Config.Entrypoint, " ") != "/incluster" {
			t.Fatalf("incluster image: %d bytes of /incluster, config %+v", len(lf["incluster"]), c.Config)
		}
		return
	}
	if !demo {
		if strings.Join(c.Config.Cmd, " ") != "sh" {
			t.Fatalf("busybox Cmd = %v", c.Config.Cmd)
		}
		return
	}
	if len(lf["demo"]) == 0 {
		t.Fatal("no /demo in the demo layer")
	}
	if strings.Join(c.Config.Entrypoint, " ") != "/demo" || c.Config.StopSignal != "SIGTERM" {
		t.Fatalf("demo config %+v", c.Config)
	}
	if _, ok := c.Config.ExposedPorts["8000/tcp"]; !ok {
		t.Fatalf("demo ExposedPorts %v", c.Config.ExposedPorts)
	}
	version := "v1"
	if ref == DemoV2 {
		version = "v2"
	}
	if c.Config.Env[len(c.Config.Env)-1] != "VERSION="+version {
		t.Fatalf("demo Env = %v, want VERSION=%s", c.Config.Env, version)
	}
}

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	paths, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	refs := []string{Busybox, Demo, DemoV2, InCluster}
	if len(paths) != len(refs) {
		t.Fatalf("Build returned %v", paths)
	}
	for i, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) { checkArchive(t, p, refs[i], refs[i] == Demo || refs[i] == DemoV2) })
	}

	// A second Build is served from the cache.
	before := make([]time.Time, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		before[i] = fi.ModTime()
	}
	again, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range again {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(before[i]) {
			t.Fatalf("%s was rebuilt", p)
		}
	}

	// Rebuilding from scratch gives the same bytes (reproducible digests).
	other := t.TempDir()
	paths2, err := Build(other)
	if err != nil {
		t.Fatal(err)
	}
	for i := range paths {
		a, _ := os.ReadFile(paths[i])
		b, _ := os.ReadFile(paths2[i])
		if !bytes.Equal(a, b) {
			t.Fatalf("%s is not reproducible", filepath.Base(paths[i]))
		}
	}
}

func TestCheckBusyboxMissing(t *testing.T) {
	err := checkBusybox(filepath.Join(t.TempDir(), "nope"))
	if err == nil || !strings.Contains(err.Error(), "apt-get install busybox-static") {
		t.Fatalf("err = %v", err)
	}
	// A dynamically linked binary is refused too, if one is at hand.
	for _, dyn := range []string{"/bin/ls", "/usr/bin/env"} {
		if _, err := os.Stat(dyn); err == nil {
			if err := checkBusybox(dyn); err == nil || !strings.Contains(err.Error(), "busybox-static") {
				t.Fatalf("checkBusybox(%s) = %v", dyn, err)
			}
			break
		}
	}
}
