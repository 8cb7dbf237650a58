package controllers

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
)

type delayed struct{ d time.Duration }

func (delayed) Error() string                 { return "not yet" }
func (d delayed) RequeueDelay() time.Duration { return d.d }

// TestLoopRetriesFailuresAndRequeuesDelays: a failing key comes back with
// backoff until it succeeds, a Delayed key comes back after its delay,
// and Run returns once ctx ends.
func TestLoopRetriesFailuresAndRequeuesDelays(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	l := &Loop{
		Name: "test",
		Queue: workqueue.NewTypedRateLimitingQueue[string](
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond)),
		Sync: func(_ context.Context, key string) error {
			mu.Lock()
			defer mu.Unlock()
			calls[key]++
			switch {
			case key == "flaky" && calls[key] < 3:
				return errors.New("boom")
			case key == "later" && calls[key] < 2:
				return delayed{5 * time.Millisecond}
			}
			if calls["flaky"] >= 3 && calls["later"] >= 2 {
				select {
				case <-done:
				default:
					close(done)
				}
			}
			return nil
		},
	}
	stopped := make(chan struct{})
	go func() { l.Run(ctx, 2); close(stopped) }()
	l.Queue.Add("flaky")
	l.Queue.Add("later")
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("keys not settled: %v", calls)
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["flaky"] != 3 || calls["later"] != 2 {
		t.Errorf("calls %v, want flaky 3 and later 2", calls)
	}
	if n := l.Queue.NumRequeues("flaky"); n != 0 {
		t.Errorf("a key that succeeded keeps %d requeues", n)
	}
}

func TestSelects(t *testing.T) {
	web := map[string]string{"app": "web", "tier": "front"}
	for _, tc := range []struct {
		name string
		sel  *metav1.LabelSelector
		want bool
	}{
		{"match", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, true},
		{"other labels", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, false},
		{"nil selects nothing", nil, false},
		{"empty selects nothing", &metav1.LabelSelector{}, false},
		{"invalid selects nothing", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}, false},
	} {
		if got := Selects(tc.sel, web); got != tc.want {
			t.Errorf("%s: Selects = %v", tc.name, got)
		}
	}
	ctrls := []*metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}, {MatchLabels: map[string]string{"app": "db"}}, {MatchLabels: map[string]string{"tier": "front"}}}
	got := Selecting(ctrls, func(s *metav1.LabelSelector) *metav1.LabelSelector { return s }, web)
	if len(got) != 2 || got[0] != ctrls[0] || got[1] != ctrls[2] {
		t.Errorf("Selecting = %v", got)
	}
}
