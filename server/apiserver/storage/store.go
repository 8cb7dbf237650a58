// Package storage keeps API objects in etcd. resourceVersion is the etcd mod
// revision of the object's key; every write is a transaction that compares
// revisions, which is all optimistic concurrency needs.
package storage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	rpctypes "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Config describes one resource's storage.
type Config struct {
	Client   *clientv3.Client
	Resource schema.GroupResource
	// Prefix is the etcd key prefix, ending in "/".
	Prefix string
	// Kind is the version the bytes are stored in.
	Kind    schema.GroupVersionKind
	NewFunc func() runtime.Object
	Attrs   AttrFunc
	// CacheWindow is how many recent events the watch cache keeps.
	CacheWindow int
	// Transformer, if set, encrypts values at rest (see transform.go).
	Transformer Transformer
	// JSON stores *unstructured.Unstructured objects (custom resources)
	// as JSON instead of protobuf.
	JSON bool
	// Decoded, if set, completes every object read from etcd: a custom
	// object is pruned and defaulted by its CRD's current schema on the
	// way out of storage, as upstream's storage decoder does.
	Decoded func(obj runtime.Object)
	// MixedVersions keeps each JSON object in the apiVersion it was
	// written in, read and written back alike (a Rewrite re-encrypts, it
	// does not convert): a custom resource whose CRD converts by webhook
	// may hold objects of an earlier storage version, which only the
	// webhook can turn into the current one, so its reader converts them
	// (apiserver's crdconversion.go). Without it an object is labelled
	// with Kind's version, the conversion of strategy None.
	MixedVersions bool
	// Feed is the etcd watch the store's watch cache is fed from, shared
	// with the other stores of the client (nil: a watch of its own).
	Feed *Feed
	// CacheEncoded keeps the watch cache's current objects as the bytes
	// etcd holds, decoded again for every read (a list, a watch's initial
	// events, Cached). It is for kinds whose objects are large, read
	// rarely, and whose readers keep what they need of them in their own
	// form: a CRD decoded is ~22 KB of small allocations against some
	// 5 KB stored, and a cluster with 100 CRDs held all of them decoded
	// only for the CRD controllers' one list a start.
	CacheEncoded bool
}

// Store is the storage of one resource: etcd for writes and consistent
// reads, and a watch cache for watches and resourceVersion=0 lists.
type Store struct {
	client  *clientv3.Client
	gr      schema.GroupResource
	prefix  string
	codec   *codec
	newFunc func() runtime.Object
	attrs   AttrFunc
	cache   *watchCache
	// transformer is nil for resources stored as plain protobuf.
	transformer Transformer
	decoded     func(obj runtime.Object)
	// cacheEncoded: see Config.CacheEncoded.
	cacheEncoded bool
	// stop ends the watch cache (and with it every watch) of a store that
	// is no longer served.
	stop context.CancelFunc
}

// New opens the store and starts its watch cache, which is ready when New
// returns.
func New(ctx context.Context, cfg Config) (*Store, error) {
	ctx, stop := context.WithCancel(ctx)
	s := &Store{
		stop:    stop,
		client:  cfg.Client,
		gr:      cfg.Resource,
		prefix:  cfg.Prefix,
		codec:   newCodec(cfg.Kind, cfg.JSON, cfg.MixedVersions),
		newFunc: cfg.NewFunc,
		attrs:   cfg.Attrs,

		transformer: cfg.Transformer,
		decoded:     cfg.Decoded,

		cacheEncoded: cfg.CacheEncoded,
	}
	window := cfg.CacheWindow
	if window <= 0 {
		window = 4096
	}
	c, err := newWatchCache(ctx, s, window, cfg.Feed)
	if err != nil {
		stop()
		return nil, err
	}
	s.cache = c
	return s, nil
}

// GroupResource is the resource the store keeps.
func (s *Store) GroupResource() schema.GroupResource { return s.gr }

// Stop ends the store's watch cache and its watches (their clients see
// the watch close); reads and writes still go to etcd. A store stops when
// its resource is no longer served (a deleted CRD).
func (s *Store) Stop() { s.stop() }

// Key is where an object lives: /registry/<resource>/<namespace>/<name>,
// or /registry/<resource>/<name> for cluster-scoped objects.
func (s *Store) Key(namespace, name string) string {
	if namespace == "" {
		return s.prefix + name
	}
	return s.prefix + namespace + "/" + name
}

// scope is the key prefix of a list or watch over one namespace or all.
func (s *Store) scope(namespace string) string {
	if namespace == "" {
		return s.prefix
	}
	return s.prefix + namespace + "/"
}

// Create stores obj if the key is free. dryRun runs every check but the write.
func (s *Store) Create(ctx context.Context, key string, obj runtime.Object, dryRun bool) (runtime.Object, error) {
	data, err := s.encode(obj)
	if err != nil {
		return nil, err
	}
	if dryRun {
		resp, err := s.client.Get(ctx, key, clientv3.WithCountOnly())
		if err != nil {
			return nil, etcdErr(err)
		}
		if resp.Count > 0 {
			return nil, apierrors.NewAlreadyExists(s.gr, nameOf(obj))
		}
		return obj, nil
	}
	if data, err = s.toStorage(ctx, data, key); err != nil {
		return nil, err
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).
		Commit()
	if err != nil {
		return nil, etcdErr(err)
	}
	if !resp.Succeeded {
		return nil, apierrors.NewAlreadyExists(s.gr, nameOf(obj))
	}
	return obj, setRV(obj, resp.Header.Revision)
}

// Get reads the current object from etcd (a quorum read).
func (s *Store) Get(ctx context.Context, key string) (runtime.Object, error) {
	obj, _, err := s.get(ctx, key)
	return obj, err
}

func (s *Store) get(ctx context.Context, key string) (runtime.Object, int64, error) {
	obj, rev, _, err := s.getRaw(ctx, key)
	return obj, rev, err
}

// stored is a value as read from etcd, once untransformed.
type stored struct {
	plain []byte // the encoded object, decrypted
	stale bool   // written with another key than the current write key
}

func (s *Store) getRaw(ctx context.Context, key string) (runtime.Object, int64, stored, error) {
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return nil, 0, stored{}, etcdErr(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, stored{}, apierrors.NewNotFound(s.gr, nameFromKey(key))
	}
	kv := resp.Kvs[0]
	obj, plain, stale, err := s.decodeStored(ctx, kv.Value, key, kv.ModRevision)
	return obj, kv.ModRevision, stored{plain: plain, stale: stale}, err
}

// Cached returns the object at key from the watch cache, which may lag a
// write by milliseconds: callers that must not miss a fresh object fall
// back to Get when it is absent.
func (s *Store) Cached(key string) (runtime.Object, bool) {
	s.cache.mu.RLock()
	defer s.cache.mu.RUnlock()
	return s.cache.getLocked(key)
}

// UpdateFunc computes the next state from the current one. It runs again
// whenever another writer got in first, so it must not have side effects.
type UpdateFunc func(current runtime.Object) (runtime.Object, error)

// Update is a read-modify-write loop: each attempt is a compare-and-swap on
// the key's mod revision. Callers that carry a client's resourceVersion
// check it inside fn and return Conflict themselves, so a stale client write
// never wins a retry. When fn returns an object whose deletion is complete
// (deletionTimestamp set, grace 0, no finalizers) the key is deleted.
func (s *Store) Update(ctx context.Context, key string, fn UpdateFunc, dryRun bool) (obj runtime.Object, deleted bool, err error) {
	for {
		cur, rev, raw, err := s.getRaw(ctx, key)
		if err != nil {
			return nil, false, err
		}
		next, err := fn(cur.DeepCopyObject())
		if err != nil {
			return nil, false, err
		}
		del := deletionComplete(next)
		op := clientv3.OpDelete(key)
		if !del {
			data, err := s.encode(next)
			if err != nil {
				return nil, false, err
			}
			if string(data) == string(raw.plain) && !raw.stale {
				// A no-op write keeps its resourceVersion and makes no
				// event, as upstream does. A stale value (another key,
				// or plaintext) is rewritten anyway: that is how
				// re-encryption moves every object to the current key.
				return cur, false, nil
			}
			if data, err = s.toStorage(ctx, data, key); err != nil {
				return nil, false, err
			}
			op = clientv3.OpPut(key, string(data))
		}
		if dryRun {
			return next, del, nil
		}
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(op).Commit()
		if err != nil {
			return nil, false, etcdErr(err)
		}
		if resp.Succeeded {
			return next, del, setRV(next, resp.Header.Revision)
		}
	}
}

// Delete removes the object after check approves the current state (UID and
// resourceVersion preconditions live in check).
func (s *Store) Delete(ctx context.Context, key string, check func(current runtime.Object) error, dryRun bool) (runtime.Object, error) {
	for {
		cur, rev, err := s.get(ctx, key)
		if err != nil {
			return nil, err
		}
		if check != nil {
			if err := check(cur); err != nil {
				return nil, err
			}
		}
		if dryRun {
			return cur, nil
		}
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return nil, etcdErr(err)
		}
		if resp.Succeeded {
			return cur, nil
		}
	}
}

// ListOptions selects what List and Watch return.
type ListOptions struct {
	Namespace       string
	ResourceVersion string
	RVMatch         metav1.ResourceVersionMatch
	Limit           int64
	Continue        string
	Predicate       Predicate
	// Watch only.
	SendInitialEvents *bool
	AllowBookmarks    bool
}

// ListResult is one page of a list.
type ListResult struct {
	Items           []runtime.Object
	ResourceVersion int64
	Continue        string
	// RemainingItemCount is set on paged etcd lists without selectors.
	RemainingItemCount *int64
}

// List serves resourceVersion=0 (and NotOlderThan) from the watch cache, and
// everything else as a consistent, paged read from etcd at one revision.
func (s *Store) List(ctx context.Context, o ListOptions) (*ListResult, error) {
	rv, err := ParseRV(o.ResourceVersion)
	if err != nil {
		return nil, err
	}
	if o.Continue == "" && o.ResourceVersion != "" && o.RVMatch != metav1.ResourceVersionMatchExact &&
		(rv == 0 || o.RVMatch == metav1.ResourceVersionMatchNotOlderThan || o.Limit == 0) {
		return s.cache.list(ctx, rv, o.Namespace, o.Predicate)
	}
	return s.listEtcd(ctx, o, rv)
}

// continueToken is upstream's (k8s.io/apiserver/pkg/storage): the
// revision the list is read at and the next key, relative to the
// resource's prefix. RV -1 is the inconsistent continuation a 410 hands
// out once the first page's revision is compacted: the rest of the list
// read at the latest revision.
type continueToken struct {
	APIVersion string `json:"v"`
	RV         int64  `json:"rv"`
	Start      string `json:"start"`
}

// inconsistentContinueRV marks a continue token that reads the remainder
// at the current revision (upstream's ResourceVersion -1).
const inconsistentContinueRV = -1

func encodeContinue(rv int64, start string) string {
	tok, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", RV: rv, Start: start})
	return base64.RawURLEncoding.EncodeToString(tok)
}

// continueCompacted is upstream's 410 for a continue token whose revision
// is compacted away: its Status carries a token that lists the rest,
// from the same key on, at the latest revision.
func continueCompacted(start string) error {
	err := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
	err.ErrStatus.ListMeta.Continue = encodeContinue(inconsistentContinueRV, start)
	return err
}

func (s *Store) listEtcd(ctx context.Context, o ListOptions, rv int64) (*ListResult, error) {
	scope := s.scope(o.Namespace)
	start := scope
	var atRev int64
	if o.Continue != "" {
		raw, err := base64.RawURLEncoding.DecodeString(o.Continue)
		var tok continueToken
		if err == nil {
			err = json.Unmarshal(raw, &tok)
		}
		if err != nil || tok.APIVersion != "meta.k8s.io/v1" || (tok.RV <= 0 && tok.RV != inconsistentContinueRV) || tok.Start == "" || strings.Contains(tok.Start, "..") {
			return nil, apierrors.NewBadRequest("continue key is not valid: " + o.Continue)
		}
		start = scope + tok.Start
		// An inconsistent continuation reads at the latest revision
		// (atRev 0 takes the first response's).
		atRev = max(tok.RV, 0)
	} else if o.RVMatch == metav1.ResourceVersionMatchExact || (rv > 0 && o.Limit > 0) {
		atRev = rv
	}
	end := clientv3.GetPrefixRangeEnd(scope)
	res := &ListResult{}
	var lastKey string
	more := false
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end)}
		if atRev > 0 {
			opts = append(opts, clientv3.WithRev(atRev))
		}
		want := int64(0)
		if o.Limit > 0 {
			want = o.Limit - int64(len(res.Items)) + 1
			opts = append(opts, clientv3.WithLimit(want))
		}
		resp, err := s.client.Get(ctx, start, opts...)
		if err != nil {
			if errors.Is(err, rpctypes.ErrFutureRev) {
				if o.Continue != "" {
					return nil, apierrors.NewBadRequest("continue key is not valid: it names a future revision")
				}
				return nil, tooLargeRV(atRev, s.cache.currentRV())
			}
			if o.Continue != "" && errors.Is(err, rpctypes.ErrCompacted) {
				return nil, continueCompacted(strings.TrimPrefix(start, scope))
			}
			return nil, etcdErr(err)
		}
		if atRev == 0 {
			atRev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if o.Limit > 0 && int64(len(res.Items)) == o.Limit {
				more = true
				break
			}
			lastKey = string(kv.Key)
			obj, _, _, err := s.decodeStored(ctx, kv.Value, lastKey, kv.ModRevision)
			if err != nil {
				if apierrors.IsInternalError(err) {
					return nil, err
				}
				return nil, apierrors.NewInternalError(err)
			}
			if o.Predicate.Matches(obj) {
				res.Items = append(res.Items, obj)
			}
		}
		if more || !resp.More || o.Limit == 0 {
			if o.Limit > 0 && resp.More && !more && int64(len(res.Items)) == o.Limit {
				more = true
			}
			if more && o.Predicate.Empty() {
				remaining := resp.Count - int64(len(resp.Kvs)) + 1
				if remaining > 0 {
					res.RemainingItemCount = &remaining
				}
			}
			break
		}
		// A selective predicate left the page short: read on from the
		// last key at the same revision, as upstream does.
		start = lastKey + "\x00"
	}
	res.ResourceVersion = atRev
	if more {
		res.Continue = encodeContinue(atRev, strings.TrimPrefix(lastKey, scope)+"\x00")
	}
	return res, nil
}

// Watch streams changes after the given resourceVersion from the watch
// cache. Every watch is served by the cache: etcd sees one watch per
// resource, however many clients there are.
func (s *Store) Watch(ctx context.Context, o ListOptions) (watch.Interface, error) {
	return s.cache.watch(ctx, o)
}

// CurrentRV is the revision the watch cache has caught up to.
func (s *Store) CurrentRV() int64 { return s.cache.currentRV() }

func (s *Store) encode(obj runtime.Object) ([]byte, error) {
	data, err := s.codec.encode(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if len(data) > MaxObjectBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("%s %q is %d bytes, over the %d byte limit for a stored object", s.gr.Resource, nameOf(obj), len(data), MaxObjectBytes))
	}
	return data, nil
}

func deletionComplete(obj runtime.Object) bool {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	g := acc.GetDeletionGracePeriodSeconds()
	return acc.GetDeletionTimestamp() != nil && len(acc.GetFinalizers()) == 0 && g != nil && *g == 0
}

func nameOf(obj runtime.Object) string {
	if acc, err := meta.Accessor(obj); err == nil {
		return acc.GetName()
	}
	return ""
}

func nameFromKey(key string) string {
	return key[strings.LastIndex(key, "/")+1:]
}
