package kubelet

import "time"

// Crash-loop backoff as upstream: 10 s after the first failure, doubling
// up to max (5 min), and back to 10 s once a container ran cleanly for
// 10 minutes.
const (
	initialBackoff = 10 * time.Second
	backoffReset   = 10 * time.Minute
)

type restartBackoff struct {
	max         time.Duration
	delay       time.Duration // the delay before the next restart; 0 before the first
	lastFailure time.Time     // image pulls: when the last one failed
}

func (b *restartBackoff) current() time.Duration {
	if b.delay == 0 {
		return initialBackoff
	}
	return b.delay
}

// remaining is how long to wait before restarting a container that
// finished at finished.
func (b *restartBackoff) remaining(finished time.Time) time.Duration {
	if b.delay == 0 {
		return 0 // the first restart is immediate, as upstream
	}
	return time.Until(finished.Add(b.delay))
}

// next records a restart of a container that ran from started to finished.
func (b *restartBackoff) next(started, finished time.Time) {
	switch {
	case !started.IsZero() && finished.Sub(started) >= backoffReset:
		b.delay = 0
	case b.delay == 0:
		b.delay = initialBackoff
	default:
		b.delay = min(b.delay*2, b.max)
	}
}
