package secretsencrypt

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

var secrets = schema.GroupResource{Resource: "secrets"}

const testKey = "/registry/secrets/ns/a"

func setup(t *testing.T) (*Encryption, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "server", "cred")
	e, err := Setup(dir)
	if err != nil {
		t.Fatal(err)
	}
	return e, dir
}

func TestSetupCreatesAPrivateConfigWithOneAESCBCKey(t *testing.T) {
	e, dir := setup(t)
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir: %v %v", fi.Mode(), err)
	}
	fi, err = os.Stat(e.ConfigPath())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file: %v %v", fi.Mode(), err)
	}
	data, _ := os.ReadFile(e.ConfigPath())
	cfg, err := DecodeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.Resources[0].Providers
	if cfg.Resources[0].Resources[0] != "secrets" || len(ps) != 2 || ps[0].AESCBC == nil || ps[1].Identity == nil {
		t.Fatalf("default config %s", data)
	}
	raw, _ := base64.StdEncoding.DecodeString(ps[0].AESCBC.Keys[0].Secret)
	if len(raw) != 32 || !strings.HasPrefix(ps[0].AESCBC.Keys[0].Name, "aescbckey-") {
		t.Fatalf("key %q of %d bytes", ps[0].AESCBC.Keys[0].Name, len(raw))
	}
	// A second start keeps the key.
	e2, err := Setup(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e2.loaded.Load().hash != e.loaded.Load().hash {
		t.Error("a restart replaced the configuration")
	}
}

func TestCorruptConfigIsAnErrorNamingTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ConfigFile)
	for _, bad := range []string{"", "{", `{"apiVersion":"v1","kind":"Pod"}`,
		`{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration","resources":[{"resources":["secrets"],"providers":[{"aescbc":{"keys":[{"name":"k","secret":"c2hvcnQ="}]}}]}]}`} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Setup(dir)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestDecodeConfig(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	good := []string{
		`{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration","resources":[{"resources":["secrets"],"providers":[{"aesgcm":{"keys":[{"name":"g","secret":"` + key + `"}]}},{"identity":{}}]}]}`,
		"apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets, configmaps]\n  providers:\n  - secretbox:\n      keys:\n      - name: s\n        secret: " + key + "\n  - identity: {}\n",
	}
	for _, g := range good {
		if _, err := DecodeConfig([]byte(g)); err != nil {
			t.Errorf("%s: %v", g, err)
		}
	}
	head := `{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration","resources":[{"resources":["secrets"],"providers":[`
	bad := map[string]string{
		"unknown field":  head + `{"aescbc":{"keys":[{"name":"k","secret":"` + key + `"}]},"aescbcc":{}}]}]}`,
		"two providers":  head + `{"aescbc":{"keys":[{"name":"k","secret":"` + key + `"}]},"identity":{}}]}]}`,
		"no keys":        head + `{"aescbc":{"keys":[]}}]}]}`,
		"no name":        head + `{"aescbc":{"keys":[{"secret":"` + key + `"}]}}]}]}`,
		"not base64":     head + `{"aescbc":{"keys":[{"name":"k","secret":"!!"}]}}]}]}`,
		"secretbox 16":   head + `{"secretbox":{"keys":[{"name":"k","secret":"` + base64.StdEncoding.EncodeToString(make([]byte, 16)) + `"}]}}]}]}`,
		"kms":            head + `{"kms":{"name":"x"}}]}]}`,
		"no providers":   head + `]}]}`,
		"duplicate name": head + `{"aescbc":{"keys":[{"name":"k","secret":"` + key + `"},{"name":"k","secret":"` + key + `"}]}}]}]}`,
	}
	for name, b := range bad {
		if _, err := DecodeConfig([]byte(b)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestAESCBCIsUpstreamsFormat decrypts what kelp wrote by hand, as
// kube-apiserver would read it: k8s:enc:aescbc:v1:<name>: then the IV and
// the PKCS#7-padded CBC ciphertext.
func TestAESCBCIsUpstreamsFormat(t *testing.T) {
	e, _ := setup(t)
	tr := e.TransformerFor(secrets)
	ctx := context.Background()
	plain := []byte("k8s\x00protobuf-of-a-secret")
	out, err := tr.TransformToStorage(ctx, plain, testKey)
	if err != nil {
		t.Fatal(err)
	}
	k := e.loaded.Load().cfg.Resources[0].Providers[0].AESCBC.Keys[0]
	prefix := "k8s:enc:aescbc:v1:" + k.Name + ":"
	if !bytes.HasPrefix(out, []byte(prefix)) || bytes.Contains(out, []byte("protobuf-of-a-secret")) {
		t.Fatalf("stored %q", out)
	}
	raw, _ := base64.StdEncoding.DecodeString(k.Secret)
	block, _ := aes.NewCipher(raw)
	body := out[len(prefix):]
	dec := make([]byte, len(body)-aes.BlockSize)
	cipher.NewCBCDecrypter(block, body[:aes.BlockSize]).CryptBlocks(dec, body[aes.BlockSize:])
	dec = dec[:len(dec)-int(dec[len(dec)-1])]
	if !bytes.Equal(dec, plain) {
		t.Fatalf("decrypted by hand: %q", dec)
	}
	back, stale, err := tr.TransformFromStorage(ctx, out, testKey)
	if err != nil || stale || !bytes.Equal(back, plain) {
		t.Fatalf("round trip: %q %v %v", back, stale, err)
	}
	// Plaintext from before encryption reads, and is stale (rewritten on
	// reencrypt), through identity.
	back, stale, err = tr.TransformFromStorage(ctx, plain, testKey)
	if err != nil || !stale || !bytes.Equal(back, plain) {
		t.Fatalf("plaintext: %q %v %v", back, stale, err)
	}
	// Other resources are not touched.
	cm := e.TransformerFor(schema.GroupResource{Resource: "configmaps"})
	for range 2 { // the second answer is the memoised one
		if out, _ := cm.TransformToStorage(ctx, plain, "/registry/configmaps/ns/a"); !bytes.Equal(out, plain) {
			t.Fatalf("configmap stored %q", out)
		}
		if out, stale, err := cm.TransformFromStorage(ctx, plain, "/registry/configmaps/ns/a"); err != nil || stale || !bytes.Equal(out, plain) {
			t.Fatalf("configmap read %q %v %v", out, stale, err)
		}
	}
}

func TestEveryProviderRoundTrips(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 32))
	for _, p := range []string{"aescbc", "aesgcm", "secretbox"} {
		dir := t.TempDir()
		cfg := `{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration","resources":[{"resources":["*.*"],"providers":[{"` + p + `":{"keys":[{"name":"k1","secret":"` + key + `"}]}},{"identity":{}}]}]}`
		if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		e, err := Setup(dir)
		if err != nil {
			t.Fatal(p, err)
		}
		tr := e.TransformerFor(schema.GroupResource{Group: "apps", Resource: "deployments"})
		out, err := tr.TransformToStorage(context.Background(), []byte("hello"), testKey)
		if err != nil || !bytes.HasPrefix(out, []byte("k8s:enc:"+p+":v1:k1:")) {
			t.Fatalf("%s: %q %v", p, out, err)
		}
		back, _, err := tr.TransformFromStorage(context.Background(), out, testKey)
		if err != nil || string(back) != "hello" {
			t.Fatalf("%s: %q %v", p, back, err)
		}
		if p == "aesgcm" {
			// The etcd key is authenticated data: moved, it does not read.
			if _, _, err := tr.TransformFromStorage(context.Background(), out, testKey+"x"); err == nil {
				t.Error("aesgcm value read under another key")
			}
		}
	}
}

// memStore is a stand-in for the API server's stores: values as the
// transformer wrote them, rewritten by the Rewriter.
type memStore struct {
	mu     sync.Mutex
	values map[string][]byte
	tr     interface {
		TransformToStorage(context.Context, []byte, string) ([]byte, error)
		TransformFromStorage(context.Context, []byte, string) ([]byte, bool, error)
	}
}

func (m *memStore) put(t *testing.T, key, plain string) {
	out, err := m.tr.TransformToStorage(context.Background(), []byte(plain), key)
	if err != nil {
		t.Fatal(err)
	}
	m.values[key] = out
}

func (m *memStore) rewrite(ctx context.Context, match func(schema.GroupResource) bool) (int, error) {
	if !match(secrets) {
		return 0, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.values {
		plain, stale, err := m.tr.TransformFromStorage(ctx, v, k)
		if err != nil {
			return 0, err
		}
		if stale {
			if m.values[k], err = m.tr.TransformToStorage(ctx, plain, k); err != nil {
				return 0, err
			}
		}
	}
	return len(m.values), nil
}

func (m *memStore) readAll(t *testing.T) {
	t.Helper()
	for k, v := range m.values {
		if _, _, err := m.tr.TransformFromStorage(context.Background(), v, k); err != nil {
			t.Errorf("%s unreadable: %v", k, err)
		}
	}
}

func keyNames(st Status) []string {
	var out []string
	for _, k := range st.Keys {
		out = append(out, k.Name)
	}
	return out
}

func TestRotateKeys(t *testing.T) {
	e, _ := setup(t)
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.now = func() time.Time { tick = tick.Add(time.Second); return tick }
	m := &memStore{values: map[string][]byte{}, tr: e.TransformerFor(secrets)}
	e.SetRewriter(m.rewrite)
	m.values["/registry/secrets/ns/plain"] = []byte("k8s\x00plaintext from before")
	m.put(t, "/registry/secrets/ns/a", "k8s\x00a")
	before, _ := e.Status()
	if !before.Enabled || before.Stage != StageStart || len(before.Keys) != 1 {
		t.Fatalf("status before %+v", before)
	}
	msg, err := e.Do(context.Background(), Request{Stage: CmdRotateKeys})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := e.Status()
	if after.Stage != StageReencryptFinished || len(after.Keys) != 1 || after.Keys[0].Name == before.Keys[0].Name || !after.Keys[0].Active {
		t.Fatalf("status after %+v (%s)", after, msg)
	}
	data, _ := os.ReadFile(e.ConfigPath())
	if bytes.Contains(data, []byte(before.Keys[0].Name)) {
		t.Error("the old key is still in the configuration")
	}
	m.readAll(t)
	for k, v := range m.values {
		if !bytes.HasPrefix(v, []byte("k8s:enc:aescbc:v1:"+after.Keys[0].Name+":")) {
			t.Errorf("%s not under the new key: %.40q", k, v)
		}
	}
	if after.ConfigHash != after.FileHash {
		t.Error("hashes differ after a command")
	}
}

func TestPrepareRotateReencrypt(t *testing.T) {
	e, _ := setup(t)
	m := &memStore{values: map[string][]byte{}, tr: e.TransformerFor(secrets)}
	e.SetRewriter(m.rewrite)
	m.put(t, "/registry/secrets/ns/a", "k8s\x00a")
	ctx := context.Background()
	first, _ := e.Status()
	if _, err := e.Do(ctx, Request{Stage: CmdRotate}); err == nil {
		t.Fatal("rotate before prepare was accepted")
	}
	if _, err := e.Do(ctx, Request{Stage: CmdPrepare}); err != nil {
		t.Fatal(err)
	}
	st, _ := e.Status()
	if st.Stage != StagePrepare || len(st.Keys) != 2 || st.Keys[0].Name != first.Keys[0].Name {
		t.Fatalf("after prepare %+v", st)
	}
	if _, err := e.Do(ctx, Request{Stage: CmdRotate}); err != nil {
		t.Fatal(err)
	}
	st, _ = e.Status()
	if st.Stage != StageRotate || st.Keys[1].Name != first.Keys[0].Name {
		t.Fatalf("after rotate %+v", st)
	}
	m.readAll(t)
	if _, err := e.Do(ctx, Request{Stage: CmdReencrypt}); err != nil {
		t.Fatal(err)
	}
	st, _ = e.Status()
	if st.Stage != StageReencryptFinished || len(st.Keys) != 1 || st.Keys[0].Name == first.Keys[0].Name {
		t.Fatalf("after reencrypt %+v", st)
	}
	m.readAll(t)
}

func TestDisableThenEnable(t *testing.T) {
	e, _ := setup(t)
	off := false
	if _, err := e.Do(context.Background(), Request{Enable: &off}); err != nil {
		t.Fatal(err)
	}
	st, _ := e.Status()
	if st.Enabled {
		t.Fatalf("after disable %+v", st)
	}
	tr := e.TransformerFor(secrets)
	if out, _ := tr.TransformToStorage(context.Background(), []byte("k8s\x00x"), testKey); string(out) != "k8s\x00x" {
		t.Fatalf("disabled, stored %q", out)
	}
	if _, err := e.Do(context.Background(), Request{Stage: CmdRotateKeys}); err == nil {
		t.Error("rotate-keys while disabled was accepted")
	}
	on := true
	if _, err := e.Do(context.Background(), Request{Enable: &on}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.Status(); !st.Enabled {
		t.Fatalf("after enable %+v", st)
	}
}

func TestMissingKeyIsAnError(t *testing.T) {
	e, _ := setup(t)
	tr := e.TransformerFor(secrets)
	_, err := tr.TransformToStorage(context.Background(), []byte("x"), testKey)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = tr.TransformFromStorage(context.Background(), []byte("k8s:enc:aescbc:v1:nosuchkey:0123456789abcdef0123456789abcdef"), testKey)
	if err == nil {
		t.Fatal("a value under an unknown key read")
	}
}
