package dirwatch

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The watcher reacts to what a user does to the directory, and not to
// files still being written or to editors' hidden files.
func TestWatcher(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	w, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case <-w.C:
			if !want {
				t.Errorf("%s: signalled", what)
			}
		case <-time.After(300 * time.Millisecond):
			if want {
				t.Errorf("%s: no signal", what)
			}
		}
	}
	path := filepath.Join(dir, "a.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("kind: ")
	expect("a file created and still open", false)
	f.Close()
	expect("the file closed", true)
	os.WriteFile(filepath.Join(dir, ".a.yaml.swp"), nil, 0o600)
	expect("a hidden file", false)
	os.Rename(filepath.Join(dir, ".a.yaml.swp"), filepath.Join(dir, "b.yaml"))
	expect("a file renamed in", true)
	os.Symlink(path, filepath.Join(dir, "c.yaml"))
	expect("a symlink", true)
	os.Remove(path)
	expect("a file removed", true)

	// The directory removed: the watch is lost, and rewatch makes the
	// directory again and watches it.
	os.RemoveAll(dir)
	select {
	case <-w.Lost:
	case <-time.After(2 * time.Second):
		t.Fatal("directory removed: the watch was not reported lost")
	}
	if err := w.Rewatch(); err != nil {
		t.Fatal(err)
	}
	for len(w.C) > 0 {
		<-w.C
	}
	os.WriteFile(path, nil, 0o600)
	expect("a file written after the rewatch", true)
}
