package storage

import (
	"context"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Feed is one etcd watch that feeds many watch caches: every change under
// its prefix goes to the caches whose prefixes hold the key. A watch of
// each cache's own cost two goroutines (the etcd client's substream and
// the cache's loop) and etcd's watcher state: some 15 KiB for each of the
// hundreds of resources a cluster with many CRDs serves.
//
// Invariant: every change at a revision above rev has yet to be given to
// the caches; a cache is given only the changes above its own rv (what
// its list already held is not given again).
type Feed struct {
	client *clientv3.Client
	prefix string
	ctx    context.Context

	// mu is held while changes are given out, and while a cache joins
	// (lists) or leaves, so that a cache misses nothing between its list
	// and its first change.
	mu      sync.Mutex
	caches  map[string][]*watchCache // by prefix
	rev     int64
	running bool
}

// NewFeed makes the feed of the caches under prefix ("/registry/"); its
// watch runs while ctx lasts and a cache is fed.
func NewFeed(ctx context.Context, client *clientv3.Client, prefix string) *Feed {
	return &Feed{client: client, prefix: prefix, ctx: ctx, caches: map[string][]*watchCache{}}
}

// join lists c's prefix and feeds c from then on, until ctx ends.
func (f *Feed) join(ctx context.Context, c *watchCache) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.relist(ctx); err != nil {
		return err
	}
	f.caches[c.s.prefix] = append(f.caches[c.s.prefix], c)
	if !f.running {
		// A list's revision is etcd's current one: nothing at or below
		// it is a change any cache has yet to see.
		f.rev, f.running = c.rv, true
		go f.run()
	}
	context.AfterFunc(ctx, func() { f.leave(c) })
	return nil
}

// leave stops feeding c and ends its watchers.
func (f *Feed) leave(c *watchCache) {
	f.mu.Lock()
	cs := f.caches[c.s.prefix]
	for i, x := range cs {
		if x == c {
			cs = append(cs[:i:i], cs[i+1:]...)
			break
		}
	}
	if len(cs) == 0 {
		delete(f.caches, c.s.prefix)
	} else {
		f.caches[c.s.prefix] = cs
	}
	f.mu.Unlock()
	c.mu.Lock()
	c.endWatchersLocked()
	c.mu.Unlock()
}

// run watches from rev on until the feed's context ends or no cache is
// left to feed.
func (f *Feed) run() {
	ctx, cancel := context.WithCancel(sharedStream(f.ctx))
	defer cancel()
	for {
		f.mu.Lock()
		if f.ctx.Err() != nil || len(f.caches) == 0 {
			f.running = false
			f.mu.Unlock()
			return
		}
		from := f.rev + 1
		f.mu.Unlock()
		wch := f.client.Watch(ctx, f.prefix, clientv3.WithPrefix(), clientv3.WithRev(from),
			clientv3.WithPrevKV(), clientv3.WithProgressNotify())
		for resp := range wch {
			if resp.CompactRevision != 0 {
				logrus.Warnf("watch caches: compacted at %d, relisting", resp.CompactRevision)
				f.relistAll(ctx)
				break
			}
			if err := resp.Err(); err != nil {
				logrus.WithError(err).Debug("watch caches: the watch ended")
				break
			}
			f.give(resp)
		}
		select {
		case <-f.ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// give hands one watch response to the caches: each change to those whose
// prefixes hold its key, and a progress notification (the answer to
// RequestProgress) to all of them.
func (f *Feed) give(resp clientv3.WatchResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if resp.IsProgressNotify() {
		for _, cs := range f.caches {
			for _, c := range cs {
				c.progress(resp.Header.Revision)
			}
		}
	}
	for _, ev := range resp.Events {
		key := string(ev.Kv.Key)
		// A key is under every prefix that ends at one of its slashes.
		for i := len(f.prefix) - 1; i < len(key); i++ {
			if key[i] != '/' {
				continue
			}
			for _, c := range f.caches[key[:i+1]] {
				if ev.Kv.ModRevision > c.currentRV() {
					c.apply(ev)
				}
			}
		}
	}
	f.rev = max(f.rev, resp.Header.Revision)
}

// relistAll lists every cache again after etcd compacted away changes the
// feed had yet to give; the feed goes on from the oldest list.
func (f *Feed) relistAll(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var oldest int64
	failed := false
	for _, cs := range f.caches {
		for _, c := range cs {
			if err := c.relist(ctx); err != nil {
				// The feed stays where it was: its next watch is
				// compacted again, and every cache lists again.
				logrus.WithError(err).Warnf("watch cache %s: relist failed", c.s.prefix)
				failed = true
				continue
			}
			if oldest == 0 || c.rv < oldest {
				oldest = c.rv
			}
		}
	}
	if !failed && oldest > f.rev {
		f.rev = oldest
	}
}
