package kubelet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// informerSyncWait is how long the first lookup waits for a lazily
// started informer to list (upstream's 10 s for the ClusterTrustBundle
// manager); a pod asking earlier fails its sync and retries.
const informerSyncWait = 10 * time.Second

// lazyInformer is an informer the kubelet starts only when the first pod
// needs it: the kinds behind projected sources (ClusterTrustBundles,
// PodCertificateRequests) that most nodes never use, so a node whose pods
// use none keeps no watch. start builds the informer, adds its handlers
// and starts it within ctx; it runs once.
type lazyInformer[L any] struct {
	kind  string
	start func(ctx context.Context) (cache.SharedIndexInformer, L)

	mu sync.Mutex
	// ctx bounds the informer once started (set by Kubelet.Run).
	ctx      context.Context
	informer cache.SharedIndexInformer
	lister   L
}

func newLazyInformer[L any](kind string, start func(ctx context.Context) (cache.SharedIndexInformer, L)) *lazyInformer[L] {
	return &lazyInformer[L]{kind: kind, start: start, ctx: context.Background()}
}

// run sets the context the informer lives in, before any pod asks.
func (l *lazyInformer[L]) run(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ctx = ctx
}

// get returns the lister once the informer has listed, starting it on
// the first call.
func (l *lazyInformer[L]) get(ctx context.Context) (L, error) {
	l.mu.Lock()
	if l.informer == nil {
		l.informer, l.lister = l.start(l.ctx)
	}
	informer, lister := l.informer, l.lister
	l.mu.Unlock()
	wait, cancel := context.WithTimeout(ctx, informerSyncWait)
	defer cancel()
	if !cache.WaitForCacheSync(wait.Done(), informer.HasSynced) {
		var none L
		return none, fmt.Errorf("%s informer has not yet synced", l.kind)
	}
	return lister, nil
}
