package secretsencrypt_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/embedded/etcd"
	"github.com/kelp-project/kelp/server/apiserver/storage"
	"github.com/kelp-project/kelp/server/secretsencrypt"
)

// BenchmarkSecretStore measures what encryption at rest adds to a Secret's
// create and get through the storage layer on embedded etcd: aescbc with
// upstream's transformer against plain protobuf.
func BenchmarkSecretStore(b *testing.B) {
	secrets := schema.GroupResource{Resource: "secrets"}
	for _, mode := range []string{"plain", "aescbc"} {
		b.Run(mode, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e, err := etcd.Start(ctx, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			var tr storage.Transformer
			if mode == "aescbc" {
				enc, err := secretsencrypt.Setup(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				tr = enc.TransformerFor(secrets)
			}
			s, err := storage.New(ctx, storage.Config{Client: e.Client, Resource: secrets, Prefix: "/registry/secrets/",
				Kind: corev1.SchemeGroupVersion.WithKind("Secret"), NewFunc: func() runtime.Object { return &corev1.Secret{} },
				Attrs: func(obj runtime.Object) (labels.Set, fields.Set, error) {
					return nil, fields.Set{"metadata.name": obj.(*corev1.Secret).Name}, nil
				}, Transformer: tr})
			if err != nil {
				b.Fatal(err)
			}
			value := make([]byte, 1024)
			b.Run("create", func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i), Namespace: "ns"}, Data: map[string][]byte{"v": value}}
					if _, err := s.Create(ctx, s.Key("ns", sec.Name), sec, false); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("get", func(b *testing.B) {
				for b.Loop() {
					if _, err := s.Get(ctx, s.Key("ns", "0")); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
