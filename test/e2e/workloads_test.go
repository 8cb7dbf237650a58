package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/podutils"
)

// The workload controllers driving real containers: a DaemonSet's pod and
// its rolling update, Jobs whose pods really exit (an Indexed one reading
// JOB_COMPLETION_INDEX, a failing one running out of retries, a finished
// one removed by its TTL), a drain that a PodDisruptionBudget holds, and
// a CronJob's Job one real minute later.
func TestWorkloadControllers(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	node := c.node().Name
	// A CronJob of every minute, made first so that its first run falls
	// while the other subtests run; the last subtest waits for it.
	c.apply(t, `apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "* * * * *"
  concurrencyPolicy: Forbid
  successfulJobsHistoryLimit: 2
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1
          containers: [{name: tick, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "echo tick at $(date +%H:%M:%S)"]}]
`)

	t.Run("DaemonSet", func(t *testing.T) {
		c.apply(t, `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-agent}
spec:
  selector: {matchLabels: {app: node-agent}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata: {labels: {app: node-agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: agent, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "echo agent $VERSION on $NODE; exec sleep 3600"],
        env: [{name: VERSION, value: "1"}, {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]}]
`)
		if out, err := c.kubectl("rollout", "status", "ds/node-agent", "--timeout=60s"); err != nil {
			t.Fatalf("rollout status: %v\n%s", err, out)
		}
		pods := c.livePods("app=node-agent")
		if len(pods) != 1 || pods[0].Spec.NodeName != node || pods[0].Status.Phase != corev1.PodRunning {
			t.Fatalf("want one Running daemon pod on %s, got %d: %+v", node, len(pods), pods)
		}
		if logs := c.mustKubectl("logs", pods[0].Name); !strings.Contains(logs, "agent 1 on "+node) {
			t.Errorf("daemon pod's log: %q", logs)
		}
		first := pods[0].Name
		c.mustKubectl("set", "env", "ds/node-agent", "VERSION=2")
		if out, err := c.kubectl("rollout", "status", "ds/node-agent", "--timeout=60s"); err != nil {
			t.Fatalf("rollout status after the update: %v\n%s", err, out)
		}
		pods = c.livePods("app=node-agent")
		if len(pods) != 1 || pods[0].Name == first {
			t.Fatalf("want the daemon pod replaced by one of revision 2, got %d pods (first was %s): %v", len(pods), first, podNames(pods))
		}
		c.waitFor(20*time.Second, "the new daemon pod logs version 2", func() bool {
			logs, _ := c.kubectl("logs", pods[0].Name)
			return strings.Contains(logs, "agent 2 on "+node)
		})
		if out := c.mustKubectl("rollout", "history", "ds/node-agent"); !strings.Contains(out, "1 ") || !strings.Contains(out, "2 ") {
			t.Errorf("rollout history should list revisions 1 and 2:\n%s", out)
		}
	})

	t.Run("IndexedJob", func(t *testing.T) {
		c.apply(t, `apiVersion: batch/v1
kind: Job
metadata: {name: indexed}
spec:
  completions: 3
  parallelism: 3
  completionMode: Indexed
  ttlSecondsAfterFinished: 15
  template:
    spec:
      restartPolicy: Never
      containers: [{name: work, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "echo index=$JOB_COMPLETION_INDEX"]}]
`)
		if out, err := c.kubectl("wait", "--for=condition=Complete", "job/indexed", "--timeout=60s"); err != nil {
			t.Fatalf("wait Complete: %v\n%s", err, out)
		}
		j, err := c.cs.BatchV1().Jobs("default").Get(ctx, "indexed", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if j.Status.Succeeded != 3 || j.Status.CompletedIndexes != "0-2" {
			t.Errorf("status: succeeded %d, completedIndexes %q; want 3 and 0-2", j.Status.Succeeded, j.Status.CompletedIndexes)
		}
		pods, err := c.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=indexed"})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded {
				t.Errorf("pod %s is %s, want Succeeded", p.Name, p.Status.Phase)
			}
			logs, err := c.kubectl("logs", p.Name)
			if err != nil {
				t.Errorf("logs %s: %v", p.Name, err)
			}
			idx := p.Annotations["batch.kubernetes.io/job-completion-index"]
			if strings.TrimSpace(logs) != "index="+idx {
				t.Errorf("pod %s (index %s) logged %q", p.Name, idx, logs)
			}
			seen[idx] = true
		}
		if len(seen) != 3 {
			t.Errorf("want pods for indexes 0, 1, 2; got %v", seen)
		}
		// ttlSecondsAfterFinished: the Job and its pods go 15 s after it finished.
		c.waitFor(60*time.Second, "the finished Job removed by its TTL", func() bool {
			_, err := c.cs.BatchV1().Jobs("default").Get(ctx, "indexed", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		c.waitFor(30*time.Second, "the Job's pods removed with it", func() bool {
			pods, err := c.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=indexed"})
			return err == nil && len(pods.Items) == 0
		})
	})

	t.Run("FailingJob", func(t *testing.T) {
		c.apply(t, `apiVersion: batch/v1
kind: Job
metadata: {name: failing}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers: [{name: work, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "echo trying; exit 3"]}]
`)
		var failed *batchv1.JobCondition
		c.waitFor(90*time.Second, "the Job Failed after its backoff limit", func() bool {
			j, err := c.cs.BatchV1().Jobs("default").Get(ctx, "failing", metav1.GetOptions{})
			if err != nil {
				return false
			}
			for i := range j.Status.Conditions {
				if cond := j.Status.Conditions[i]; cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
					failed = &cond
				}
			}
			return failed != nil
		})
		if failed.Reason != "BackoffLimitExceeded" {
			t.Errorf("Failed reason %q, want BackoffLimitExceeded", failed.Reason)
		}
		pods, err := c.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=failing"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 2 {
			t.Errorf("want 2 pods (the first try and one retry), got %d", len(pods.Items))
		}
		for _, p := range pods.Items {
			cs := containerStatus(&p, "work")
			if p.Status.Phase != corev1.PodFailed || cs == nil || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 3 {
				t.Errorf("pod %s: phase %s, container %+v; want Failed with exit code 3", p.Name, p.Status.Phase, cs)
			}
		}
	})

	t.Run("DrainHeldByBudget", func(t *testing.T) {
		c.apply(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: web, image: kelp/demo:v1, imagePullPolicy: IfNotPresent, readinessProbe: {httpGet: {path: /healthz, port: 8000}, periodSeconds: 1}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
`)
		if out, err := c.kubectl("rollout", "status", "deploy/web", "--timeout=60s"); err != nil {
			t.Fatalf("rollout: %v\n%s", err, out)
		}
		c.waitFor(20*time.Second, "the budget allowing one disruption", func() bool {
			b, err := c.cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
			return err == nil && b.Status.DisruptionsAllowed == 1 && b.Status.CurrentHealthy == 2
		})
		// One node: the evicted pod's replacement cannot run anywhere, so
		// the budget refuses the second eviction until the drain gives up.
		out, err := c.kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=20s")
		if err == nil {
			t.Fatalf("drain of the only node succeeded although the budget allows one disruption:\n%s", out)
		}
		if !strings.Contains(out, "disruption budget") {
			t.Errorf("drain's output should say the budget refused:\n%s", out)
		}
		ready := 0
		for _, p := range c.livePods("app=web") {
			if p.Spec.NodeName != "" && podutils.IsPodReady(&p) {
				ready++
			}
		}
		if ready != 1 {
			t.Errorf("want exactly one web pod left Ready while drained, got %d", ready)
		}
		if ds := c.livePods("app=node-agent"); len(ds) != 1 || ds[0].Status.Phase != corev1.PodRunning {
			t.Errorf("drain --ignore-daemonsets must leave the daemon pod running: %v", podNames(ds))
		}
		c.mustKubectl("uncordon", node)
		if out, err := c.kubectl("rollout", "status", "deploy/web", "--timeout=60s"); err != nil {
			t.Fatalf("after uncordon: %v\n%s", err, out)
		}
	})

	t.Run("CronJob", func(t *testing.T) {
		// One real minute: the controller's clock is the wall clock here
		// (the fake-clock cases are the controller's unit tests).
		var done *batchv1.Job
		c.waitFor(130*time.Second, "a Job the CronJob scheduled to complete", func() bool {
			l, err := c.cs.BatchV1().Jobs("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			for i, j := range l.Items {
				if ref := metav1.GetControllerOf(&j); ref != nil && ref.Kind == "CronJob" && ref.Name == "tick" && j.Status.Succeeded == 1 {
					done = &l.Items[i]
					return true
				}
			}
			return false
		})
		if !strings.HasPrefix(done.Name, "tick-") {
			t.Errorf("scheduled Job %s: want tick-<minutes since the epoch>", done.Name)
		}
		c.waitFor(20*time.Second, "the CronJob's status to record the run", func() bool {
			cj, err := c.cs.BatchV1().CronJobs("default").Get(ctx, "tick", metav1.GetOptions{})
			return err == nil && cj.Status.LastScheduleTime != nil && cj.Status.LastSuccessfulTime != nil
		})
		c.mustKubectl("create", "job", "by-hand", "--from=cronjob/tick")
		if out, err := c.kubectl("wait", "--for=condition=Complete", "job/by-hand", "--timeout=60s"); err != nil {
			t.Fatalf("a Job made from the CronJob by hand: %v\n%s", err, out)
		}
		// (The scheduled Job's pod may have run before the drain above,
		// which evicts finished pods too: read the log of this one.)
		if logs := c.mustKubectl("logs", "job/by-hand"); !strings.Contains(logs, "tick at ") {
			t.Errorf("the Job from the CronJob's template printed %q", logs)
		}
	})
}

func podNames(pods []corev1.Pod) string {
	var names []string
	for _, p := range pods {
		names = append(names, fmt.Sprintf("%s(%s)", p.Name, p.Status.Phase))
	}
	return strings.Join(names, ", ")
}
