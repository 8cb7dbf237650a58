package ttlafterfinished

import (
	"context"
	"testing"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func finishedJob(finished time.Time, ttl *int32, cond batch.JobConditionType) *batch.Job {
	j := &batch.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "default", UID: "uid-j"},
		Spec: batch.JobSpec{TTLSecondsAfterFinished: ttl}}
	if !finished.IsZero() {
		j.Status.Conditions = []batch.JobCondition{{Type: cond, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(finished)}}
	}
	return j
}

func TestTTLAfterFinished(t *testing.T) {
	for _, tc := range []struct {
		name       string
		job        *batch.Job
		wantDelete bool
		wantLater  bool
	}{
		{"expired Complete", finishedJob(now.Add(-10*time.Second), ptr.To(int32(5)), batch.JobComplete), true, false},
		{"expired Failed, ttl 0", finishedJob(now, ptr.To(int32(0)), batch.JobFailed), true, false},
		{"not yet", finishedJob(now.Add(-2*time.Second), ptr.To(int32(5)), batch.JobComplete), false, true},
		{"no ttl", finishedJob(now.Add(-time.Hour), nil, batch.JobComplete), false, false},
		{"still running", finishedJob(time.Time{}, ptr.To(int32(0)), batch.JobComplete), false, false},
		{"only SuccessCriteriaMet", finishedJob(now.Add(-time.Hour), ptr.To(int32(0)), batch.JobSuccessCriteriaMet), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(tc.job)
			factory := informers.NewSharedInformerFactory(client, 0)
			c := New(client, factory, record.NewFakeRecorder(10))
			c.now = func() time.Time { return now }
			q := &recordingQueue{TypedRateLimitingInterface: c.queue}
			c.queue = q
			_ = factory.Batch().V1().Jobs().Informer().GetIndexer().Add(tc.job)
			if err := c.sync(context.Background(), "default/j"); err != nil {
				t.Fatal(err)
			}
			var del core.DeleteAction
			for _, a := range client.Actions() {
				if a.GetVerb() == "delete" {
					del = a.(core.DeleteAction)
				}
			}
			if (del != nil) != tc.wantDelete {
				t.Fatalf("deleted %v, want %v", del != nil, tc.wantDelete)
			}
			if del != nil {
				opts := del.GetDeleteOptions()
				if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationForeground {
					t.Errorf("propagation %v, want Foreground as upstream", opts.PropagationPolicy)
				}
				if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != tc.job.UID {
					t.Errorf("preconditions %+v", opts.Preconditions)
				}
			}
			if later := len(q.after) > 0; later != tc.wantLater {
				t.Errorf("requeued for later: %v, want %v", q.after, tc.wantLater)
			}
			if tc.wantLater && q.after[0] != 3*time.Second {
				t.Errorf("requeued after %v, want the 3 s left", q.after[0])
			}
		})
	}
}

// recordingQueue notes AddAfter calls instead of waiting them out.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	after []time.Duration
}

func (q *recordingQueue) AddAfter(_ string, d time.Duration) { q.after = append(q.after, d) }
