package secretsencrypt

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/value"
)

// FuzzDecodeConfig: no input makes decoding, or building transformers from
// what decoded, panic; whatever decodes builds.
func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration","resources":[{"resources":["secrets"],"providers":[{"aescbc":{"keys":[{"name":"k","secret":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}]}},{"identity":{}}]}]}`))
	f.Add([]byte("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: ['*.*']\n  providers:\n  - secretbox: {keys: [{name: s, secret: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=}]}\n"))
	f.Add([]byte(`{"resources":[{"providers":[{"aesgcm":{"keys":[{"name":"","secret":""}]}}]}]}`))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := DecodeConfig(data)
		if err != nil {
			return
		}
		ts, err := buildTransformers(cfg)
		if err != nil {
			t.Fatalf("decoded but does not build: %v", err)
		}
		tr := ts.forResource(schema.GroupResource{Resource: "secrets"})
		if tr == nil {
			return
		}
		// Stored objects are protobuf, which never starts with the
		// encrypted prefix identity refuses to read.
		plain := append([]byte("k8s\x00"), data...)
		ctx, key := context.Background(), value.DefaultContext("/registry/secrets/ns/a")
		out, err := tr.TransformToStorage(ctx, plain, key)
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		back, _, err := tr.TransformFromStorage(ctx, out, key)
		if err != nil || string(back) != string(plain) {
			t.Fatalf("round trip: %q %v", back, err)
		}
	})
}
