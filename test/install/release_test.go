package install

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// These tests are about how install.sh picks, fetches and verifies a
// release's binary (the layout scripts/release.sh writes to dist/:
// kelp-amd64, kelp-arm64, kelp-arm and sha256sum.txt). The "binaries"
// here are small stand-in shell scripts, one per architecture, each
// answering --version with its own architecture's name, so that no
// cross-build runs in CI: what is under test is which file the installer
// fetches, that it checks it against sha256sum.txt, and that it installs
// nothing when the check fails. The real binaries are checked by
// scripts/release-check.sh (under qemu) and test/integration's
// TestInstallScript.

var releaseArches = []string{"amd64", "arm64", "arm"}

// standIn is the stand-in binary of an architecture.
func standIn(arch string) string {
	return "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'kelp version v0.0.0-" + arch + "'; exit 0; fi\nexit 1\n"
}

// release is a release directory as scripts/release.sh writes it: the
// stand-ins and a sha256sum.txt over them (in sha256sum's format).
func release(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var sums strings.Builder
	for _, arch := range releaseArches {
		b := []byte(standIn(arch))
		if err := os.WriteFile(filepath.Join(dir, "kelp-"+arch), b, 0o755); err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		fmt.Fprintf(&sums, "%s  kelp-%s\n", hex.EncodeToString(h[:]), arch)
	}
	if err := os.WriteFile(filepath.Join(dir, "sha256sum.txt"), []byte(sums.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tamper changes one byte of a release's binary after its checksum was
// written, as a corrupted download or a swapped file on a mirror would.
func tamper(t *testing.T, dir, arch string) {
	t.Helper()
	p := filepath.Join(dir, "kelp-"+arch)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "v0.0.0", "v6.6.6", 1))
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// mirror serves a release directory over HTTP and records the paths asked for.
type mirror struct {
	*httptest.Server
	mu   sync.Mutex
	gets []string
}

func serve(t *testing.T, dir string) *mirror {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed: install.sh downloads with it (apt-get install curl; scripts/test.sh installs it)")
	}
	m := &mirror{}
	files := http.FileServer(http.Dir(dir))
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.gets = append(m.gets, r.URL.Path)
		m.mu.Unlock()
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *mirror) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := append([]string(nil), m.gets...)
	sort.Strings(r)
	return r
}

// machine makes a fake machine whose uname -m says arch (a stub uname
// first on PATH; every other uname call goes to the real one), and a
// TMPDIR of its own, to check that the installer leaves nothing there.
func machine(t *testing.T, unameM string) (*host, string) {
	h := newHost(t, "systemd")
	h.write(filepath.Join(h.stubs, "uname"), "#!/bin/sh\nif [ \"$1\" = -m ]; then echo "+unameM+"; exit 0; fi\nexec /bin/uname \"$@\"\n")
	tmp := t.TempDir()
	return h, tmp
}

// installRelease runs install.sh with no KELP_BINARY: what it installs
// comes from the given variables (INSTALL_KELP_RELEASE_URL, ...).
func (h *host) installRelease(tmp string, extra ...string) (string, error) {
	h.t.Helper()
	cmd := exec.Command("sh", script(h.t))
	cmd.Env = h.env(append([]string{"INSTALL_KELP_ROOT=" + h.root, "INSTALL_KELP_SKIP_DEPS=true", "TMPDIR=" + tmp}, extra...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// installed is the content of the kelp binary installed on the machine.
func (h *host) installed() string {
	h.t.Helper()
	return h.read("usr/local/bin/kelp")
}

// untouched checks that a refused install left the machine as it was:
// nothing under its root but what newHost made, no stub called, and
// nothing left in its TMPDIR.
func untouched(t *testing.T, h *host, tmp string) {
	t.Helper()
	var got []string
	filepath.Walk(h.root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			t.Error(err)
			return nil
		}
		rel, _ := filepath.Rel(h.root, p)
		got = append(got, rel)
		return nil
	})
	if want := []string{".", "run", "run/systemd", "run/systemd/system"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("a refused install wrote under the root: %q, want only %q", got, want)
	}
	wantCalls(t, h.takeCalls())
	emptyDir(t, tmp)
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) > 0 {
		t.Errorf("install.sh left %d files in TMPDIR (%s, ...)", len(ents), ents[0].Name())
	}
}

// The binary fetched is the one for the machine's architecture, as uname
// -m names it, and it is installed only after it matched sha256sum.txt.
func TestReleaseArch(t *testing.T) {
	rel := release(t)
	for _, c := range []struct{ uname, arch string }{
		{"x86_64", "amd64"},
		{"aarch64", "arm64"},
		{"arm64", "arm64"}, // as some BSD-flavoured unames say it
		{"armv7l", "arm"},  // a Raspberry Pi 2/3 on 32-bit Raspberry Pi OS
		{"armv8l", "arm"},  // a 32-bit kernel on an ARMv8 core
	} {
		t.Run(c.uname, func(t *testing.T) {
			m := serve(t, rel)
			h, tmp := machine(t, c.uname)
			out, err := h.installRelease(tmp, "INSTALL_KELP_RELEASE_URL="+m.URL+"/")
			if err != nil {
				t.Fatalf("install.sh: %v\n%s", err, out)
			}
			if got := h.installed(); got != standIn(c.arch) {
				t.Errorf("installed\n%s\nwant the %s binary", got, c.arch)
			}
			if got, want := m.requests(), []string{"/kelp-" + c.arch, "/sha256sum.txt"}; strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("fetched %q, want %q", got, want)
			}
			if !strings.Contains(out, "verified kelp-"+c.arch+" (sha256 ") {
				t.Errorf("output does not say the binary was verified:\n%s", out)
			}
			// The rest of the install went on as with a local binary.
			hasLines(t, "kelp.service", h.read("etc/systemd/system/kelp.service"), "Delegate=yes", "ExecStart="+h.path("usr/local/bin/kelp")+" server")
			wantCalls(t, h.takeCalls(), "systemctl daemon-reload", "systemctl enable kelp", "systemctl restart kelp")
			emptyDir(t, tmp)
		})
	}
}

// Machines no release binary runs on are refused before anything is
// fetched or written.
func TestReleaseArchRefused(t *testing.T) {
	rel := release(t)
	for _, c := range []struct{ uname, want string }{
		{"armv6l", "unsupported architecture armv6l: kelp's 32-bit arm build needs ARMv7"},
		{"i686", "unsupported architecture i686: kelp is built for x86_64 (amd64), aarch64 (arm64) and armv7l (arm)"},
		{"riscv64", "unsupported architecture riscv64"},
		{"mips", "unsupported architecture mips"},
	} {
		t.Run(c.uname, func(t *testing.T) {
			m := serve(t, rel)
			h, tmp := machine(t, c.uname)
			out, err := h.installRelease(tmp, "INSTALL_KELP_RELEASE_URL="+m.URL)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("got %v\n%s\nwant an error with %q", err, out, c.want)
			}
			if r := m.requests(); len(r) > 0 {
				t.Errorf("fetched %q on a machine it refuses", r)
			}
			untouched(t, h, tmp)
		})
	}
}

// A binary that does not match its checksum is refused, and nothing is
// installed: no binary, no unit, no scripts, no dependency, no service
// call (the download and check come before all of them).
func TestReleaseTampered(t *testing.T) {
	rel := release(t)
	tamper(t, rel, "arm64")
	m := serve(t, rel)
	h, tmp := machine(t, "aarch64")
	out, err := h.installRelease(tmp, "INSTALL_KELP_RELEASE_URL="+m.URL)
	if err == nil || !strings.Contains(out, "checksum mismatch for kelp-arm64") || !strings.Contains(out, "nothing was installed") {
		t.Errorf("got %v\n%s\nwant a checksum mismatch", err, out)
	}
	untouched(t, h, tmp)

	// Another architecture of the same release is intact and installs.
	h, tmp = machine(t, "x86_64")
	if out, err := h.installRelease(tmp, "INSTALL_KELP_RELEASE_URL="+m.URL); err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	if h.installed() != standIn("amd64") {
		t.Error("the amd64 binary was not installed")
	}

	// A reinstall over a running kelp keeps the installed binary when the
	// new one is refused.
	tamper(t, rel, "amd64")
	out, err = h.installRelease(tmp, "INSTALL_KELP_RELEASE_URL="+m.URL)
	if err == nil || !strings.Contains(out, "checksum mismatch for kelp-amd64") {
		t.Errorf("got %v\n%s\nwant a checksum mismatch", err, out)
	}
	if h.installed() != standIn("amd64") {
		t.Error("a refused reinstall replaced the installed binary")
	}
	emptyDir(t, tmp)
}

// Checksums that are missing, or that do not name the binary, refuse the
// install as a mismatch does.
func TestReleaseChecksumsMissing(t *testing.T) {
	for _, c := range []struct {
		name string
		sums *string // nil: no sha256sum.txt at all
		want string
	}{
		{"no sha256sum.txt", nil, "sha256sum.txt failed: nothing was installed"},
		{"no line for the binary", ptr(strings.Repeat("0", 64) + "  kelp-amd64\n"), "has no checksum for kelp-arm64: nothing was installed"},
		{"empty", ptr(""), "has no checksum for kelp-arm64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rel := release(t)
			p := filepath.Join(rel, "sha256sum.txt")
			if c.sums == nil {
				os.Remove(p)
			} else if err := os.WriteFile(p, []byte(*c.sums), 0o644); err != nil {
				t.Fatal(err)
			}
			m := serve(t, rel)
			h, tmp := machine(t, "aarch64")
			out, err := h.installRelease(tmp, "INSTALL_KELP_RELEASE_URL="+m.URL)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("got %v\n%s\nwant an error with %q", err, out, c.want)
			}
			untouched(t, h, tmp)
		})
	}
}

func ptr(s string) *string { return &s }

// A release copied to the machine (an air-gapped install) is a directory:
// the same choice and the same check, without a network.
func TestReleaseDirectory(t *testing.T) {
	rel := release(t)
	h, tmp := machine(t, "armv7l")
	if out, err := h.installRelease(tmp, "INSTALL_KELP_RELEASE_URL="+rel); err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	if h.installed() != standIn("arm") {
		t.Error("the arm binary was not installed")
	}

	tamper(t, rel, "arm")
	h, tmp = machine(t, "armv7l")
	out, err := h.installRelease(tmp, "INSTALL_KELP_RELEASE_URL="+rel)
	if err == nil || !strings.Contains(out, "checksum mismatch for kelp-arm:") {
		t.Errorf("got %v\n%s\nwant a checksum mismatch", err, out)
	}
	untouched(t, h, tmp)
}

// INSTALL_KELP_URL (one binary's URL, as before releases) is checked
// against the sha256sum.txt beside it, or INSTALL_KELP_SHA256_URL's.
func TestSingleBinaryURL(t *testing.T) {
	rel := release(t)
	m := serve(t, rel)
	h, tmp := machine(t, "x86_64")
	if out, err := h.installRelease(tmp, "INSTALL_KELP_URL="+m.URL+"/kelp-arm64"); err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	// No choice of architecture: the URL names the binary (here a stand-in
	// shell script, which runs anywhere).
	if h.installed() != standIn("arm64") {
		t.Error("the binary at INSTALL_KELP_URL was not installed")
	}
	if got, want := m.requests(), []string{"/kelp-arm64", "/sha256sum.txt"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("fetched %q, want %q", got, want)
	}

	// The checksums elsewhere: a file on the machine that does not match.
	bad := filepath.Join(t.TempDir(), "sums")
	if err := os.WriteFile(bad, []byte(strings.Repeat("ab", 32)+"  kelp-amd64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, tmp = machine(t, "x86_64")
	out, err := h.installRelease(tmp, "INSTALL_KELP_URL="+m.URL+"/kelp-amd64", "INSTALL_KELP_SHA256_URL="+bad)
	if err == nil || !strings.Contains(out, "checksum mismatch for kelp-amd64: its sha256 is ") || !strings.Contains(out, bad+" says "+strings.Repeat("ab", 32)) {
		t.Errorf("got %v\n%s\nwant a checksum mismatch against %s", err, out, bad)
	}
	untouched(t, h, tmp)
}

// Without a binary, a release or a URL the installer says what to set.
func TestNothingToInstall(t *testing.T) {
	h, tmp := machine(t, "x86_64")
	out, err := h.installRelease(tmp)
	if err == nil || !strings.Contains(out, "set INSTALL_KELP_RELEASE_URL") {
		t.Errorf("got %v\n%s", err, out)
	}
	untouched(t, h, tmp)
}
