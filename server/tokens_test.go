package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kelp-project/kelp/server/join"
)

func readToken(t *testing.T, path string) join.Token {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v", path, st.Mode().Perm())
	}
	tok, err := join.ParseToken(string(data))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	ca := []byte("ca bundle")
	first, err := loadTokens(dir, ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	srv, node := readToken(t, filepath.Join(dir, "token")), readToken(t, filepath.Join(dir, "node-token"))
	want := join.CAHash(ca)
	if srv != (join.Token{CAHash: want, User: "server", Secret: first.server}) || node != (join.Token{CAHash: want, User: "node", Secret: first.agent}) {
		t.Errorf("token files %+v %+v, tokens %+v", srv, node, first)
	}
	if first.server == first.agent || first.serverToken != srv.String() {
		t.Errorf("tokens %+v", first)
	}
	// A restart keeps both secrets.
	if again, err := loadTokens(dir, ca, "", ""); err != nil || again != first {
		t.Errorf("restart: %+v, %v; want %+v", again, err, first)
	}
	// Flags choose the secrets, bare or as full tokens.
	flagged, err := loadTokens(dir, ca, "K10"+strings.Repeat("0", 64)+"::server:chosen", "agents-only")
	if err != nil || flagged.server != "chosen" || flagged.agent != "agents-only" {
		t.Errorf("flags: %+v, %v", flagged, err)
	}
	if got := readToken(t, filepath.Join(dir, "token")); got.Secret != "chosen" || got.CAHash != want {
		t.Errorf("token file after --token: %+v", got)
	}
	if _, err := loadTokens(dir, ca, "same", "same"); err == nil {
		t.Error("an agent token equal to the server token was accepted")
	}
}

// A token file written before the K10 format holds the kelp-admin bearer
// token: it becomes the server secret, so the bearer token keeps working.
func TestLoadTokensMigratesPlainToken(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("0123abcd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := loadTokens(dir, []byte("ca"), "", "")
	if err != nil || tok.server != "0123abcd" {
		t.Fatalf("%+v, %v", tok, err)
	}
	if got := readToken(t, filepath.Join(dir, "token")); got.Secret != "0123abcd" || got.CAHash == "" {
		t.Errorf("migrated token file %+v", got)
	}
}
