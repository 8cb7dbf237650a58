package secretsencrypt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"

	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// StateFile records the rotation stage next to the configuration (k3s
// keeps it in an annotation on the server's Node; kelp has one server).
const StateFile = "encryption-state.json"

// The rotation stages, k3s's names: prepare adds a key, rotate makes it the
// write key, reencrypt rewrites every Secret with it and drops the old one.
// rotate-keys does all of it in one step.
const (
	StageStart             = "start"
	StagePrepare           = "prepare"
	StageRotate            = "rotate"
	StageReencryptActive   = "reencrypt_active"
	StageReencryptFinished = "reencrypt_finished"
)

// Rewriter rewrites every stored object of the resources match selects
// through the storage path (a compare-and-swap update that leaves the
// object as it is), so that each is written again with the current write
// key. It returns how many objects it saw.
type Rewriter func(ctx context.Context, match func(schema.GroupResource) bool) (int, error)

// Encryption is the loaded configuration of a running server and the
// rotation commands over it. Commands are serialised; the storage reads
// the configuration lock-free on every value.
type Encryption struct {
	dir     string
	mu      sync.Mutex // one command at a time, and the files with it
	loaded  atomic.Pointer[loadedConfig]
	rewrite Rewriter
	now     func() time.Time
}

type loadedConfig struct {
	cfg  *apiserverv1.EncryptionConfiguration
	ts   *transformers
	hash string // of the file's bytes as loaded
}

type state struct {
	Stage     string `json:"stage"`
	LastError string `json:"lastError,omitempty"`
}

// Setup loads <credDir>/encryption-config.json, creating it (with a new
// aescbc key for Secrets) and its directory on first start. A file that
// does not decode is an error that names it.
func Setup(credDir string) (*Encryption, error) {
	e := &Encryption{dir: credDir, now: time.Now}
	path := e.ConfigPath()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		cfg, err := DefaultConfig(e.now())
		if err != nil {
			return nil, err
		}
		data, err := EncodeConfig(cfg)
		if err != nil {
			return nil, err
		}
		if err := writeFile(path, data); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		logrus.Infof("secrets encryption: created %s with a new aescbc key", path)
	} else if err != nil {
		return nil, fmt.Errorf("encryption configuration %s: %w", path, err)
	}
	if _, err := e.reload(); err != nil {
		return nil, err
	}
	return e, nil
}

// ConfigPath is the configuration file.
func (e *Encryption) ConfigPath() string { return filepath.Join(e.dir, ConfigFile) }

// SetRewriter gives the commands the storage's re-encryption; the API
// server, which owns the stores, is built after Setup.
func (e *Encryption) SetRewriter(r Rewriter) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rewrite = r
}

// TransformerFor is the storage transformer of one resource.
func (e *Encryption) TransformerFor(gr schema.GroupResource) storage.Transformer {
	return resourceTransformer{e: e, gr: gr}
}

func (e *Encryption) current() *transformers { return e.loaded.Load().ts }

// readConfig decodes the file as it is on disk now.
func (e *Encryption) readConfig() (*apiserverv1.EncryptionConfiguration, string, error) {
	path := e.ConfigPath()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("encryption configuration %s: %w", path, err)
	}
	cfg, err := DecodeConfig(data)
	if err != nil {
		return nil, "", fmt.Errorf("encryption configuration %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return cfg, hex.EncodeToString(sum[:]), nil
}

// reload makes the file on disk the configuration every store uses. The
// swap is atomic: a value is read or written wholly under the old
// configuration or wholly under the new one.
func (e *Encryption) reload() (*apiserverv1.EncryptionConfiguration, error) {
	cfg, hash, err := e.readConfig()
	if err != nil {
		return nil, err
	}
	ts, err := buildTransformers(cfg)
	if err != nil {
		return nil, fmt.Errorf("encryption configuration %s: %w", e.ConfigPath(), err)
	}
	e.loaded.Store(&loadedConfig{cfg: cfg, ts: ts, hash: hash})
	return cfg, nil
}

// save writes cfg and loads it.
func (e *Encryption) save(cfg *apiserverv1.EncryptionConfiguration) error {
	if err := validate(cfg); err != nil {
		return err
	}
	data, err := EncodeConfig(cfg)
	if err != nil {
		return err
	}
	if err := writeFile(e.ConfigPath(), data); err != nil {
		return fmt.Errorf("writing %s: %w", e.ConfigPath(), err)
	}
	_, err = e.reload()
	return err
}

func (e *Encryption) readState() (state, error) {
	path := filepath.Join(e.dir, StateFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return state{Stage: StageStart}, nil
	}
	if err != nil {
		return state{}, err
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil || st.Stage == "" {
		return state{}, fmt.Errorf("%s: not a rotation state", path)
	}
	return st, nil
}

func (e *Encryption) writeState(st state) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(e.dir, StateFile), append(data, '\n'))
}

// secretsEntry is the index of the resources entry that covers Secrets:
// the one the rotation commands work on, as k3s's do.
func secretsEntry(cfg *apiserverv1.EncryptionConfiguration) (int, error) {
	for i, rc := range cfg.Resources {
		for _, r := range rc.Resources {
			if matches(r, schema.GroupResource{Resource: "secrets"}) {
				return i, nil
			}
		}
	}
	return 0, errors.New("the encryption configuration lists no entry for secrets")
}

// writeProvider is the index of the first non-identity provider of rc:
// the one whose keys rotate.
func writeProvider(rc apiserverv1.ResourceConfiguration) (int, string, error) {
	for i, p := range rc.Providers {
		kind, _, err := providerKeys(p)
		if err != nil {
			return 0, "", err
		}
		if kind != Identity {
			return i, kind, nil
		}
	}
	return 0, "", requestErr("the secrets entry of the encryption configuration has no encrypting provider (only identity)")
}

// KeyStatus is one key of the secrets entry.
type KeyStatus struct {
	Active bool   `json:"active"` // the write key
	Type   string `json:"type"`   // AES-CBC, AES-GCM, XSalsa20-POLY1305
	Name   string `json:"name"`
}

// Status is what `kelp secrets-encrypt status` prints.
type Status struct {
	Enabled bool   `json:"enabled"`
	Stage   string `json:"stage"`
	// ConfigHash is the sha256 of the configuration the server runs with;
	// FileHash that of the file on disk now. They differ when the file was
	// edited by hand since the last command.
	ConfigHash string      `json:"configHash"`
	FileHash   string      `json:"fileHash"`
	Keys       []KeyStatus `json:"keys"`
	LastError  string      `json:"lastError,omitempty"`
}

var keyTypes = map[string]string{AESCBC: "AES-CBC", AESGCM: "AES-GCM", Secretbox: "XSalsa20-POLY1305"}

// Status reports the running configuration. It takes no lock, so it
// answers while a re-encryption runs (stage reencrypt_active): the
// configuration is an atomic pointer and both files are replaced by
// rename.
func (e *Encryption) Status() (Status, error) {
	l := e.loaded.Load()
	st, err := e.readState()
	if err != nil {
		return Status{}, err
	}
	out := Status{Stage: st.Stage, LastError: st.LastError, ConfigHash: l.hash}
	if _, hash, err := e.readConfig(); err == nil {
		out.FileHash = hash
	}
	i, err := secretsEntry(l.cfg)
	if err != nil {
		return out, nil
	}
	for j, p := range l.cfg.Resources[i].Providers {
		kind, keys, _ := providerKeys(p)
		if j == 0 && kind != Identity {
			out.Enabled = true
		}
		for k, key := range keys {
			out.Keys = append(out.Keys, KeyStatus{Active: j == 0 && k == 0, Type: keyTypes[kind], Name: key.Name})
		}
	}
	return out, nil
}

// Request is one `kelp secrets-encrypt` command: a Stage (prepare,
// rotate, reencrypt, rotate-keys) or Enable set.
type Request struct {
	Stage  string `json:"stage,omitempty"`
	Enable *bool  `json:"enable,omitempty"`
	// Force skips the check that the rotation is at the right stage.
	Force bool `json:"force,omitempty"`
	// Skip keeps the old key after reencrypt (k3s's --skip).
	Skip bool `json:"skip,omitempty"`
}

// The commands' stage names in requests.
const (
	CmdPrepare    = "prepare"
	CmdRotate     = "rotate"
	CmdReencrypt  = "reencrypt"
	CmdRotateKeys = "rotate-keys"
)

// RequestError is a command that cannot run as asked (the wrong stage of
// a rotation, nothing to rotate to): the client's to fix, a 400.
type RequestError struct{ msg string }

func (e *RequestError) Error() string { return e.msg }

func requestErr(format string, args ...any) error { return &RequestError{fmt.Sprintf(format, args...)} }

func requireStage(cmd, cur string, force bool, allowed ...string) error {
	if force {
		return nil
	}
	for _, a := range allowed {
		if cur == a {
			return nil
		}
	}
	return requestErr("%s needs the rotation at stage %s, but it is at %s (--force skips this check)", cmd, strings.Join(allowed, " or "), cur)
}

// Do runs one command and says what it did. The configuration is read
// from disk first, so a hand edit is picked up (and checked) too.
func (e *Encryption) Do(ctx context.Context, req Request) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.readState()
	if err != nil {
		return "", err
	}
	cfg, _, err := e.readConfig()
	if err != nil {
		return "", err
	}
	idx, err := secretsEntry(cfg)
	if err != nil {
		return "", err
	}
	rc := &cfg.Resources[idx]
	if req.Enable != nil {
		return e.enable(cfg, rc, *req.Enable)
	}
	switch req.Stage {
	case CmdPrepare:
		if err := requireStage(req.Stage, st.Stage, req.Force, StageStart, StageReencryptFinished); err != nil {
			return "", err
		}
		key, err := e.addKey(rc, false)
		if err != nil {
			return "", err
		}
		if err := e.save(cfg); err != nil {
			return "", err
		}
		return fmt.Sprintf("prepared key %s", key), e.writeState(state{Stage: StagePrepare})
	case CmdRotate:
		if err := requireStage(req.Stage, st.Stage, req.Force, StagePrepare); err != nil {
			return "", err
		}
		pi, _, err := writeProvider(*rc)
		if err != nil {
			return "", err
		}
		_, keys, _ := providerKeys(rc.Providers[pi])
		if len(keys) < 2 {
			return "", requestErr("rotate needs a prepared key: run prepare first")
		}
		// As k3s: the newest (last) key becomes the write key.
		keys = append(keys[len(keys)-1:], keys[:len(keys)-1]...)
		setProviderKeys(&rc.Providers[pi], keys)
		if err := e.save(cfg); err != nil {
			return "", err
		}
		return fmt.Sprintf("rotated: new Secrets are written with key %s", keys[0].Name), e.writeState(state{Stage: StageRotate})
	case CmdReencrypt:
		if err := requireStage(req.Stage, st.Stage, req.Force, StageRotate); err != nil {
			return "", err
		}
		n, err := e.reencrypt(ctx, cfg, idx)
		if err != nil {
			return "", err
		}
		msg := fmt.Sprintf("re-encrypted %d objects", n)
		if !req.Skip {
			removed, err := e.dropKeys(cfg, idx, true)
			if err != nil {
				return "", err
			}
			msg += fmt.Sprintf("; removed key %v", removed)
		}
		return msg, e.writeState(state{Stage: StageReencryptFinished})
	case CmdRotateKeys:
		if err := requireStage(req.Stage, st.Stage, req.Force, StageStart, StageReencryptFinished); err != nil {
			return "", err
		}
		// The new key is the write key at once, the old ones still read;
		// only once every object is rewritten do the old keys go.
		key, err := e.addKey(rc, true)
		if err != nil {
			return "", err
		}
		if err := e.save(cfg); err != nil {
			return "", err
		}
		n, err := e.reencrypt(ctx, cfg, idx)
		if err != nil {
			return "", err
		}
		removed, err := e.dropKeys(cfg, idx, false)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("rotated to key %s, re-encrypted %d objects, removed keys %v", key, n, removed), e.writeState(state{Stage: StageReencryptFinished})
	}
	return "", requestErr("unknown command %q", req.Stage)
}

// enable puts the encrypting provider first (enable) or identity first
// (disable), for new writes; existing values change on reencrypt.
func (e *Encryption) enable(cfg *apiserverv1.EncryptionConfiguration, rc *apiserverv1.ResourceConfiguration, on bool) (string, error) {
	pi, kind, err := writeProvider(*rc)
	if err != nil {
		return "", err
	}
	var first apiserverv1.ProviderConfiguration
	if on {
		first = rc.Providers[pi]
	} else {
		first = apiserverv1.ProviderConfiguration{Identity: &apiserverv1.IdentityConfiguration{}}
	}
	rest := []apiserverv1.ProviderConfiguration{first}
	for i, p := range rc.Providers {
		if (on && i == pi) || (!on && p.Identity != nil) {
			continue
		}
		rest = append(rest, p)
	}
	if on && !hasIdentity(rest) {
		rest = append(rest, apiserverv1.ProviderConfiguration{Identity: &apiserverv1.IdentityConfiguration{}})
	}
	rc.Providers = rest
	if err := e.save(cfg); err != nil {
		return "", err
	}
	if on {
		return fmt.Sprintf("secrets encryption enabled (%s): new writes are encrypted; reencrypt --force encrypts the existing Secrets", kind), nil
	}
	return "secrets encryption disabled: new writes are plaintext; reencrypt --force --skip decrypts the existing Secrets", nil
}

func hasIdentity(ps []apiserverv1.ProviderConfiguration) bool {
	for _, p := range ps {
		if p.Identity != nil {
			return true
		}
	}
	return false
}

// addKey adds a new key to the write provider: first (the write key) or
// last (prepared, only read until rotate).
func (e *Encryption) addKey(rc *apiserverv1.ResourceConfiguration, first bool) (string, error) {
	pi, kind, err := writeProvider(*rc)
	if err != nil {
		return "", err
	}
	if pi != 0 {
		return "", requestErr("secrets encryption is disabled (identity is the first provider): enable it first")
	}
	taken := map[string]bool{}
	for _, p := range rc.Providers {
		_, keys, _ := providerKeys(p)
		for _, k := range keys {
			taken[k.Name] = true
		}
	}
	key, err := NewKey(kind, e.now(), taken)
	if err != nil {
		return "", err
	}
	_, keys, _ := providerKeys(rc.Providers[pi])
	if first {
		keys = append([]apiserverv1.Key{key}, keys...)
	} else {
		keys = append(keys, key)
	}
	setProviderKeys(&rc.Providers[pi], keys)
	return key.Name, nil
}

// reencrypt rewrites every object the entry covers with the loaded write
// key. A failure is kept in the state, so status shows it.
func (e *Encryption) reencrypt(ctx context.Context, cfg *apiserverv1.EncryptionConfiguration, idx int) (int, error) {
	if e.rewrite == nil {
		return 0, errors.New("re-encryption is not available: no storage to rewrite")
	}
	if err := e.writeState(state{Stage: StageReencryptActive}); err != nil {
		return 0, err
	}
	n, err := e.rewrite(ctx, func(gr schema.GroupResource) bool {
		// The first entry that lists a resource is the one that
		// encrypts it.
		for i, rc := range cfg.Resources {
			for _, r := range rc.Resources {
				if matches(r, gr) {
					return i == idx
				}
			}
		}
		return false
	})
	if err != nil {
		err = fmt.Errorf("re-encryption stopped after %d objects: %w", n, err)
		_ = e.writeState(state{Stage: StageReencryptActive, LastError: err.Error()})
		return n, err
	}
	logrus.Infof("secrets encryption: re-encrypted %d objects", n)
	return n, nil
}

// dropKeys removes keys nothing is written with any more, once every
// object has been rewritten: the last key of the write provider (lastOnly,
// k3s's reencrypt), or every key but the write key, in every provider of
// the entry (rotate-keys). Providers left without keys go.
func (e *Encryption) dropKeys(cfg *apiserverv1.EncryptionConfiguration, idx int, lastOnly bool) ([]string, error) {
	rc := &cfg.Resources[idx]
	pi, _, err := writeProvider(*rc)
	if err != nil {
		return nil, err
	}
	var removed []string
	var kept []apiserverv1.ProviderConfiguration
	for i, p := range rc.Providers {
		kind, keys, _ := providerKeys(p)
		if kind == Identity {
			kept = append(kept, p)
			continue
		}
		switch {
		case lastOnly && i == pi && len(keys) > 1:
			removed = append(removed, keys[len(keys)-1].Name)
			keys = keys[:len(keys)-1]
		case !lastOnly && i == pi:
			for _, k := range keys[1:] {
				removed = append(removed, k.Name)
			}
			keys = keys[:1]
		case !lastOnly && i > pi:
			for _, k := range keys {
				removed = append(removed, k.Name)
			}
			keys = nil
		}
		if len(keys) == 0 {
			continue
		}
		setProviderKeys(&p, keys)
		kept = append(kept, p)
	}
	rc.Providers = kept
	if err := e.save(cfg); err != nil {
		return nil, err
	}
	if len(removed) > 0 {
		logrus.Infof("secrets encryption: removed keys %v", removed)
	}
	return removed, nil
}
