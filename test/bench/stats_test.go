package bench

import (
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	// 1..100 ms, shuffled: the p-th percentile is exactly p ms.
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = (i*37)%100 + 1
	}
	// 1..1000 ms in reverse: p99 is the 990th smallest.
	thousand := make([]int, 1000)
	for i := range thousand {
		thousand[i] = 1000 - i
	}
	cases := []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{"empty", nil, 50, 0},
		{"single p50", ms(7), 50, 7 * time.Millisecond},
		{"single p99", ms(7), 99, 7 * time.Millisecond},
		{"two p50 is the lower", ms(9, 3), 50, 3 * time.Millisecond},
		{"two p51 is the upper", ms(9, 3), 51, 9 * time.Millisecond},
		{"hundred p1", ms(hundred...), 1, 1 * time.Millisecond},
		{"hundred p50", ms(hundred...), 50, 50 * time.Millisecond},
		{"hundred p99", ms(hundred...), 99, 99 * time.Millisecond},
		{"hundred p100", ms(hundred...), 100, 100 * time.Millisecond},
		{"thousand p99", ms(thousand...), 99, 990 * time.Millisecond},
		{"thousand p99.9", ms(thousand...), 99.9, 999 * time.Millisecond},
		{"ten p99 is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"ten p90", ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 90, 9 * time.Millisecond},
		{"duplicates", ms(5, 5, 5, 1), 50, 5 * time.Millisecond},
	}
	for _, c := range cases {
		if got := Percentile(c.samples, c.p); got != c.want {
			t.Errorf("%s: Percentile(p=%v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
}

func TestPercentileDoesNotReorderInput(t *testing.T) {
	in := []time.Duration{3, 1, 2}
	_ = Percentile(in, 50)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Fatalf("input reordered: %v", in)
	}
}

func TestPercentileRejectsOutOfRange(t *testing.T) {
	for _, p := range []float64{0, -1, 100.5} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Percentile(p=%v) did not panic", p)
				}
			}()
			Percentile([]time.Duration{1}, p)
		}()
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]time.Duration{4 * time.Millisecond, 1 * time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond})
	want := Summary{N: 4, Min: time.Millisecond, P50: 2 * time.Millisecond, P99: 4 * time.Millisecond,
		Max: 4 * time.Millisecond, Mean: 2500 * time.Microsecond}
	if s != want {
		t.Fatalf("Summarize = %+v, want %+v", s, want)
	}
	if got := Ms(1500 * time.Microsecond); got != 1.5 {
		t.Fatalf("Ms = %v, want 1.5", got)
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("Summarize(nil) is not zero")
	}
}
