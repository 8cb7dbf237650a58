package registry

import (
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/managedfields"
)

// The write path is built on first use, kept while used, let go after
// the idle time and built again on the next use.
func TestCustomWriterBuildsOnUseAndLetsGoWhenIdle(t *testing.T) {
	var builds atomic.Int32
	w := newCustomWriter(func() *customWrite {
		builds.Add(1)
		return &customWrite{typeConverter: managedfields.NewDeducedTypeConverter()}
	})
	w.idle = 200 * time.Millisecond
	if w.built() || builds.Load() != 0 {
		t.Fatal("built before any write")
	}
	first := w.get()
	// Used every 50 ms for twice the idle time: kept.
	for range 8 {
		time.Sleep(50 * time.Millisecond)
		if w.get() != first {
			t.Fatal("rebuilt while in use")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.built() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if w.built() {
		t.Fatal("still held after the idle time")
	}
	if w.get() == first || builds.Load() != 2 {
		t.Errorf("after being let go: %d builds, want 2", builds.Load())
	}
}

// The field managers hold one type converter per served kind, whichever
// build of the write path answers it.
func TestWriterTypeConverterIsStable(t *testing.T) {
	w := newCustomWriter(func() *customWrite { return &customWrite{typeConverter: managedfields.NewDeducedTypeConverter()} })
	var a, b managedfields.TypeConverter = writerTypeConverter{w}, writerTypeConverter{w}
	if a != b {
		t.Error("two converters of one writer differ")
	}
}
