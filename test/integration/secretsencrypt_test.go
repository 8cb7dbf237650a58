package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// distinct is a value no other byte sequence in etcd will match by chance.
func distinct(t *testing.T, what string) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return what + "-" + hex.EncodeToString(b)
}

// inDB reports which files under <data-dir>/server/db (the bolt db and the
// WAL) hold value, raw or base64.
func inDB(t *testing.T, dataDir, value string) []string {
	t.Helper()
	var hits []string
	forms := [][]byte{[]byte(value), []byte(base64.StdEncoding.EncodeToString([]byte(value)))}
	files := 0
	err := filepath.WalkDir(filepath.Join(dataDir, "server", "db"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, f := range forms {
			if bytes.Contains(data, f) {
				hits = append(hits, path)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 2 {
		t.Fatalf("only %d files under the db dir: the check would see nothing", files)
	}
	return hits
}

func (s *testServer) secretsEncrypt(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{"secrets-encrypt"}, args[0], "--data-dir", s.dataDir, "--server", s.config.Host)
	out, err := exec.CommandContext(ctx, kelpBin, append(full, args[1:]...)...).CombinedOutput()
	return string(out), err
}

func (s *testServer) mustSecretsEncrypt(args ...string) string {
	s.t.Helper()
	out, err := s.secretsEncrypt(args...)
	if err != nil {
		s.t.Fatalf("kelp secrets-encrypt %v: %v\n%s", args, err, out)
	}
	return out
}

func createSecret(t *testing.T, s *testServer, name, value string) {
	t.Helper()
	_, err := s.client().CoreV1().Secrets("default").Create(ctxT(t), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"v": []byte(value)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func wantSecret(t *testing.T, s *testServer, name, value string) {
	t.Helper()
	sec, err := s.client().CoreV1().Secrets("default").Get(ctxT(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	if got := string(sec.Data["v"]); got != value {
		t.Fatalf("secret %s: %q, want %q", name, got, value)
	}
	// kubectl reads through the list path (and its table) as well.
	out := s.mustKubectl("get", "secret", name, "-o", "jsonpath={.data.v}")
	if out != base64.StdEncoding.EncodeToString([]byte(value)) {
		t.Fatalf("kubectl get secret %s: %q", name, out)
	}
	list, err := s.client().CoreV1().Secrets("default").List(ctxT(t), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Items {
		if it.Name == name && string(it.Data["v"]) != value {
			t.Fatalf("cached list: %s is %q", name, it.Data["v"])
		}
	}
}

func TestSecretsEncryptionAtRest(t *testing.T) {
	s := startServer(t)
	plainValue := distinct(t, "plaintext")
	createSecret(t, s, "before", plainValue)
	if out, _ := s.secretsEncrypt("status"); !strings.Contains(out, "Encryption Status: Disabled") {
		t.Errorf("status without --secrets-encryption:\n%s", out)
	}
	s.stop()
	// Without encryption the value is on disk: the check can see.
	if hits := inDB(t, s.dataDir, plainValue); len(hits) == 0 {
		t.Fatal("a Secret stored without encryption is not found in the db files: the check is blind")
	}

	s.extraArgs = append(s.extraArgs, "--secrets-encryption")
	s.start()
	cred := filepath.Join(s.dataDir, "server", "cred")
	if fi, err := os.Stat(cred); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v %v", cred, fi, err)
	}
	cfgFile := filepath.Join(cred, "encryption-config.json")
	if fi, err := os.Stat(cfgFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", cfgFile, fi, err)
	}
	// Plaintext from before stays readable.
	wantSecret(t, s, "before", plainValue)
	encValue := distinct(t, "encrypted")
	createSecret(t, s, "after", encValue)
	wantSecret(t, s, "after", encValue)

	status := s.mustSecretsEncrypt("status")
	for _, want := range []string{"Encryption Status: Enabled", "Current Rotation Stage: start", "Server Encryption Hashes: All hashes match", "AES-CBC", "aescbckey-"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	oldCfg := mustRead(t, cfgFile)
	oldKey := keyName(t, status)
	if !strings.Contains(oldCfg, `"name": "`+oldKey+`"`) {
		t.Fatalf("key %s not in %s", oldKey, oldCfg)
	}

	// Keys rotate live: new key written, every Secret rewritten, old key
	// gone. Watchers see each rewrite as a MODIFIED event with the value
	// in the clear.
	w, err := s.client().CoreV1().Secrets("default").Watch(ctxT(t), metav1.ListOptions{FieldSelector: "metadata.name=after", ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	out := s.mustSecretsEncrypt("rotate-keys")
	for modified := false; !modified; {
		select {
		case ev := <-w.ResultChan():
			sec, ok := ev.Object.(*corev1.Secret)
			if !ok || string(sec.Data["v"]) != encValue {
				t.Fatalf("watch event %s: %#v", ev.Type, ev.Object)
			}
			modified = ev.Type == watch.Modified
		case <-time.After(10 * time.Second):
			t.Fatal("no MODIFIED event for the rewritten Secret")
		}
	}
	if !strings.Contains(out, "re-encrypted") {
		t.Errorf("rotate-keys said: %s", out)
	}
	newCfg := mustRead(t, cfgFile)
	if strings.Contains(newCfg, `"name": "`+oldKey+`"`) {
		t.Errorf("the old key %s is still in the configuration:\n%s", oldKey, newCfg)
	}
	status = s.mustSecretsEncrypt("status")
	if !strings.Contains(status, "Current Rotation Stage: reencrypt_finished") || keyName(t, status) == oldKey {
		t.Errorf("status after rotate-keys:\n%s", status)
	}
	wantSecret(t, s, "before", plainValue)
	wantSecret(t, s, "after", encValue)
	// A stage out of order is refused with a one-line reason.
	if out, err := s.secretsEncrypt("rotate"); err == nil || !strings.Contains(out, "needs the rotation at stage prepare") {
		t.Errorf("rotate at reencrypt_finished: %v\n%s", err, out)
	}

	s.stop()
	if hits := inDB(t, s.dataDir, encValue); len(hits) != 0 {
		t.Errorf("the encrypted Secret's value is in plaintext in %v", hits)
	}
	// After a restart only the new key is there, and everything reads.
	s.start()
	wantSecret(t, s, "before", plainValue)
	wantSecret(t, s, "after", encValue)
}

// keyName is the active key's name in status output.
func keyName(t *testing.T, status string) string {
	t.Helper()
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "*" {
			return f[2]
		}
	}
	t.Fatalf("no active key in:\n%s", status)
	return ""
}

func TestSecretsEncryptionBadConfigAndLostKey(t *testing.T) {
	s := startServer(t, "--secrets-encryption")
	createSecret(t, s, "locked", distinct(t, "locked"))
	s.stop()
	cfgFile := filepath.Join(s.dataDir, "server", "cred", "encryption-config.json")
	good := mustRead(t, cfgFile)

	// A corrupt configuration stops the start with a message naming it.
	if err := os.WriteFile(cfgFile, []byte(`{"apiVersion": "apiserver.config.k8s.io/v1", "kind": `), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kelpBin, "server", "--data-dir", s.dataDir, "--https-listen-port", "0", "--bind-address", "127.0.0.1",
		"--write-kubeconfig", s.kubeconfig, "--disable-agent", "--secrets-encryption").CombinedOutput()
	if err == nil || !strings.Contains(string(out), cfgFile) || strings.Contains(string(out), "panic") {
		t.Fatalf("start with a corrupt config: %v\n%s", err, out)
	}

	// A key replaced by another: the Secret is a 500 that names it, and
	// the server keeps serving.
	other := make([]byte, 32)
	_, _ = rand.Read(other)
	i := strings.Index(good, `"secret": "`)
	if i < 0 {
		t.Fatalf("no secret in %s", good)
	}
	j := i + len(`"secret": "`)
	k := j + strings.Index(good[j:], `"`)
	if err := os.WriteFile(cfgFile, []byte(good[:j]+base64.StdEncoding.EncodeToString(other)+good[k:]), 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	_, err = s.client().CoreV1().Secrets("default").Get(ctxT(t), "locked", metav1.GetOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `"locked"`) {
		t.Fatalf("get with the key gone: %v", err)
	}
	if _, err := s.client().CoreV1().Namespaces().Get(ctxT(t), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("the server stopped serving: %v", err)
	}
}
