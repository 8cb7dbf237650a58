// Package secretsencrypt is `kelp server --secrets-encryption`: Secrets
// encrypted at rest with upstream's EncryptionConfiguration and value
// transformers, and the key rotation of `kelp secrets-encrypt`, as k3s has
// them. The configuration lives in <data-dir>/server/cred/, is created on
// first start with one random aescbc key, and is reloaded live by every
// rotation command; the storage layer asks Encryption for a transformer per
// resource on every read and write, so a reload takes effect at once.
package secretsencrypt

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"
)

// ConfigFile is k3s's name for the configuration, under <data-dir>/server/cred.
const ConfigFile = "encryption-config.json"

// KeySize is the length of every generated key: AES-256 for aescbc and
// aesgcm, and the only size secretbox takes.
const KeySize = 32

const (
	configAPIVersion = "apiserver.config.k8s.io/v1"
	configKind       = "EncryptionConfiguration"
)

// Provider names as the configuration spells them.
const (
	AESCBC    = "aescbc"
	AESGCM    = "aesgcm"
	Secretbox = "secretbox"
	Identity  = "identity"
)

// DecodeConfig reads an EncryptionConfiguration (JSON or YAML) strictly and
// checks what the transformers need: known providers, one per entry, named
// keys of a usable size. Unknown fields are errors, so a typo never
// silently leaves Secrets in plaintext.
func DecodeConfig(data []byte) (*apiserverv1.EncryptionConfiguration, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty encryption configuration")
	}
	var cfg apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if cfg.APIVersion != configAPIVersion || cfg.Kind != configKind {
		return nil, fmt.Errorf("apiVersion %q, kind %q: want %s, %s", cfg.APIVersion, cfg.Kind, configAPIVersion, configKind)
	}
	if err := validate(&cfg); err != nil {
		return nil, err
	}
	return &cfg, nil
}

func validate(cfg *apiserverv1.EncryptionConfiguration) error {
	if len(cfg.Resources) == 0 {
		return errors.New("resources: none listed")
	}
	for i, rc := range cfg.Resources {
		if len(rc.Resources) == 0 {
			return fmt.Errorf("resources[%d].resources: none listed", i)
		}
		for _, r := range rc.Resources {
			if r == "" {
				return fmt.Errorf("resources[%d].resources: an empty name", i)
			}
		}
		if len(rc.Providers) == 0 {
			return fmt.Errorf("resources[%d].providers: none listed", i)
		}
		for j, p := range rc.Providers {
			kind, keys, err := providerKeys(p)
			if err != nil {
				return fmt.Errorf("resources[%d].providers[%d]: %w", i, j, err)
			}
			if kind == Identity {
				continue
			}
			if len(keys) == 0 {
				return fmt.Errorf("resources[%d].providers[%d].%s: no keys", i, j, kind)
			}
			seen := map[string]bool{}
			for _, k := range keys {
				if k.Name == "" {
					return fmt.Errorf("resources[%d].providers[%d].%s: a key without a name", i, j, kind)
				}
				if seen[k.Name] {
					return fmt.Errorf("resources[%d].providers[%d].%s: key %q listed twice", i, j, kind, k.Name)
				}
				seen[k.Name] = true
				raw, err := base64.StdEncoding.DecodeString(k.Secret)
				if err != nil {
					return fmt.Errorf("resources[%d].providers[%d].%s: key %q: secret is not base64", i, j, kind, k.Name)
				}
				// AES takes 16, 24 or 32 bytes; secretbox only 32.
				if kind == Secretbox && len(raw) != 32 {
					return fmt.Errorf("resources[%d].providers[%d].%s: key %q is %d bytes (want 32)", i, j, kind, k.Name, len(raw))
				}
				if len(raw) != 16 && len(raw) != 24 && len(raw) != 32 {
					return fmt.Errorf("resources[%d].providers[%d].%s: key %q is %d bytes (want 16, 24 or 32)", i, j, kind, k.Name, len(raw))
				}
			}
		}
	}
	return nil
}

// providerKeys names the one provider p configures and returns its keys.
func providerKeys(p apiserverv1.ProviderConfiguration) (string, []apiserverv1.Key, error) {
	var kind string
	var keys []apiserverv1.Key
	n := 0
	if p.AESCBC != nil {
		kind, keys, n = AESCBC, p.AESCBC.Keys, n+1
	}
	if p.AESGCM != nil {
		kind, keys, n = AESGCM, p.AESGCM.Keys, n+1
	}
	if p.Secretbox != nil {
		kind, keys, n = Secretbox, p.Secretbox.Keys, n+1
	}
	if p.Identity != nil {
		kind, n = Identity, n+1
	}
	if p.KMS != nil {
		return "", nil, errors.New("kms providers are not supported by kelp")
	}
	switch n {
	case 0:
		return "", nil, errors.New("names no provider (aescbc, aesgcm, secretbox or identity)")
	case 1:
		return kind, keys, nil
	}
	return "", nil, errors.New("names more than one provider")
}

// setProviderKeys replaces the keys of p's (non-identity) provider.
func setProviderKeys(p *apiserverv1.ProviderConfiguration, keys []apiserverv1.Key) {
	switch {
	case p.AESCBC != nil:
		p.AESCBC.Keys = keys
	case p.AESGCM != nil:
		p.AESGCM.Keys = keys
	case p.Secretbox != nil:
		p.Secretbox.Keys = keys
	}
}

// NewKey makes a random key named as k3s names its keys: the provider and
// the time (RFC 3339), made unique among taken.
func NewKey(provider string, now time.Time, taken map[string]bool) (apiserverv1.Key, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return apiserverv1.Key{}, err
	}
	name := provider + "key-" + now.UTC().Format(time.RFC3339)
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%skey-%s-%d", provider, now.UTC().Format(time.RFC3339), i)
	}
	return apiserverv1.Key{Name: name, Secret: base64.StdEncoding.EncodeToString(raw)}, nil
}

// DefaultConfig is what the first start with --secrets-encryption writes,
// as k3s does: Secrets with one new aescbc key, then identity, so that
// Secrets written before encryption was enabled stay readable.
func DefaultConfig(now time.Time) (*apiserverv1.EncryptionConfiguration, error) {
	key, err := NewKey(AESCBC, now, nil)
	if err != nil {
		return nil, err
	}
	cfg := &apiserverv1.EncryptionConfiguration{
		Resources: []apiserverv1.ResourceConfiguration{{
			Resources: []string{"secrets"},
			Providers: []apiserverv1.ProviderConfiguration{
				{AESCBC: &apiserverv1.AESConfiguration{Keys: []apiserverv1.Key{key}}},
				{Identity: &apiserverv1.IdentityConfiguration{}},
			},
		}},
	}
	cfg.APIVersion, cfg.Kind = configAPIVersion, configKind
	return cfg, nil
}

// EncodeConfig is the file's bytes: indented JSON, as k3s writes it.
func EncodeConfig(cfg *apiserverv1.EncryptionConfiguration) ([]byte, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	data, err = yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// writeFile replaces path atomically (a reader sees the old file or the
// new one, never half of one), mode 0600, in a 0700 directory: the file
// holds the keys.
func writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
