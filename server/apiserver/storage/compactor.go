package storage

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Compactor discards etcd history older than one interval, as
// kube-apiserver does: each tick compacts to the revision seen at the
// previous tick, so every watcher has at least one interval to catch up.
type Compactor struct {
	Client   *clientv3.Client
	Interval time.Duration
	// Stores are told about each compaction so their watch caches answer
	// 410 for the same revisions etcd no longer has.
	Stores func() []*Store
}

// Run compacts until ctx ends. An interval of 0 disables compaction.
func (c *Compactor) Run(ctx context.Context) {
	if c.Interval <= 0 {
		return
	}
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if last > 0 {
			if err := c.Compact(ctx, last); err != nil {
				logrus.WithError(err).Warn("etcd compaction failed")
			}
		}
		resp, err := c.Client.Get(ctx, "compact_rev_key", clientv3.WithCountOnly())
		if err == nil {
			last = resp.Header.Revision
		}
	}
}

// Compact discards history at and below rev.
func (c *Compactor) Compact(ctx context.Context, rev int64) error {
	if _, err := c.Client.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		if err.Error() != "etcdserver: mvcc: required revision has been compacted" {
			return err
		}
	}
	logrus.Debugf("etcd compacted to revision %d", rev)
	if c.Stores != nil {
		for _, s := range c.Stores() {
			s.cache.compacted(rev)
		}
	}
	return nil
}
