package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/test/simkubelet"
)

// testJob is a Job whose pods the simulated kubelet ends with exitCode
// after runFor.
func testJob(name string, completions, parallelism int32, exitCode int, runFor string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(completions), Parallelism: ptr.To(parallelism),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
					simkubelet.ExitCodeAnnotation: fmt.Sprint(exitCode), simkubelet.RunForAnnotation: runFor}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "work", Image: "busybox:1.36"}}},
			},
		},
	}
}

func waitJob(t *testing.T, cs kubernetes.Interface, name string, limit time.Duration, cond func(*batchv1.Job) bool) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	waitWithin(t, limit, "job "+name, func() bool {
		j, err := cs.BatchV1().Jobs("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		job = j
		return cond(j)
	})
	return job
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == t && j.Status.Conditions[i].Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// activeBound follows a Job's pods through a watch and records the most
// that were active (neither finished nor being deleted) at once.
type activeBound struct {
	mu      sync.Mutex
	active  map[string]bool
	max     int
	created map[string]bool
}

func watchActive(t *testing.T, cs kubernetes.Interface, selector string) *activeBound {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	b := &activeBound{active: map[string]bool{}, created: map[string]bool{}}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			b.mu.Lock()
			b.created[p.Name] = true
			live := ev.Type != watch.Deleted && p.DeletionTimestamp == nil &&
				p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
			if live {
				b.active[p.Name] = true
			} else {
				delete(b.active, p.Name)
			}
			b.max = max(b.max, len(b.active))
			b.mu.Unlock()
		}
	}()
	return b
}

// A Job of 5 completions at parallelism 2 never runs more than 2 pods,
// finishes Complete with 5 succeeded, and its pods carry upstream's labels,
// owner and (once counted) no tracking finalizer.
func TestJobCompletionsParallelism(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1", "node-2")
	bound := watchActive(t, cs, "job-name=five")
	created, err := cs.BatchV1().Jobs("default").Create(ctx, testJob("five", 5, 2, 0, "300ms"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := waitJob(t, cs, "five", 60*time.Second, func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
	if job.Status.Succeeded != 5 || job.Status.Failed != 0 || job.Status.Active != 0 {
		t.Errorf("status %+v", job.Status)
	}
	if job.Status.StartTime == nil || job.Status.CompletionTime == nil || job.Status.CompletionTime.Before(job.Status.StartTime) {
		t.Errorf("start %v completion %v", job.Status.StartTime, job.Status.CompletionTime)
	}
	var types []string
	for _, c := range job.Status.Conditions {
		types = append(types, string(c.Type))
	}
	if strings.Join(types, ",") != "SuccessCriteriaMet,Complete" {
		t.Errorf("conditions %v, want SuccessCriteriaMet then Complete", types)
	}
	if c := jobCondition(job, batchv1.JobComplete); c.Reason != "CompletionsReached" {
		t.Errorf("Complete reason %q", c.Reason)
	}
	bound.mu.Lock()
	if bound.max > 2 {
		t.Errorf("%d pods active at once, parallelism 2", bound.max)
	}
	if len(bound.created) != 5 {
		t.Errorf("%d pods created, want 5", len(bound.created))
	}
	bound.mu.Unlock()
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=five"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "Job" || ref.UID != created.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s owner %+v", p.Name, ref)
		}
		if p.Labels["controller-uid"] != string(created.UID) || p.Labels["batch.kubernetes.io/controller-uid"] != string(created.UID) || p.Labels["job-name"] != "five" {
			t.Errorf("pod %s labels %v", p.Name, p.Labels)
		}
		for _, f := range p.Finalizers {
			if f == batchv1.JobTrackingFinalizer {
				t.Errorf("pod %s still has the tracking finalizer after the Job completed", p.Name)
			}
		}
	}
	waitFor(t, "SuccessfulCreate and Completed events", func() bool {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=five"})
		if err != nil {
			return false
		}
		reasons := map[string]int{}
		for _, e := range evs.Items {
			if e.Source.Component == "job-controller" {
				reasons[e.Reason] += max(int(e.Count), 1)
			}
		}
		return reasons["SuccessfulCreate"] == 5 && reasons["Completed"] == 1
	})
	out := s.mustKubectl("get", "jobs")
	if !strings.Contains(out, "COMPLETIONS") || !strings.Contains(out, "DURATION") || !strings.Contains(out, "5/5") || !strings.Contains(out, "Complete") {
		t.Errorf("kubectl get jobs:\n%s", out)
	}
}

// A Job whose pods fail stops at backoffLimit with BackoffLimitExceeded,
// after waiting out the pod-recreation backoff (10 s after the first
// failure) before its second pod.
func TestJobBackoffLimitExceeded(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1")
	j := testJob("fails", 3, 1, 3, "0s")
	j.Spec.BackoffLimit = ptr.To(int32(1))
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := waitJob(t, cs, "fails", 60*time.Second, func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobFailed) != nil })
	c := jobCondition(job, batchv1.JobFailed)
	if c.Reason != batchv1.JobReasonBackoffLimitExceeded {
		t.Errorf("Failed reason %q", c.Reason)
	}
	if ft := jobCondition(job, batchv1.JobFailureTarget); ft == nil || ft.Reason != batchv1.JobReasonBackoffLimitExceeded {
		t.Errorf("FailureTarget %+v", ft)
	}
	if job.Status.Failed != 2 || job.Status.Succeeded != 0 || job.Status.Active != 0 || job.Status.CompletionTime != nil {
		t.Errorf("status %+v", job.Status)
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=fails"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods, want 2", len(pods.Items))
	}
	first, second := pods.Items[0], pods.Items[1]
	if second.CreationTimestamp.Before(&first.CreationTimestamp) {
		first, second = second, first
	}
	if gap := second.CreationTimestamp.Sub(first.CreationTimestamp.Time); gap < 9*time.Second {
		t.Errorf("replacement pod created %v after the first, want the 10 s backoff", gap)
	}
	waitFor(t, "BackoffLimitExceeded event", func() bool {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=BackoffLimitExceeded"})
		return err == nil && len(evs.Items) == 1 && evs.Items[0].Type == corev1.EventTypeWarning
	})
}

// An Indexed Job's pods carry their index: the annotation and label, the
// hostname <job>-<index>, and JOB_COMPLETION_INDEX on every container from
// the label; completedIndexes lists them all at the end.
func TestIndexedJob(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1")
	j := testJob("idx", 3, 3, 0, "200ms")
	j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := waitJob(t, cs, "idx", 60*time.Second, func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
	if job.Status.CompletedIndexes != "0-2" || job.Status.Succeeded != 3 {
		t.Errorf("completedIndexes %q succeeded %d", job.Status.CompletedIndexes, job.Status.Succeeded)
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=idx"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range pods.Items {
		ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		seen[ix] = true
		if p.Labels[batchv1.JobCompletionIndexAnnotation] != ix || p.Spec.Hostname != "idx-"+ix || !strings.HasPrefix(p.Name, "idx-"+ix+"-") {
			t.Errorf("pod %s: index %q label %q hostname %q", p.Name, ix, p.Labels[batchv1.JobCompletionIndexAnnotation], p.Spec.Hostname)
		}
		var env *corev1.EnvVar
		for i := range p.Spec.Containers[0].Env {
			if p.Spec.Containers[0].Env[i].Name == "JOB_COMPLETION_INDEX" {
				env = &p.Spec.Containers[0].Env[i]
			}
		}
		if env == nil || env.ValueFrom == nil || env.ValueFrom.FieldRef == nil ||
			env.ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("pod %s: JOB_COMPLETION_INDEX %+v", p.Name, env)
		}
	}
	if len(pods.Items) != 3 || !seen["0"] || !seen["1"] || !seen["2"] {
		t.Errorf("indexes %v over %d pods", seen, len(pods.Items))
	}
}

// A finished Job with ttlSecondsAfterFinished 5 is deleted about 5 s after
// it completed, and its pods go with it.
func TestJobTTLAfterFinished(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1")
	j := testJob("short-lived", 2, 2, 0, "0s")
	j.Spec.TTLSecondsAfterFinished = ptr.To(int32(5))
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := waitJob(t, cs, "short-lived", 60*time.Second, func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
	finished := jobCondition(job, batchv1.JobComplete).LastTransitionTime.Time
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=short-lived"})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods before the TTL: %v %v", pods, err)
	}
	waitWithin(t, 40*time.Second, "the Job to be deleted", func() bool {
		_, err := cs.BatchV1().Jobs("default").Get(ctx, "short-lived", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	// Second precision on both ends; the TTL must not fire early.
	if gone := time.Since(finished); gone < 4*time.Second {
		t.Errorf("deleted %v after finishing, TTL 5 s", gone)
	}
	waitFor(t, "the Job's pods to go", func() bool {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=short-lived"})
		return err == nil && len(pods.Items) == 0
	})
}

// A running pod deleted by a user is counted once, as failed (its tracking
// finalizer holds it until the Job counted it), and replaced; the Job
// still completes.
func TestJobPodDeletedCountedOnce(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1")
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, testJob("victim", 2, 1, 0, "3s"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var first corev1.Pod
	waitFor(t, "the first pod Running", func() bool {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=victim"})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
			return false
		}
		first = pods.Items[0]
		return true
	})
	if err := cs.CoreV1().Pods("default").Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The replacement waits out the 10 s backoff of one failure.
	job := waitJob(t, cs, "victim", 90*time.Second, func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
	if job.Status.Failed != 1 || job.Status.Succeeded != 2 {
		t.Errorf("failed %d succeeded %d, want 1 and 2", job.Status.Failed, job.Status.Succeeded)
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=victim"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		// The backoff runs from the deletion's start, not its grace end.
		if gap := p.CreationTimestamp.Sub(first.CreationTimestamp.Time); gap > 25*time.Second {
			t.Errorf("pod %s created %v after the deleted one", p.Name, gap)
		}
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, first.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deleted pod still there (finalizer kept?): %v", err)
	}
}

// A pod failure policy's FailJob rule ends the Job at the first matching
// exit code, with reason PodFailurePolicy, without waiting for the backoff
// limit.
func TestJobPodFailurePolicyFailJob(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1")
	j := testJob("policy", 4, 2, 42, "0s")
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:      batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
	}}}
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := waitJob(t, cs, "policy", 30*time.Second, func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobFailed) != nil })
	c := jobCondition(job, batchv1.JobFailed)
	if c.Reason != batchv1.JobReasonPodFailurePolicy || !strings.Contains(c.Message, "exit code 42 matching FailJob rule at index 0") {
		t.Errorf("Failed %s: %s", c.Reason, c.Message)
	}
	if job.Status.Active != 0 || job.Status.Failed < 1 || job.Status.Failed > 2 {
		t.Errorf("status %+v", job.Status)
	}
}

// An Indexed Job whose successPolicy (one succeeded index) is met while
// other indexes remain: SuccessCriteriaMet then Complete, both with reason
// SuccessPolicy, the remaining pods stopped and not counted as failed.
func TestJobSuccessPolicy(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1")
	j := testJob("sp", 5, 2, 0, "1s")
	j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To(int32(1))}}}
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := waitJob(t, cs, "sp", 60*time.Second, func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
	met, complete := jobCondition(job, batchv1.JobSuccessCriteriaMet), jobCondition(job, batchv1.JobComplete)
	if met == nil || met.Reason != batchv1.JobReasonSuccessPolicy || met.Message != "Matched rules at index 0" {
		t.Errorf("SuccessCriteriaMet %+v", met)
	}
	if complete.Reason != batchv1.JobReasonSuccessPolicy || complete.Message != "Matched rules at index 0" {
		t.Errorf("Complete %+v", complete)
	}
	st := job.Status
	if st.Succeeded < 1 || st.Succeeded >= 5 || st.Failed != 0 || st.Active != 0 ||
		!ptr.Equal(st.Ready, ptr.To(int32(0))) || !ptr.Equal(st.Terminating, ptr.To(int32(0))) || st.CompletionTime == nil {
		t.Errorf("status %+v", st)
	}
	// An invalid policy is refused.
	bad := testJob("sp-bad", 2, 2, 0, "1s")
	bad.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To(int32(1))}}}
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "requires indexed completion mode") {
		t.Errorf("non-indexed Job with successPolicy: %v", err)
	}
}
