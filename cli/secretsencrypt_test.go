package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kelp-project/kelp/server/secretsencrypt"
)

func TestSecretsEncryptionFlag(t *testing.T) {
	clearEnv(t)
	if cfg, _ := parseServer(t); cfg.SecretsEncryption {
		t.Error("secrets encryption is on by default")
	}
	if cfg, _ := parseServer(t, "--secrets-encryption"); !cfg.SecretsEncryption {
		t.Error("--secrets-encryption did not set it")
	}
	t.Setenv("KELP_SECRETS_ENCRYPTION", "true")
	if cfg, _ := parseServer(t); !cfg.SecretsEncryption {
		t.Error("KELP_SECRETS_ENCRYPTION did not set it")
	}
}

func TestPrintEncryptionStatus(t *testing.T) {
	for _, c := range []struct {
		st   secretsencrypt.Status
		want []string
	}{
		{secretsencrypt.Status{}, []string{"Encryption Status: Disabled, no configuration file found"}},
		{secretsencrypt.Status{Enabled: true, Stage: "start", ConfigHash: "aa", FileHash: "aa",
			Keys: []secretsencrypt.KeyStatus{{Active: true, Type: "AES-CBC", Name: "k2"}, {Type: "AES-CBC", Name: "k1"}}},
			[]string{"Encryption Status: Enabled\n", "Current Rotation Stage: start", "All hashes match", " *      AES-CBC   k2", "        AES-CBC   k1"}},
		{secretsencrypt.Status{Stage: "reencrypt_active", ConfigHash: "aa", FileHash: "bb", LastError: "boom"},
			[]string{"Encryption Status: Disabled\n", "hash does not match", "Last Error: boom"}},
	} {
		var b bytes.Buffer
		printEncryptionStatus(&b, c.st)
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%+v: output lacks %q:\n%s", c.st, w, b.String())
			}
		}
	}
}
