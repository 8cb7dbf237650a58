package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
)

// monitor watches one resource's metadata into the graph with a
// list-then-watch loop of its own, one goroutine per resource. The graph
// is its store: the collector reads objects only from the graph, so an
// informer's cache, delta queue and handler goroutines would hold a second
// copy of every object's metadata for nothing. It is not a client-go
// reflector either: a reflector over the metadata client costs three
// goroutines per resource (its watch loop, an idle resync goroutine and
// the StreamWatcher that decodes the stream into a channel), and the
// collector watches every resource, 100 more with 100 CRDs. The loop
// reads the watch stream itself (watchSource); in the API server's
// process the server's handler serves the watch in the loop's goroutine,
// so the loop is all a resource costs.
type monitor struct {
	store  *monitorStore
	cancel context.CancelFunc
}

// monitorStore is where the loop's lists and watch events go: the graph.
// A relist tells the graph what went while the watch was down: what the
// graph last saw through this resource and the list lacks.
type monitorStore struct {
	gvr    schema.GroupVersionResource
	gvk    schema.GroupVersionKind
	graph  *graph
	synced atomic.Bool // listed once
}

func (s *monitorStore) observe(m *metav1.PartialObjectMetadata) { s.graph.observe(s.gvr, s.gvk, m) }

func (s *monitorStore) forget(m *metav1.PartialObjectMetadata) { s.graph.forget(m) }

// replace observes a full list: what it holds, and the end of what was
// seen before and is no longer there.
func (s *monitorStore) replace(items []metav1.PartialObjectMetadata) {
	listed := make(map[types.UID]struct{}, len(items))
	for i := range items {
		listed[items[i].UID] = struct{}{}
		s.observe(&items[i])
	}
	for _, uid := range s.graph.seenThrough(s.gvr) {
		if _, ok := listed[uid]; !ok {
			s.forget(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: uid}})
		}
	}
	s.synced.Store(true)
}

const (
	// listPageSize is the list's page size, the reflector's.
	listPageSize = 500
	// minWatchTimeout is the shortest watch the server is asked for; each
	// watch asks for a random timeout between it and twice it, as the
	// reflector does, so that the watches of all resources do not end
	// and reopen together.
	minWatchTimeout = 5 * time.Minute
	// watchDeadlineSlack is how long past the asked-for timeout the client
	// waits for the server to end a watch before it ends it itself.
	watchDeadlineSlack = 30 * time.Second
	// shortWatch: a watch that ends sooner with no event counts as a
	// failure (the reflector's "very short watch"), so that a server that
	// closes watches at once is not asked again in a tight loop.
	shortWatch = time.Second
)

// defaultMonitorBackoff spaces out retries after failures: from 0.8 s,
// doubling, up to 30 s with the jitter (up to half again, so that the
// monitors of all resources, which fail together when the server goes,
// do not retry together), like the reflector's.
var defaultMonitorBackoff = wait.Backoff{Duration: 800 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 20 * time.Second}

// monitorLoop lists a resource, then watches it from the list's
// resourceVersion, in the calling goroutine.
type monitorLoop struct {
	gvr     schema.GroupVersionResource
	lister  metadataLister
	watches watchSource
	store   *monitorStore
	backoff wait.Backoff
}

// metadataLister lists one resource's metadata (metadata.Getter does).
type metadataLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)
}

func newMonitor(ctx context.Context, client metadata.Interface, watches watchSource, g *graph, gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) (*monitor, func()) {
	store := &monitorStore{gvr: gvr, gvk: gvk, graph: g}
	loop := &monitorLoop{gvr: gvr, lister: client.Resource(gvr), watches: watches, store: store, backoff: defaultMonitorBackoff}
	mctx, cancel := context.WithCancel(ctx)
	return &monitor{store: store, cancel: cancel}, func() { loop.run(mctx) }
}

// errRelist is returned by watch when what it read says the graph may
// have missed something (an unreadable event, an error from the server),
// so that the loop lists again after the backoff rather than resuming.
type errRelist struct{ err error }

func (e *errRelist) Error() string { return e.err.Error() }
func (e *errRelist) Unwrap() error { return e.err }

// run lists and watches until ctx ends. The resourceVersion it resumes
// from is always that of the last event the graph has processed, so that
// a watch that ends or fails resumes without losing events; a resource
// version the server no longer has (410 Gone, Expired) makes it list
// again, and the list's replace forgets what went meanwhile.
func (l *monitorLoop) run(ctx context.Context) {
	backoff := l.backoff
	relist := true
	var rv string
	for ctx.Err() == nil {
		fromList := relist
		if relist {
			listed, err := l.list(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				logrus.WithError(err).Debugf("garbage collector: list %s failed", l.gvr)
				sleep(ctx, &backoff)
				continue
			}
			rv, relist = listed, false
			backoff = l.backoff
		}
		events, err := l.watch(ctx, &rv)
		if ctx.Err() != nil {
			return
		}
		var again *errRelist
		switch {
		case err == nil:
			backoff = l.backoff
		case isGone(err):
			logrus.WithError(err).Debugf("garbage collector: watch of %s from %s expired, listing again", l.gvr, rv)
			relist = true
			// Relisting at once is right when the watch fell behind; a
			// list whose own version is already gone is not retried in
			// a tight loop.
			if fromList && events == 0 {
				sleep(ctx, &backoff)
			}
		default:
			logrus.WithError(err).Debugf("garbage collector: watch of %s from %s failed", l.gvr, rv)
			relist = errors.As(err, &again)
			sleep(ctx, &backoff)
		}
	}
}

func isGone(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// sleep waits out the next backoff step or until ctx ends.
func sleep(ctx context.Context, backoff *wait.Backoff) {
	t := time.NewTimer(backoff.Step())
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// list lists the resource in pages and replaces what the graph saw through
// it. It returns the list's resourceVersion.
func (l *monitorLoop) list(ctx context.Context) (string, error) {
	var items []metav1.PartialObjectMetadata
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		page, err := l.lister.List(ctx, opts)
		if err != nil {
			if opts.Continue != "" && isGone(err) {
				// The continue token expired between pages: list in one
				// piece, as the reflector's pager does.
				items, opts = nil, metav1.ListOptions{}
				continue
			}
			return "", err
		}
		items = append(items, page.Items...)
		if page.Continue == "" {
			l.store.replace(items)
			return page.ResourceVersion, nil
		}
		opts.Continue = page.Continue
	}
}

// watch watches from *rv and feeds the events to the store, advancing *rv
// past each event as soon as it has been processed. It returns how many
// events it read, and nil when the watch ended normally (the server's
// timeout, the end of the stream), a 410 error when *rv is too old, an
// *errRelist when the stream said something the loop cannot resume
// after, and other errors otherwise.
func (l *monitorLoop) watch(ctx context.Context, rv *string) (int, error) {
	timeout := time.Duration(float64(minWatchTimeout) * (rand.Float64() + 1))
	seconds := int64(timeout.Seconds())
	wctx, cancel := context.WithTimeout(ctx, timeout+watchDeadlineSlack)
	defer cancel()
	start := time.Now()
	n := 0
	err := l.watches.Watch(wctx, l.gvr, metav1.ListOptions{
		ResourceVersion:     *rv,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &seconds,
	}, func(typ watch.EventType, obj runtime.Object) error {
		n++
		return l.event(typ, obj, rv)
	})
	switch {
	case ctx.Err() != nil:
		return n, ctx.Err()
	case wctx.Err() != nil:
		// The client's deadline, past the server's timeout: an end.
		return n, nil
	case err == nil && n == 0 && time.Since(start) < shortWatch:
		return n, fmt.Errorf("very short watch: the watch ended after %v without an event", time.Since(start))
	}
	return n, err
}

// event processes one watch event.
func (l *monitorLoop) event(typ watch.EventType, obj runtime.Object, rv *string) error {
	switch typ {
	case watch.Error:
		if status, ok := obj.(*metav1.Status); ok {
			if err := apierrors.FromObject(status); isGone(err) {
				return err
			}
		}
		return &errRelist{fmt.Errorf("the watch failed: %w", apierrors.FromObject(obj))}
	case watch.Bookmark:
		// A bookmark carries only a resourceVersion: everything up to it
		// has been sent.
		if m, err := meta.Accessor(obj); err == nil && m.GetResourceVersion() != "" {
			*rv = m.GetResourceVersion()
		}
		return nil
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return &errRelist{fmt.Errorf("the watch sent a %T, not PartialObjectMetadata", obj)}
	}
	switch typ {
	case watch.Added, watch.Modified:
		l.store.observe(m)
	case watch.Deleted:
		l.store.forget(m)
	default:
		return &errRelist{fmt.Errorf("the watch sent an event of type %q", typ)}
	}
	if m.ResourceVersion != "" {
		*rv = m.ResourceVersion
	}
	return nil
}
