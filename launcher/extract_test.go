package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// withPayload makes core the embedded payload for one test.
func withPayload(t *testing.T, core []byte) string {
	t.Helper()
	enc, _ := zstd.NewWriter(nil)
	h := sha256.Sum256(core)
	sum := hex.EncodeToString(h[:])
	oldP, oldS := payload, payloadSum
	payload, payloadSum = enc.EncodeAll(core, nil), fmt.Sprintf("%s %d\n", sum, len(core))
	t.Cleanup(func() { payload, payloadSum = oldP, oldS })
	return sum
}

func TestCorePathExtractsOnceAndVerifies(t *testing.T) {
	root := t.TempDir()
	t.Setenv(extractDirEnv, root)
	core := []byte("#!/bin/sh\necho core\n")
	sum := withPayload(t, core)
	p, err := corePath()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, sum[:16], "kelp"); p != want {
		t.Errorf("core at %s, want %s", p, want)
	}
	b, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(b) != string(core) || st.Mode().Perm() != 0o755 {
		t.Errorf("extracted %q mode %v", b, st.Mode())
	}
	// A second start finds it: the file is not rewritten.
	before := st.ModTime()
	time.Sleep(10 * time.Millisecond)
	if p2, err := corePath(); err != nil || p2 != p {
		t.Fatalf("second start: %s %v", p2, err)
	}
	if st2, _ := os.Stat(p); !st2.ModTime().Equal(before) {
		t.Error("core extracted again on the second start")
	}
	if tmp, _ := filepath.Glob(filepath.Join(root, sum[:16], ".kelp-*")); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// A payload whose checksum does not match is refused: nothing is
// installed under the extract dir, and the memory fallback refuses too.
func TestCorruptPayloadIsRefused(t *testing.T) {
	root := t.TempDir()
	t.Setenv(extractDirEnv, root)
	withPayload(t, []byte("real core"))
	payloadSum = strings.Repeat("0", 64) + " 9\n"
	_, err := corePath()
	if err == nil || !strings.Contains(err.Error(), "corrupt launcher") {
		t.Fatalf("got %v, want a corrupt-launcher error", err)
	}
	if ents, _ := filepath.Glob(filepath.Join(root, "*", "kelp")); len(ents) != 0 {
		t.Errorf("a core was installed from a corrupt payload: %v", ents)
	}
	payloadSum = "garbage"
	if _, err := corePath(); err == nil {
		t.Error("unparseable checksum accepted")
	}
}

func TestNamedLinksTheInvokedName(t *testing.T) {
	dir := t.TempDir()
	core := filepath.Join(dir, "kelp")
	if err := os.WriteFile(core, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ argv0, want string }{
		{"/usr/local/bin/kubectl", filepath.Join(dir, "kubectl")},
		{"kubectl", filepath.Join(dir, "kubectl")}, // the link exists now
		{"/usr/local/bin/kelp", core},
		{".hidden", core},
	} {
		if got := named(core, c.argv0); got != c.want {
			t.Errorf("named(%q) = %s, want %s", c.argv0, got, c.want)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "kubectl")); err != nil || target != "kelp" {
		t.Errorf("kubectl link -> %q (%v)", target, err)
	}
}

// Builds beyond the newest keepCores go once unused for pruneAfter; the
// current one and recent ones stay.
func TestPruneKeepsRecentBuilds(t *testing.T) {
	root := t.TempDir()
	old := time.Now().Add(-2 * pruneAfter)
	for i, name := range []string{"a", "b", "c", "d"} {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		mod := old.Add(time.Duration(i) * time.Minute)
		if name == "d" {
			mod = time.Now()
		}
		if err := os.Chtimes(d, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	prune(root, "a") // a is current: kept whatever its age
	var left []string
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	// d (recent) and c (the newest old one, within keepCores-1 of the
	// others) stay; b is old and beyond them.
	if got := strings.Join(left, ","); got != "a,c,d" {
		t.Errorf("left %s, want a,c,d", got)
	}
}
