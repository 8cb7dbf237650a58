// Package manifests is the auto-deploy directory of `kelp server`, as
// k3s's: every *.yaml, *.yml and *.json in <data-dir>/server/manifests is
// applied with server-side apply at start and whenever it changes; a file
// removed deletes the objects it created, and an edit that drops an object
// deletes that object. kelp's own add-ons (packaged.go) are written there
// at start, so a user sees them and can skip, disable or replace them.
//
// The Deployer is an API client like any control loop (a dynamic client
// and a discovery-backed RESTMapper), and keeps what each file applied in
// the API (record.go), never in memory alone or in a local file.
package manifests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	events "k8s.io/client-go/tools/record"

	"github.com/kelp-project/kelp/dirwatch"
)

// FieldManager is the manager of the fields the manifests set.
const FieldManager = "kelp-deploy"

const (
	// settle is how long the loop lets a burst of changes (an editor's
	// save, a `cp *.yaml`) go on before it reads the directory.
	settle = 50 * time.Millisecond
	// The retries of a file that failed for a reason that may pass (the
	// API busy, a CRD not established yet, a namespace the same apply is
	// creating): from minRetry, doubling up to maxRetry.
	minRetry = time.Second
	maxRetry = 2 * time.Minute
)

// Deployer applies the manifests directory.
type Deployer struct {
	dir    string
	dyn    dynamic.Interface
	core   kubernetes.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	events events.EventRecorder
	// records are the API's records by file name (read at start, then
	// kept as written: this Deployer is their only writer); objs their
	// ConfigMaps, the Events' subject.
	records map[string]*record
	objs    map[string]*corev1.ConfigMap
	// attempted is the hash of each file's content last tried, so that a
	// file refused for good is not tried again until it changes.
	attempted map[string]string
	retries   map[string]*retry
	// mapperReset is set once a pass has refreshed discovery, so that
	// several objects of an unknown kind cost one refresh.
	mapperReset bool
}

type retry struct {
	at    time.Time
	delay time.Duration
}

// Start applies the directory once and then watches it until ctx ends;
// it returns after the first pass, so that the packaged add-ons are in
// the API before the server says it is ready. wait returns once the
// watch has stopped. rc must be allowed everything a manifest may hold
// (kelp gives it system:masters, as k3s's deploy controller has).
func Start(ctx context.Context, rc *rest.Config, dir string) (wait func(), err error) {
	d, stopEvents, err := newDeployer(ctx, rc, dir)
	if err != nil {
		return nil, err
	}
	// The watch comes first: a file written during the first pass is
	// seen by the next.
	w, err := dirwatch.New(dir)
	if err != nil {
		stopEvents()
		return nil, err
	}
	if err := d.load(ctx); err != nil {
		w.Close()
		stopEvents()
		return nil, err
	}
	// At start every file is applied, changed or not, as k3s does: what
	// was changed or deleted in the cluster while kelp was down is put
	// back.
	d.sync(ctx, true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer stopEvents()
		defer w.Close()
		d.run(ctx, w)
	}()
	return func() { <-done }, nil
}

func newDeployer(ctx context.Context, rc *rest.Config, dir string) (*Deployer, func(), error) {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	core, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	broadcaster := events.NewBroadcaster(events.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: core.CoreV1().Events("")})
	d := &Deployer{
		dir: dir, dyn: dyn, core: core,
		mapper:    restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		events:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: FieldManager}),
		records:   map[string]*record{},
		objs:      map[string]*corev1.ConfigMap{},
		attempted: map[string]string{},
		retries:   map[string]*retry{},
	}
	return d, broadcaster.Shutdown, nil
}

// load reads the records from the API. A record that does not parse is
// logged and left alone, its objects with it.
func (d *Deployer) load(ctx context.Context) error {
	list, err := d.core.CoreV1().ConfigMaps(recordNamespace).List(ctx, metav1.ListOptions{LabelSelector: recordLabel})
	if err != nil {
		return fmt.Errorf("manifests: listing the records: %w", err)
	}
	for i := range list.Items {
		cm := &list.Items[i]
		r, err := recordFrom(cm)
		if err != nil {
			logrus.WithError(err).Warn("manifests: a record kelp cannot read; its objects are left alone")
			continue
		}
		d.records[r.File], d.objs[r.File] = r, cm
	}
	return nil
}

func (d *Deployer) run(ctx context.Context, w *dirwatch.Watcher) {
	for {
		var due <-chan time.Time
		var timer *time.Timer
		if next, ok := d.nextRetry(); ok {
			timer = time.NewTimer(time.Until(next))
			due = timer.C
		}
		select {
		case <-ctx.Done():
		case <-w.Lost:
			if err := w.Rewatch(); err != nil {
				logrus.WithError(err).Errorf("manifests: watching %s again", d.dir)
			}
		case <-w.C:
			// Let the burst finish, then take the whole of it at once.
			select {
			case <-ctx.Done():
			case <-time.After(settle):
			}
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		// Drain a signal the settle window folded in.
		select {
		case <-w.C:
		default:
		}
		d.sync(ctx, false)
	}
}

func (d *Deployer) nextRetry() (time.Time, bool) {
	var next time.Time
	for _, r := range d.retries {
		if next.IsZero() || r.at.Before(next) {
			next = r.at
		}
	}
	return next, !next.IsZero()
}

// isManifest tells the files the directory applies.
func isManifest(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// skipNames are the .skip files that disable file: k3s's
// `<file>.skip` (local-storage.yaml.skip) and `<name>.skip`
// (local-storage.skip).
func skipNames(file string) []string {
	return []string{file + ".skip", strings.TrimSuffix(file, filepath.Ext(file)) + ".skip"}
}

// skipped tells whether a .skip file disables file in dir.
func skipped(dir, file string) bool {
	for _, s := range skipNames(file) {
		if _, err := os.Stat(filepath.Join(dir, s)); err == nil {
			return true
		}
	}
	return false
}

// sync is one pass over the directory: each manifest whose content
// changed (or whose retry is due; or every one, with all) is applied, and the records of files
// gone are pruned and removed. A skipped file is left entirely alone,
// applied objects included, as on k3s.
func (d *Deployer) sync(ctx context.Context, all bool) {
	d.mapperReset = false
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		logrus.WithError(err).Errorf("manifests: reading %s", d.dir)
		return
	}
	present := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !isManifest(e.Name()) {
			continue
		}
		present[e.Name()] = true
	}
	names := make([]string, 0, len(present))
	for n := range present {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if skipped(d.dir, name) {
			delete(d.retries, name)
			continue
		}
		d.syncFile(ctx, name, all)
	}
	gone := []string{}
	for name := range d.records {
		if !present[name] && !skipped(d.dir, name) {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		d.removeFile(ctx, name)
	}
}

// syncFile applies one file if its content changed since it was last
// tried, if its retry is due, or if always.
func (d *Deployer) syncFile(ctx context.Context, name string, always bool) {
	data, err := os.ReadFile(filepath.Join(d.dir, name))
	if err != nil {
		// Removed since the directory was read: the next pass (the
		// removal's own event) prunes it.
		logrus.WithError(err).Debugf("manifests: reading %s", name)
		return
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	rec := d.records[name]
	r, retrying := d.retries[name]
	switch {
	case retrying && d.attempted[name] == hash && time.Now().Before(r.at):
		return // its retry is not due yet
	case !always && !retrying && (d.attempted[name] == hash || (rec != nil && rec.SHA256 == hash)):
		return // applied already, or refused for good and unchanged
	}
	if d.attempted[name] != hash {
		delete(d.retries, name) // new content: retries start over
	}
	d.attempted[name] = hash
	d.retryLater(name, d.apply(ctx, name, hash, data, rec))
}
