package storage

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
)

// Transformer changes the bytes of an object on their way to and from etcd
// (encryption at rest). The etcd key is the authenticated data, as upstream
// passes it: a value copied under another key does not decrypt.
//
// TransformFromStorage reports stale when the value was not written the way
// TransformToStorage writes now (another key, or plaintext): an update then
// rewrites it even if the object did not change, which is how re-encryption
// works.
type Transformer interface {
	TransformToStorage(ctx context.Context, data []byte, key string) ([]byte, error)
	TransformFromStorage(ctx context.Context, data []byte, key string) (out []byte, stale bool, err error)
}

// fromStorage untransforms a stored value. Every read path (Get, List, the
// watch cache's list and events, the compare-and-swap reads) comes through
// here, so no path can hand out ciphertext or skip a key check.
func (s *Store) fromStorage(ctx context.Context, data []byte, key string) ([]byte, bool, error) {
	if s.transformer == nil {
		return data, false, nil
	}
	out, stale, err := s.transformer.TransformFromStorage(ctx, data, key)
	if err != nil {
		return nil, false, apierrors.NewInternalError(fmt.Errorf("%s %q: cannot read the stored value (decryption failed; is its key missing from the encryption configuration?): %w", s.gr.String(), nameFromKey(key), err))
	}
	return out, stale, nil
}

func (s *Store) toStorage(ctx context.Context, data []byte, key string) ([]byte, error) {
	if s.transformer == nil {
		return data, nil
	}
	out, err := s.transformer.TransformToStorage(ctx, data, key)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s %q: encrypting the value: %w", s.gr.String(), nameFromKey(key), err))
	}
	return out, nil
}

// decodeStored untransforms and decodes one stored value. A value that
// does not decode is a 500 naming the object, as one that does not
// decrypt: with the wrong key, AES-CBC yields garbage with valid padding
// about once in 256 tries, and that garbage only fails here.
func (s *Store) decodeStored(ctx context.Context, data []byte, key string, rev int64) (obj runtime.Object, plain []byte, stale bool, err error) {
	plain, stale, err = s.fromStorage(ctx, data, key)
	if err != nil {
		return nil, nil, false, err
	}
	obj, err = s.codec.decode(plain, s.newFunc(), rev)
	if err != nil {
		return nil, nil, false, apierrors.NewInternalError(fmt.Errorf("%s %q: %w", s.gr.String(), nameFromKey(key), err))
	}
	if s.decoded != nil {
		s.decoded(obj)
	}
	return obj, plain, stale, nil
}

// Rewrite writes every object of the resource again through Update, so
// that values whose transformer reports them stale (written with an older
// key, or in plaintext) are stored with the current write key. Each
// rewrite is a compare-and-swap that retries on conflict: a write made
// meanwhile is never lost, only re-read. Objects deleted meanwhile are
// skipped. It returns how many objects it saw.
func (s *Store) Rewrite(ctx context.Context) (int, error) {
	start := s.prefix
	end := clientv3.GetPrefixRangeEnd(s.prefix)
	n := 0
	for {
		resp, err := s.client.Get(ctx, start, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(500))
		if err != nil {
			return n, etcdErr(err)
		}
		for _, kv := range resp.Kvs {
			_, _, err := s.Update(ctx, string(kv.Key), func(cur runtime.Object) (runtime.Object, error) { return cur, nil }, false)
			if err != nil && !apierrors.IsNotFound(err) {
				return n, err
			}
			n++
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return n, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
