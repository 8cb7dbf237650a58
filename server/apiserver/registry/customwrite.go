package registry

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/kelp-project/kelp/resident"
)

// customWriteIdle is how long a custom kind's write path, or its
// structural schema, is kept after its last use.
var customWriteIdle = time.Minute

// whileUsed holds what build makes for as long as it is used: built on
// first use, let go once unused for idle, built again on the next use.
// dropped, if set, is told each time it is let go. A caller may go on
// using a value it was given after it is let go.
type whileUsed[T any] struct {
	build   func() T
	idle    time.Duration
	dropped func()

	mu    sync.Mutex
	cur   T
	held  bool
	used  time.Time
	timer *time.Timer
}

func (w *whileUsed[T]) get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.held {
		w.cur, w.held = w.build(), true
	}
	w.touchLocked()
	return w.cur
}

// hold makes v the value held, as if built now: what a caller built
// anyway (to check it) serves until it goes unused.
func (w *whileUsed[T]) hold(v T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cur, w.held = v, true
	w.touchLocked()
}

func (w *whileUsed[T]) touchLocked() {
	w.used = time.Now()
	if w.timer == nil {
		w.timer = time.AfterFunc(w.idle, w.expire)
	}
}

func (w *whileUsed[T]) expire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if left := w.idle - time.Since(w.used); left > 0 {
		w.timer.Reset(left)
		return
	}
	w.letGoLocked()
	w.timer = nil
	if w.dropped != nil {
		w.dropped()
	}
}

func (w *whileUsed[T]) letGoLocked() {
	var zero T
	w.cur, w.held = zero, false
}

// built tells whether a value is held now.
func (w *whileUsed[T]) built() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held
}

// customWriter is what validating and applying a custom kind's objects
// takes: its schema validators, its CEL programs (compiled by upstream's
// strategy) and its apply schema. Those are most of what a served CRD
// costs, some 250 KB of heap for a CRD with two CEL rules, and most CRDs
// of a cluster are written rarely: a Helm chart installs tens of them for
// a handful of objects. So they are built on the first write and let go
// once the kind has gone customWriteIdle without one; the next write
// builds them again (a few milliseconds). Reads, lists, watches and
// decoding never need them. What it lets go is collected at once
// (resident.Released): an idle server's next GC is minutes away.
type customWriter = whileUsed[*customWrite]

// customWrite is one build of a kind's write path.
type customWrite struct {
	validate       func(obj runtime.Object) field.ErrorList
	validateUpdate func(obj, old runtime.Object) field.ErrorList
	validateStatus func(obj, old runtime.Object) field.ErrorList
	// typeConverter is the apply schema, or the deduced one if the CRD's
	// schemas do not make one.
	typeConverter managedfields.TypeConverter
}

func newCustomWriter(build func() *customWrite) *customWriter {
	return &customWriter{build: build, idle: customWriteIdle, dropped: resident.Released}
}

// writerTypeConverter is a kind's apply schema as the field managers
// hold it: one value for as long as the kind is served, whose schema is
// the write path's, built again when it was let go.
type writerTypeConverter struct{ w *customWriter }

func (c writerTypeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	return c.w.get().typeConverter.ObjectToTyped(obj, opts...)
}

func (c writerTypeConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return c.w.get().typeConverter.TypedToObject(v)
}

var _ managedfields.TypeConverter = writerTypeConverter{}
