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

// customWriteIdle is how long a custom kind's write path is kept after
// its last use.
const customWriteIdle = time.Minute

// customWriter is what validating and applying a custom kind's objects
// takes: its schema validators, its CEL programs (compiled by upstream's
// strategy) and its apply schema. Those are most of what a served CRD
// costs, some 250 KB of heap for a CRD with two CEL rules, and most CRDs
// of a cluster are written rarely: a Helm chart installs tens of them for
// a handful of objects. So they are built on the first write and let go
// once the kind has gone customWriteIdle without one; the next write
// builds them again (a few milliseconds). Reads, lists, watches and
// decoding never need them.
type customWriter struct {
	build func() *customWrite
	idle  time.Duration

	mu    sync.Mutex
	cur   *customWrite
	used  time.Time
	timer *time.Timer
}

// customWrite is one build of a kind's write path. A caller may go on
// using one it was given after it is let go.
type customWrite struct {
	validate       func(obj runtime.Object) field.ErrorList
	validateUpdate func(obj, old runtime.Object) field.ErrorList
	validateStatus func(obj, old runtime.Object) field.ErrorList
	// typeConverter is the apply schema, or the deduced one if the CRD's
	// schemas do not make one.
	typeConverter managedfields.TypeConverter
}

func newCustomWriter(build func() *customWrite) *customWriter {
	return &customWriter{build: build, idle: customWriteIdle}
}

func (w *customWriter) get() *customWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur == nil {
		w.cur = w.build()
	}
	w.used = time.Now()
	if w.timer == nil {
		w.timer = time.AfterFunc(w.idle, w.expire)
	}
	return w.cur
}

func (w *customWriter) expire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if left := w.idle - time.Since(w.used); left > 0 {
		w.timer.Reset(left)
		return
	}
	w.cur, w.timer = nil, nil
	// Collected at the next GC, minutes away in an idle server.
	resident.Released()
}

// built tells whether the write path is held now.
func (w *customWriter) built() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur != nil
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
