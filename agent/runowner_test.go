package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run dir is refused to another data dir while its recorded owner's
// data dir exists, and free once that is gone.
func TestRunDirOwnership(t *testing.T) {
	root := t.TempDir()
	runDir, mine, theirs := filepath.Join(root, "run"), filepath.Join(root, "mine"), filepath.Join(root, "theirs")
	sock := filepath.Join(runDir, "containerd", "containerd.sock") // nothing answers
	for _, d := range []string{mine, theirs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkRunDirOwner(runDir, mine, sock); err != nil {
		t.Fatalf("a run dir nobody claimed: %v", err)
	}
	if err := claimRunDir(runDir, theirs, sock); err != nil {
		t.Fatal(err)
	}
	err := checkRunDirOwner(runDir, mine, sock)
	if err == nil || !strings.Contains(err.Error(), "--data-dir "+theirs) {
		t.Fatalf("a run dir another existing data dir claimed: %v, want an error naming %s", err, theirs)
	}
	if err := claimRunDir(runDir, mine, sock); err == nil {
		t.Fatal("an agent claimed a run dir another cluster holds")
	}
	if err := checkRunDirOwner(runDir, theirs, sock); err != nil {
		t.Errorf("its owner: %v", err)
	}
	if err := os.RemoveAll(theirs); err != nil {
		t.Fatal(err)
	}
	if err := claimRunDir(runDir, mine, sock); err != nil {
		t.Errorf("a run dir whose owner's data dir is gone: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(runDir, ownerFile)); strings.TrimSpace(string(b)) != mine {
		t.Errorf("owner after the claim: %q, want %s", b, mine)
	}
}
