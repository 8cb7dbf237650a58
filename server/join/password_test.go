package join

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPasswordHash(t *testing.T) {
	h1, err := HashPassword("pw")
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := HashPassword("pw")
	if h1 == h2 {
		t.Error("two hashes of one password are equal: no salt")
	}
	if !CheckPassword(h1, "pw") || !CheckPassword(h2, "pw") {
		t.Error("the right password is refused")
	}
	for _, bad := range []struct{ hash, pw string }{{h1, "pw2"}, {h1, ""}, {"", "pw"}, {"sha256$zz$00", "pw"}, {"md5$00$00", "pw"}} {
		if CheckPassword(bad.hash, bad.pw) {
			t.Errorf("CheckPassword(%q, %q) accepted", bad.hash, bad.pw)
		}
	}
}

func TestLoadOrCreatePassword(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent", "node-password")
	pw, err := LoadOrCreatePassword(path)
	if err != nil || len(pw) != 64 {
		t.Fatalf("created %q, %v", pw, err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode().Perm(), err)
	}
	if again, err := LoadOrCreatePassword(path); err != nil || again != pw {
		t.Errorf("second load %q, %v; want the first %q", again, err, pw)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreatePassword(path); err == nil {
		t.Error("an empty password file was accepted (and would be replaced, losing the node's name)")
	}
}
