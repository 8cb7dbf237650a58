package resident

import (
	"context"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestWorthGivingBackWhenQuietAfterABurst(t *testing.T) {
	for _, c := range []struct {
		alloc, free, file uint64
		want              bool
	}{
		{6 << 20, 13 << 20, 40 << 20, true},   // 100 CRDs registered, then idle
		{2 << 20, 13 << 20, 0, true},          // free heap alone
		{6 << 20, 0, 20 << 20, true},          // code pages alone
		{6 << 20, 4 << 20, 2 << 20, false},    // too little to be worth a GC
		{40 << 20, 40 << 20, 40 << 20, false}, // still busy: it would come back
	} {
		if got := worthGivingBack(c.alloc, c.free, c.file); got != c.want {
			t.Errorf("worthGivingBack(%d MiB allocated, %d MiB free, %d MiB of the executable) = %v, want %v",
				c.alloc>>20, c.free>>20, c.file>>20, got, c.want)
		}
	}
}

func TestBurstEndsWhenMostOfItsGoroutinesAreGone(t *testing.T) {
	var b burst
	for i, c := range []struct {
		n    int
		want bool
	}{
		{1160, false}, // at rest
		{1300, false}, // more work, not yet a burst gone
		{1170, false}, // 140 goroutines shed: too few to be worth two GCs
		{7300, false}, // a flood of idle connections
		{5000, false}, // most of it still there
		{4000, true},  // most of it gone: 2,840 over rest left
		{3000, false}, // the tail not yet halved
		{2500, true},  // halved: 1,340 left
		{1400, true},  // 240 left
		{1300, false}, // 140 left: not yet half
		{1270, true},  // 110 left
		{1190, true},  // 30 left: too few for another
		{1160, false},
		{1100, false}, // fewer than at rest: the new rest
		{1400, false}, // 300 over rest
		{1240, true},  // 140 left: half gone
	} {
		if _, _, got := b.ended(c.n); got != c.want {
			t.Errorf("check %d: ended(%d) = %v, want %v (%+v)", i, c.n, got, c.want, b)
		}
	}
}

// What a component let go of and said so (Released) is collected and
// returned to the system by the next check, without waiting for Go's own
// collection and scavenger.
func TestReleasedIsCollectedAndGivenBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go giveBackWhenQuiet(ctx, 0)
	sample := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	// A structure of many small objects, as a write path is.
	held := make([][]byte, 0, 32<<10)
	for range 32 << 10 {
		held = append(held, make([]byte, 1<<10))
	}
	runtime.GC()
	metrics.Read(sample)
	releasedBefore, objectsBefore := sample[0].Value.Uint64(), sample[1].Value.Uint64()
	runtime.KeepAlive(held)
	held = nil
	Released()
	deadline := time.Now().Add(3 * burstCheck)
	for {
		metrics.Read(sample)
		released, objects := sample[0].Value.Uint64(), sample[1].Value.Uint64()
		if released >= releasedBefore+16<<20 && objects+16<<20 <= objectsBefore {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("32 MiB released: heap objects %d → %d MiB, returned to the system %d → %d MiB",
				objectsBefore>>20, objects>>20, releasedBefore>>20, released>>20)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if released.Load() {
		t.Error("the request to collect is still pending after the collection")
	}
}
