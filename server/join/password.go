package join

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The node password ties a node name to one machine: the agent makes it
// once and keeps it, the server keeps only its hash, in a Secret of this
// type named <node>.node-password.kelp in kube-system.
const (
	PasswordSecretType = "kelp.io/node-password"
	PasswordHashKey    = "hash"
)

// PasswordSecretName is the Secret holding node's password hash.
func PasswordSecretName(node string) string { return node + ".node-password.kelp" }

// LoadOrCreatePassword reads the node password at path, creating it (mode
// 0600) on first use. It is never rewritten: a new password would make the
// server refuse the node's own name.
func LoadOrCreatePassword(path string) (string, error) {
	if data, err := os.ReadFile(path); err == nil {
		if pw := strings.TrimSpace(string(data)); pw != "" {
			return pw, nil
		}
		return "", fmt.Errorf("node password file %s is empty", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	pw := hex.EncodeToString(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(pw + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return pw, f.Close()
}

// HashPassword is a salted SHA-256. A slow KDF would buy nothing: the
// password is 256 random bits made by the agent, not something a person
// chose, so the hash only has to keep the Secret from revealing it.
func HashPassword(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	return "sha256$" + hex.EncodeToString(salt) + "$" + digest(salt, password), nil
}

// CheckPassword reports whether password is the one hash was made from.
func CheckPassword(hash, password string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 3 || parts[0] != "sha256" {
		return false
	}
	salt, err := hex.DecodeString(parts[1])
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(parts[2]), []byte(digest(salt, password))) == 1
}

func digest(salt []byte, password string) string {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(password))
	return hex.EncodeToString(h.Sum(nil))
}
