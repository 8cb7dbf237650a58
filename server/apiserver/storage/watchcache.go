package storage

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

const (
	// freshnessTimeout bounds how long a request that names a future
	// resourceVersion waits for the cache to catch up.
	freshnessTimeout = 3 * time.Second
	// bookmarkInterval is how often idle watchers learn the current
	// revision, so a reconnect rarely falls out of the event window:
	// upstream's cacher sends bookmarks once a minute
	// (defaultBookmarkFrequency). Each tick is one progress request on
	// the watch caches' shared etcd stream (sharedStream), which etcd
	// answers to every cache on it, and a bookmark to every watcher that
	// asked; at 5 s that kept an idle node busy. A read that needs a
	// newer revision asks etcd itself (waitFresh).
	bookmarkInterval = time.Minute
	// watcherBuffer events may queue for one slow watcher; past that the
	// watcher is closed and its client resumes from its last revision.
	// The queue grows as events wait and is let go once drained: most
	// watchers never hold more than a few, and a fixed buffer of this
	// size cost 72 KiB for each of the hundreds of watches a cluster
	// with many CRDs holds (an informer of the garbage collector each).
	watcherBuffer = 1024
	// InitialEventsAnnotation marks the bookmark that ends a WatchList's
	// initial events.
	InitialEventsAnnotation = "k8s.io/initial-events-end"
)

// cacheEvent is one change. Watchers get it decoded. The window keeps
// decoded only what the cache holds anyway, the current object: an
// object a later event superseded, an event's previous object and a
// deleted object's last state are kept as the bytes etcd gave (raw,
// prevRaw), decoded again if a watch from an old revision replays them
// (materialize). A decoded object is several times its stored bytes (a
// CRD's schema: ~11 KB against ~3 KB), and most events are never
// replayed.
type cacheEvent struct {
	typ  watch.EventType
	key  string
	obj  runtime.Object // for Deleted: the last state, at the delete revision
	prev runtime.Object // nil for Added
	rv   int64

	raw     []byte // in the window: obj's stored value once obj is superseded
	prevRaw []byte // in the window: prev's stored value (Modified, Deleted)
	prevRV  int64
}

// watchCache mirrors one resource prefix of etcd in memory, fed by a single
// etcd watch. It holds the current objects and a window of recent events:
// every client watch and resourceVersion=0 list is served from here, so etcd
// sees one watch per resource however many clients there are.
//
// Invariant: objects is the state of the prefix at revision rv, and window
// holds every change in (oldest, rv].
type watchCache struct {
	s       *Store
	mu      sync.RWMutex
	rv      int64
	oldest  int64
	objects map[string]runtime.Object
	// encoded holds the current objects instead of objects when the store
	// keeps them encoded (Config.CacheEncoded).
	encoded  map[string]storedValue
	window   []cacheEvent // ring buffer, grown up to capacity
	capacity int
	start    int
	count    int
	watchers map[*cacheWatcher]struct{}
	advanced chan struct{} // closed and replaced whenever rv moves
	wctx     context.Context
}

// storedValue is an object as etcd holds it, at its mod revision.
type storedValue struct {
	raw []byte
	rv  int64
}

// newWatchCache lists s's prefix and joins feed (a feed of its own if
// nil) until ctx ends.
func newWatchCache(ctx context.Context, s *Store, capacity int, feed *Feed) (*watchCache, error) {
	c := &watchCache{
		s:        s,
		capacity: capacity,
		watchers: map[*cacheWatcher]struct{}{},
		advanced: make(chan struct{}),
	}
	c.wctx = sharedStream(ctx)
	if feed == nil {
		feed = NewFeed(ctx, s.client, s.prefix)
	}
	if err := feed.join(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// streamKey is the metadata that puts every feed's etcd watch (feed.go)
// on one gRPC stream: etcd's client keys its streams by the outgoing
// metadata of the watch's context, and each watch is a substream whose
// own context still ends it.
const streamKey = "kelp-watch-cache"

// sharedStream puts ctx on the feeds' shared etcd stream: the API
// server's one feed, and the feed of any store opened without it. A
// stream of its own cost seven goroutines (the client's stream loop, the
// in-process gRPC adapter's pipe, etcd's send and receive loops...). A
// progress request (RequestProgress, a cache's waitFresh) is a request of
// the stream, answered to every watch on it.
func sharedStream(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, streamKey, "shared")
}

func (c *watchCache) relist(ctx context.Context) error {
	resp, err := c.s.client.Get(ctx, c.s.prefix, clientv3.WithPrefix())
	if err != nil {
		return etcdErr(err)
	}
	objects := make(map[string]runtime.Object, len(resp.Kvs))
	encoded := map[string]storedValue{}
	for _, kv := range resp.Kvs {
		if c.s.cacheEncoded {
			encoded[string(kv.Key)] = storedValue{raw: bytes.Clone(kv.Value), rv: kv.ModRevision}
			continue
		}
		obj, _, _, err := c.s.decodeStored(ctx, kv.Value, string(kv.Key), kv.ModRevision)
		if err != nil {
			logrus.WithError(err).Warnf("watch cache: skipping undecodable %s", kv.Key)
			continue
		}
		objects[string(kv.Key)] = obj
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objects, c.encoded = objects, encoded
	c.rv = resp.Header.Revision
	c.oldest = resp.Header.Revision
	c.start, c.count = 0, 0
	// Watchers cannot be told what they missed across a relist: end them,
	// and their clients resume (or relist on 410).
	c.endWatchersLocked()
	c.broadcastLocked()
	return nil
}

// endWatchersLocked ends every watch of the cache.
func (c *watchCache) endWatchersLocked() {
	for w := range c.watchers {
		w.terminate()
		delete(c.watchers, w)
	}
}

// RequestProgress asks etcd every bookmarkInterval, until ctx ends, to
// confirm the revision the watch caches' shared stream has reached; the
// answer advances every cache's rv and becomes bookmarks. Whoever opens
// the stores of a client runs it once for that client.
func RequestProgress(ctx context.Context, client *clientv3.Client) {
	t := time.NewTicker(bookmarkInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = client.RequestProgress(sharedStream(ctx))
		}
	}
}

// getLocked returns the current object at key: the cache's own, or a
// fresh decoding of its stored bytes if the store keeps them encoded (an
// object that does not decode is reported and treated as absent; a read
// from etcd gives its error).
func (c *watchCache) getLocked(key string) (runtime.Object, bool) {
	if !c.s.cacheEncoded {
		obj, ok := c.objects[key]
		return obj, ok
	}
	v, ok := c.encoded[key]
	if !ok {
		return nil, false
	}
	obj, _, _, err := c.s.decodeStored(c.wctx, v.raw, key, v.rv)
	if err != nil {
		logrus.WithError(err).Warnf("watch cache: cannot decode %s", key)
		return nil, false
	}
	return obj, true
}

// current returns the cached object at key if it is the one of revision
// rev: an event's previous value is, almost always, the object the cache
// holds, and sharing it rather than decoding the previous value again
// halves what the window holds (each event kept two decoded objects, the
// previous one a copy of the last event's). A cache that keeps objects
// encoded has none to share.
func (c *watchCache) current(key string, rev int64) runtime.Object {
	c.mu.RLock()
	obj := c.objects[key]
	c.mu.RUnlock()
	if obj == nil {
		return nil
	}
	if acc, err := meta.Accessor(obj); err != nil || acc.GetResourceVersion() != formatRV(rev) {
		return nil
	}
	return obj
}

func (c *watchCache) apply(ev *clientv3.Event) {
	key := string(ev.Kv.Key)
	rev := ev.Kv.ModRevision
	ce := cacheEvent{key: key, rv: rev}
	var err error
	if ev.PrevKv != nil {
		ce.prev = c.current(key, ev.PrevKv.ModRevision)
		if ce.prev == nil {
			ce.prev, _, _, err = c.s.decodeStored(c.wctx, ev.PrevKv.Value, key, ev.PrevKv.ModRevision)
			if err != nil {
				logrus.WithError(err).Warnf("watch cache: bad previous value of %s", key)
			}
		}
	}
	kept := cacheEvent{key: key, rv: rev} // what the window keeps
	if ev.PrevKv != nil {
		kept.prevRaw, kept.prevRV = c.storedPrev(key, ev.PrevKv.Value, ev.PrevKv.ModRevision), ev.PrevKv.ModRevision
	}
	switch ev.Type {
	case clientv3.EventTypeDelete:
		if ce.prev == nil {
			return
		}
		ce.typ = watch.Deleted
		ce.obj = ce.prev.DeepCopyObject()
		_ = setRV(ce.obj, rev)
	default:
		ce.obj, _, _, err = c.s.decodeStored(c.wctx, ev.Kv.Value, key, rev)
		if err != nil {
			logrus.WithError(err).Warnf("watch cache: bad value of %s", key)
			return
		}
		ce.typ = watch.Modified
		if ev.IsCreate() {
			ce.typ = watch.Added
			ce.prev = nil
			kept.prevRaw = nil
		}
		if c.s.cacheEncoded {
			kept.raw = bytes.Clone(ev.Kv.Value)
		} else {
			kept.obj = ce.obj
		}
	}
	kept.typ = ce.typ
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case ce.typ == watch.Deleted:
		delete(c.objects, key)
		delete(c.encoded, key)
	case c.s.cacheEncoded:
		c.encoded[key] = storedValue{raw: kept.raw, rv: rev}
	default:
		c.objects[key] = ce.obj
	}
	if kept.prevRaw != nil {
		c.supersededLocked(key, kept.prevRV, kept.prevRaw)
	}
	if c.count == len(c.window) && len(c.window) < c.capacity {
		// The window grows on demand: most resources of an idle cluster
		// never see more than a handful of events.
		grown := make([]cacheEvent, min(max(2*len(c.window), 16), c.capacity))
		for i := 0; i < c.count; i++ {
			grown[i] = c.window[(c.start+i)%len(c.window)]
		}
		c.window, c.start = grown, 0
	}
	if c.count == len(c.window) {
		c.oldest = c.window[c.start].rv
		c.start = (c.start + 1) % len(c.window)
		c.count--
	}
	c.window[(c.start+c.count)%len(c.window)] = kept
	c.count++
	c.rv = rev
	for w := range c.watchers {
		if !w.send(ce) {
			delete(c.watchers, w)
		}
	}
	c.broadcastLocked()
}

// storedPrev is an event's previous value as the window keeps it: the
// bytes a cache that keeps its objects encoded holds already (the value
// at that revision), or a copy.
func (c *watchCache) storedPrev(key string, value []byte, rev int64) []byte {
	if c.s.cacheEncoded {
		c.mu.RLock()
		v, ok := c.encoded[key]
		c.mu.RUnlock()
		if ok && v.rv == rev {
			return v.raw
		}
	}
	return bytes.Clone(value)
}

// supersededLocked lets go of the decoded object the window's event at
// rev holds for key, now that a later event replaced it: raw, its stored
// value, stands for it.
func (c *watchCache) supersededLocked(key string, rev int64, raw []byte) {
	// The window is in revision order.
	i := sort.Search(c.count, func(i int) bool { return c.window[(c.start+i)%len(c.window)].rv >= rev })
	for ; i < c.count; i++ {
		ev := &c.window[(c.start+i)%len(c.window)]
		if ev.rv != rev {
			return
		}
		if ev.key == key && ev.typ != watch.Deleted {
			ev.obj, ev.raw = nil, raw
			return
		}
	}
}

// materialize decodes what the window kept as bytes, for a watcher.
func (c *watchCache) materialize(ev cacheEvent) (cacheEvent, error) {
	var err error
	if ev.prev == nil && ev.prevRaw != nil {
		if ev.prev, _, _, err = c.s.decodeStored(c.wctx, ev.prevRaw, ev.key, ev.prevRV); err != nil {
			return ev, err
		}
	}
	switch {
	case ev.obj != nil:
	case ev.typ == watch.Deleted:
		ev.obj = ev.prev.DeepCopyObject()
		_ = setRV(ev.obj, ev.rv)
	default:
		if ev.obj, _, _, err = c.s.decodeStored(c.wctx, ev.raw, ev.key, ev.rv); err != nil {
			return ev, err
		}
	}
	ev.raw, ev.prevRaw = nil, nil
	return ev, nil
}

func (c *watchCache) progress(rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev > c.rv {
		c.rv = rev
	}
	bm := cacheEvent{typ: watch.Bookmark, rv: c.rv}
	for w := range c.watchers {
		if w.bookmarks && !w.send(bm) {
			delete(c.watchers, w)
		}
	}
	c.broadcastLocked()
}

// Compacted drops events at or below rev: a watch from there is answered
// with 410 exactly as etcd would answer it.
func (c *watchCache) compacted(rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.count > 0 && c.window[c.start].rv <= rev {
		c.window[c.start] = cacheEvent{}
		c.start = (c.start + 1) % len(c.window)
		c.count--
	}
	if rev > c.oldest {
		c.oldest = min(rev, c.rv)
	}
}

func (c *watchCache) broadcastLocked() {
	close(c.advanced)
	c.advanced = make(chan struct{})
}

func (c *watchCache) currentRV() int64 {
	if c == nil {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rv
}

// waitFresh blocks until the cache has seen revision rv, asking etcd for
// progress so a quiet prefix still catches up with the global revision. It
// returns with the read lock held.
func (c *watchCache) waitFresh(ctx context.Context, rv int64) error {
	deadline := time.After(freshnessTimeout)
	asked := false
	for {
		c.mu.RLock()
		if c.rv >= rv {
			return nil
		}
		ch := c.advanced
		c.mu.RUnlock()
		if !asked {
			_ = c.s.client.RequestProgress(c.wctx)
			asked = true
		}
		select {
		case <-ch:
		case <-time.After(200 * time.Millisecond):
			asked = false
		case <-deadline:
			return tooLargeRV(rv, c.currentRV())
		case <-ctx.Done():
			return apierrors.NewTimeoutError("request did not complete within the allowed duration", 0)
		}
	}
}

func (c *watchCache) list(ctx context.Context, rv int64, namespace string, pred Predicate) (*ListResult, error) {
	if err := c.waitFresh(ctx, rv); err != nil {
		return nil, err
	}
	defer c.mu.RUnlock()
	return &ListResult{Items: c.snapshotLocked(namespace, pred), ResourceVersion: c.rv}, nil
}

func (c *watchCache) snapshotLocked(namespace string, pred Predicate) []runtime.Object {
	scope := c.s.scope(namespace)
	keys := make([]string, 0, len(c.objects)+len(c.encoded))
	for k := range c.objects {
		if strings.HasPrefix(k, scope) {
			keys = append(keys, k)
		}
	}
	for k := range c.encoded {
		if strings.HasPrefix(k, scope) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	items := make([]runtime.Object, 0, len(keys))
	for _, k := range keys {
		if obj, ok := c.getLocked(k); ok && pred.Matches(obj) {
			items = append(items, obj)
		}
	}
	return items
}

func (c *watchCache) watch(ctx context.Context, o ListOptions) (watch.Interface, error) {
	rv, err := ParseRV(o.ResourceVersion)
	if err != nil {
		return nil, err
	}
	w := &cacheWatcher{
		wake:      make(chan struct{}, 1),
		out:       make(chan watch.Event),
		done:      make(chan struct{}),
		scope:     c.s.scope(o.Namespace),
		pred:      o.Predicate,
		bookmarks: o.AllowBookmarks,
		newFunc:   c.s.newFunc,
		cache:     c,
	}
	// Which history the watcher starts with, following upstream:
	// sendInitialEvents=true, or no resourceVersion (or 0) on a legacy
	// watch, replays the current state as ADDED; a resourceVersion N
	// replays the window after N.
	initial := (o.SendInitialEvents != nil && *o.SendInitialEvents) ||
		(o.SendInitialEvents == nil && rv == 0)
	if err := c.waitFresh(ctx, rv); err != nil {
		return nil, err
	}
	c.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case initial:
		w.initial = c.snapshotLocked(o.Namespace, o.Predicate)
		w.initialRV = c.rv
		w.endBookmark = o.SendInitialEvents != nil && *o.SendInitialEvents && o.AllowBookmarks
	case o.ResourceVersion == "" || (rv == 0 && o.SendInitialEvents != nil):
		// Start at the most recent revision: nothing to replay.
	default:
		if rv < c.oldest {
			return nil, tooOldErr(rv, c.oldest)
		}
		for i := 0; i < c.count; i++ {
			ev := c.window[(c.start+i)%len(c.window)]
			if ev.rv <= rv {
				continue
			}
			ev, err := c.materialize(ev)
			if err != nil {
				// The client relists, as after a compaction.
				logrus.WithError(err).Warnf("watch cache: cannot replay %s at %d", ev.key, ev.rv)
				return nil, tooOldErr(rv, c.oldest)
			}
			if !w.send(ev) {
				return nil, tooOldErr(rv, c.oldest)
			}
		}
	}
	c.watchers[w] = struct{}{}
	w.ctx = ctx
	return w, nil
}

func (c *watchCache) remove(w *cacheWatcher) {
	c.mu.Lock()
	delete(c.watchers, w)
	c.mu.Unlock()
}

// Puller is a watch whose events are read by calling Next, without a
// goroutine of its own between the cache and the reader. The API
// server's watch handler reads so: a cluster's hundreds of watches (the
// garbage collector's, one per resource) each cost a goroutine less.
type Puller interface {
	watch.Interface
	// Next waits for the next event until ctx ends; false once the
	// watch has ended (stopped, too slow, or its cache gone).
	Next(ctx context.Context) (watch.Event, bool)
	// Pending says whether Next has an event at once.
	Pending() bool
}

// cacheWatcher is one client watch. The cache hands it events without
// blocking; its reader filters them as it takes them (Next), or a
// goroutine does for a reader of ResultChan.
type cacheWatcher struct {
	mu     sync.Mutex
	queue  []cacheEvent  // under mu; at most watcherBuffer
	closed bool          // under mu: no more events (too slow, or stopped)
	wake   chan struct{} // signalled when queue or closed changes

	out      chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
	runOnce  sync.Once       // starts run, for a reader of ResultChan
	ctx      context.Context // the watch request's
	// The reader's: events taken from queue and not yet filtered, and
	// whether the watcher ended after them.
	taken       []cacheEvent
	ended       bool
	scope       string
	pred        Predicate
	bookmarks   bool
	initial     []runtime.Object
	initialRV   int64
	endBookmark bool
	newFunc     func() runtime.Object
	cache       *watchCache
}

// send queues an event; false means the watcher is gone or too slow and
// must be dropped (its client will resume from its last revision).
func (w *cacheWatcher) send(ev cacheEvent) bool {
	w.mu.Lock()
	ok := !w.closed && len(w.queue) < watcherBuffer
	if ok {
		w.queue = append(w.queue, ev)
	} else {
		w.closed = true
	}
	w.mu.Unlock()
	w.signal()
	return ok
}

func (w *cacheWatcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *cacheWatcher) terminate() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.signal()
}

// take returns the queued events, and whether the watcher has ended
// once they are handled.
func (w *cacheWatcher) take() ([]cacheEvent, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	evs := w.queue
	w.queue = nil
	return evs, w.closed
}

func (w *cacheWatcher) Stop() {
	w.stopOnce.Do(func() {
		close(w.done)
		w.cache.remove(w)
		w.terminate()
	})
}

// ResultChan is the events, fed by a goroutine started on the first call.
// A reader uses either this or Next.
func (w *cacheWatcher) ResultChan() <-chan watch.Event {
	w.runOnce.Do(func() { go w.run(w.ctx) })
	return w.out
}

func (w *cacheWatcher) emit(ev watch.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.done:
		return false
	}
}

func (w *cacheWatcher) bookmark(rv int64, annotate bool) watch.Event {
	obj := w.newFunc()
	acc, _ := meta.Accessor(obj)
	acc.SetResourceVersion(formatRV(rv))
	if annotate {
		acc.SetAnnotations(map[string]string{InitialEventsAnnotation: "true"})
	}
	return watch.Event{Type: watch.Bookmark, Object: obj}
}

func (w *cacheWatcher) run(ctx context.Context) {
	defer close(w.out)
	defer w.Stop()
	for {
		ev, ok := w.Next(ctx)
		if !ok || !w.emit(ev) {
			return
		}
	}
}

// Next returns the initial events, then the bookmark that ends them if
// asked for, then the changes the watcher's filter lets through. One
// reader at a time.
func (w *cacheWatcher) Next(ctx context.Context) (watch.Event, bool) {
	for {
		if len(w.initial) > 0 {
			obj := w.initial[0]
			w.initial[0], w.initial = nil, w.initial[1:]
			return watch.Event{Type: watch.Added, Object: obj}, true
		}
		if w.endBookmark {
			w.endBookmark = false
			return w.bookmark(w.initialRV, true), true
		}
		for len(w.taken) > 0 {
			ev := w.taken[0]
			w.taken[0], w.taken = cacheEvent{}, w.taken[1:]
			if out, ok := w.filter(ev); ok {
				return out, true
			}
		}
		if w.ended {
			return watch.Event{}, false
		}
		select {
		case <-ctx.Done():
			return watch.Event{}, false
		case <-w.done:
			return watch.Event{}, false
		case <-w.wake:
			w.taken, w.ended = w.take()
		}
	}
}

// Pending is true if Next has an event without waiting (one that its
// filter may yet drop).
func (w *cacheWatcher) Pending() bool {
	if len(w.initial) > 0 || w.endBookmark || len(w.taken) > 0 {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue) > 0
}

// filter turns a storage change into what this watcher sees: an object
// moving into its selector is ADDED, one moving out is DELETED.
func (w *cacheWatcher) filter(ev cacheEvent) (watch.Event, bool) {
	if ev.typ == watch.Bookmark {
		return w.bookmark(ev.rv, false), true
	}
	if !strings.HasPrefix(ev.key, w.scope) {
		return watch.Event{}, false
	}
	cur := ev.typ != watch.Deleted && w.pred.Matches(ev.obj)
	prev := ev.prev != nil && w.pred.Matches(ev.prev)
	switch {
	case ev.typ == watch.Deleted && prev:
		return watch.Event{Type: watch.Deleted, Object: ev.obj}, true
	case cur && prev:
		return watch.Event{Type: watch.Modified, Object: ev.obj}, true
	case cur:
		return watch.Event{Type: watch.Added, Object: ev.obj}, true
	case prev:
		gone := ev.obj.DeepCopyObject()
		return watch.Event{Type: watch.Deleted, Object: gone}, true
	}
	return watch.Event{}, false
}
