package secretsencrypt

import (
	"context"
	"crypto/aes"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/apiserver/pkg/storage/value"
	aestransformer "k8s.io/apiserver/pkg/storage/value/encrypt/aes"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	"k8s.io/apiserver/pkg/storage/value/encrypt/secretbox"
)

// The prefixes upstream writes before each provider's ciphertext (and then
// "<key name>:"): values are interchangeable with kube-apiserver's.
const (
	aesCBCPrefix    = "k8s:enc:aescbc:v1:"
	aesGCMPrefix    = "k8s:enc:aesgcm:v1:"
	secretboxPrefix = "k8s:enc:secretbox:v1:"
)

// transformers is one loaded configuration: for each resources entry, the
// upstream prefix transformer over its providers in order (the first
// writes, all read).
type transformers struct {
	entries []entry
	// byResource memoises forResource (GroupResource -> value.Transformer,
	// nil included): it runs on every value of every resource.
	byResource sync.Map
}

type entry struct {
	resources []string
	t         value.Transformer
}

func buildTransformers(cfg *apiserverv1.EncryptionConfiguration) (*transformers, error) {
	out := &transformers{}
	for i, rc := range cfg.Resources {
		var pts []value.PrefixTransformer
		for j, p := range rc.Providers {
			pt, err := providerTransformer(p)
			if err != nil {
				return nil, fmt.Errorf("resources[%d].providers[%d]: %w", i, j, err)
			}
			pts = append(pts, pt)
		}
		out.entries = append(out.entries, entry{resources: rc.Resources,
			t: value.NewPrefixTransformers(fmt.Errorf("no provider in the encryption configuration reads this value"), pts...)})
	}
	return out, nil
}

// providerTransformer is upstream's construction (encryptionconfig's
// aesPrefixTransformer and secretboxPrefixTransformer): one prefix per
// provider, then one per key name.
func providerTransformer(p apiserverv1.ProviderConfiguration) (value.PrefixTransformer, error) {
	kind, keys, err := providerKeys(p)
	if err != nil {
		return value.PrefixTransformer{}, err
	}
	if kind == Identity {
		// Reads anything but upstream's encrypted prefix, so plaintext
		// written before encryption was enabled stays readable, and an
		// encrypted value is passed on to the providers after it.
		return value.PrefixTransformer{Prefix: []byte{}, Transformer: identity.NewEncryptCheckTransformer()}, nil
	}
	var keyed []value.PrefixTransformer
	for _, k := range keys {
		raw, err := base64.StdEncoding.DecodeString(k.Secret)
		if err != nil {
			return value.PrefixTransformer{}, fmt.Errorf("key %q: %w", k.Name, err)
		}
		var t value.Transformer
		switch kind {
		case Secretbox:
			if len(raw) != 32 {
				return value.PrefixTransformer{}, fmt.Errorf("key %q: secretbox keys are 32 bytes, not %d", k.Name, len(raw))
			}
			t = secretbox.NewSecretboxTransformer([32]byte(raw))
		default:
			block, err := aes.NewCipher(raw)
			if err != nil {
				return value.PrefixTransformer{}, fmt.Errorf("key %q: %w", k.Name, err)
			}
			if kind == AESCBC {
				t = aestransformer.NewCBCTransformer(block)
			} else if t, err = aestransformer.NewGCMTransformer(block); err != nil {
				return value.PrefixTransformer{}, fmt.Errorf("key %q: %w", k.Name, err)
			}
		}
		keyed = append(keyed, value.PrefixTransformer{Prefix: []byte(k.Name + ":"), Transformer: t})
	}
	prefix := map[string]string{AESCBC: aesCBCPrefix, AESGCM: aesGCMPrefix, Secretbox: secretboxPrefix}[kind]
	return value.PrefixTransformer{Prefix: []byte(prefix),
		Transformer: value.NewPrefixTransformers(fmt.Errorf("no %s key in the encryption configuration matches the value's key name", kind), keyed...)}, nil
}

// forResource is the transformer of the first entry that lists gr, as
// upstream picks it, or nil: a resource no entry lists is stored as is.
func (ts *transformers) forResource(gr schema.GroupResource) value.Transformer {
	if t, ok := ts.byResource.Load(gr); ok {
		tr, _ := t.(value.Transformer) // a stored nil: no entry lists gr
		return tr
	}
	var found value.Transformer
	for _, e := range ts.entries {
		if slices.ContainsFunc(e.resources, func(r string) bool { return matches(r, gr) }) {
			found = e.t
			break
		}
	}
	ts.byResource.Store(gr, found)
	return found
}

// matches is upstream's resource naming: "secrets" (the core group),
// "deployments.apps", "*." (every core resource), "*.apps", "*.*".
func matches(name string, gr schema.GroupResource) bool {
	switch {
	case name == "*.*":
		return true
	case name == "*.":
		return gr.Group == ""
	case strings.HasPrefix(name, "*."):
		return gr.Group == name[2:]
	}
	return name == gr.String()
}

// resourceTransformer is what a store holds: it looks the configuration up
// on every value, so a reload reaches every store at once.
type resourceTransformer struct {
	e  *Encryption
	gr schema.GroupResource
}

func (r resourceTransformer) TransformToStorage(ctx context.Context, data []byte, key string) ([]byte, error) {
	t := r.e.current().forResource(r.gr)
	if t == nil {
		return data, nil
	}
	return t.TransformToStorage(ctx, data, value.DefaultContext(key))
}

func (r resourceTransformer) TransformFromStorage(ctx context.Context, data []byte, key string) ([]byte, bool, error) {
	t := r.e.current().forResource(r.gr)
	if t == nil {
		// Not (or no longer) encrypted: a value that still carries an
		// encrypted prefix gets identity's clear error, not garbage.
		return identity.NewEncryptCheckTransformer().TransformFromStorage(ctx, data, value.DefaultContext(key))
	}
	return t.TransformFromStorage(ctx, data, value.DefaultContext(key))
}
