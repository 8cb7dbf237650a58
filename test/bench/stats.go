package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of samples by the
// nearest-rank method: the smallest sample such that at least p% of all
// samples are less than or equal to it. It returns 0 for no samples. The
// input is not modified.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	if p <= 0 || p > 100 || math.IsNaN(p) {
		panic(fmt.Sprintf("percentile %v out of (0, 100]", p))
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	// The small epsilon keeps float error (99.9/100*1000 = 999.0000000000001)
	// from bumping an exact rank to the next sample.
	rank := int(math.Ceil(p*float64(len(s))/100 - 1e-9))
	if rank < 1 {
		rank = 1
	}
	return s[rank-1]
}

// Summary is the usual set of order statistics of one set of latencies.
type Summary struct {
	N                  int
	Min, P50, P99, Max time.Duration
	Mean               time.Duration
}

// Summarize computes a Summary of samples.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	var total time.Duration
	for _, d := range samples {
		total += d
	}
	return Summary{
		N:    len(samples),
		Min:  slices.Min(samples),
		P50:  Percentile(samples, 50),
		P99:  Percentile(samples, 99),
		Max:  slices.Max(samples),
		Mean: total / time.Duration(len(samples)),
	}
}

// Ms converts a duration to fractional milliseconds, the unit the
// benchmarks report.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (s Summary) String() string {
	return fmt.Sprintf("n=%d min=%.2fms p50=%.2fms p99=%.2fms max=%.2fms mean=%.2fms",
		s.N, Ms(s.Min), Ms(s.P50), Ms(s.P99), Ms(s.Max), Ms(s.Mean))
}
