package resident

import "testing"

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
