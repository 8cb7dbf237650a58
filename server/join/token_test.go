package join

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

func TestParseToken(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for _, c := range []struct {
		in   string
		want Token
	}{
		{"K10" + hash + "::server:s3cret", Token{CAHash: hash, User: "server", Secret: "s3cret"}},
		{"K10" + hash + "::node:a:b", Token{CAHash: hash, User: "node", Secret: "a:b"}},
		{"K10" + hash + "::abcdef.0123456789abcdef", Token{CAHash: hash, Secret: "abcdef.0123456789abcdef"}},
		{"K10" + strings.ToUpper(hash) + "::node:x", Token{CAHash: hash, User: "node", Secret: "x"}},
		{"  plain-secret\n", Token{Secret: "plain-secret"}},
		{"abcdef.0123456789abcdef", Token{Secret: "abcdef.0123456789abcdef"}},
		{"K10-not-a-token", Token{Secret: "K10-not-a-token"}},
	} {
		got, err := ParseToken(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseToken(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "  ", "K10abc::node:x", "K10" + strings.Repeat("zz", 32) + "::node:x", "K10" + hash + "::node:", "K10" + hash + "::"} {
		if got, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) = %+v, want an error", bad, got)
		}
	}
}

func TestTokenRoundTrip(t *testing.T) {
	hash := CAHash([]byte("pem"))
	for _, tok := range []Token{
		{CAHash: hash, User: ServerUser, Secret: "s"},
		{CAHash: hash, Secret: "abcdef.0123456789abcdef"},
		{Secret: "bare"},
	} {
		got, err := ParseToken(tok.String())
		if err != nil || got != tok {
			t.Errorf("ParseToken(%q) = %+v, %v", tok.String(), got, err)
		}
	}
	if s := (Token{CAHash: hash, User: NodeUser, Secret: "x"}).String(); s != "K10"+hash+"::node:x" {
		t.Errorf("String() = %q", s)
	}
}

func TestCAHash(t *testing.T) {
	sum := sha256.Sum256([]byte("-----BEGIN CERTIFICATE-----\n"))
	if got := CAHash([]byte("-----BEGIN CERTIFICATE-----\n")); got != hex.EncodeToString(sum[:]) || len(got) != 64 {
		t.Errorf("CAHash = %q", got)
	}
}

func TestBootstrapTokens(t *testing.T) {
	id, secret, err := NewBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	if gi, gs, ok := SplitBootstrapToken(id + "." + secret); !ok || gi != id || gs != secret {
		t.Fatalf("SplitBootstrapToken(%s.%s) = %q %q %v", id, secret, gi, gs, ok)
	}
	for _, bad := range []string{"abcdef", "abcde.0123456789abcdef", "ABCDEF.0123456789abcdef", "abcdef.0123456789abcdef0"} {
		if _, _, ok := SplitBootstrapToken(bad); ok {
			t.Errorf("SplitBootstrapToken(%q) accepted", bad)
		}
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := NewBootstrapSecret(id, secret, "for node-2", time.Hour, now)
	if s.Name != "bootstrap-token-"+id || s.Namespace != "kube-system" || s.Type != "bootstrap.kubernetes.io/token" {
		t.Errorf("secret %s/%s type %s", s.Namespace, s.Name, s.Type)
	}
	if string(s.Data["expiration"]) != "2026-01-02T04:04:05Z" || string(s.Data["usage-bootstrap-authentication"]) != "true" ||
		string(s.Data["auth-extra-groups"]) != BootstrapTokenGroup {
		t.Errorf("data %q", s.Data)
	}
	b, err := ParseBootstrapSecret(s)
	if err != nil || b.ID != id || b.Secret != secret || b.Description != "for node-2" || b.Expires == nil {
		t.Fatalf("ParseBootstrapSecret = %+v, %v", b, err)
	}
	if b.Expired(now.Add(59*time.Minute)) || !b.Expired(now.Add(time.Hour)) {
		t.Errorf("expiry at %s misjudged", b.Expires)
	}
	forever, err := ParseBootstrapSecret(NewBootstrapSecret(id, secret, "", 0, now))
	if err != nil || forever.Expires != nil || forever.Expired(now.AddDate(100, 0, 0)) {
		t.Errorf("ttl 0: %+v, %v", forever, err)
	}
	noAuth := NewBootstrapSecret(id, secret, "", 0, now)
	delete(noAuth.Data, "usage-bootstrap-authentication")
	if _, err := ParseBootstrapSecret(noAuth); err == nil {
		t.Error("a token without usage-bootstrap-authentication was accepted")
	}
	misnamed := NewBootstrapSecret(id, secret, "", 0, now)
	misnamed.Name = "bootstrap-token-zzzzzz"
	if _, err := ParseBootstrapSecret(misnamed); err == nil {
		t.Error("a token whose id differs from its name was accepted")
	}
}
