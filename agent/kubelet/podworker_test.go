package kubelet

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/runtime"
)

// sync runs one step of the worker on the pod as the API has it now, as
// the informer would hand it over.
func (tk *testKubelet) sync(t *testing.T, w *podWorker, pod *corev1.Pod) bool {
	t.Helper()
	return w.sync(tk.apiPod(t, pod), false)
}

func assertCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("runtime calls:\n got  %q\n want %q", got, want)
	}
}

func containerStatus(t *testing.T, st []corev1.ContainerStatus, name string) corev1.ContainerStatus {
	t.Helper()
	for _, cs := range st {
		if cs.Name == name {
			return cs
		}
	}
	t.Fatalf("no status for container %s in %+v", name, st)
	return corev1.ContainerStatus{}
}

func podCond(st corev1.PodStatus, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func TestNewPodCreatesSandboxThenContainersInOrder(t *testing.T) {
	pod := testPod("web", "a", "b")
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)

	if done := tk.sync(t, w, pod); done {
		t.Fatal("sync of a new pod says it is finished")
	}
	if !slices.Equal(tk.net.Setups(), []string{"uid-web"}) {
		t.Fatalf("sandbox setups = %v, want one for uid-web", tk.net.Setups())
	}
	assertCalls(t, tk.rt.Took("pull", "create", "start"),
		"pull img-a", "create uid-web-a-0", "start uid-web-a-0",
		"pull img-b", "create uid-web-b-0", "start uid-web-b-0")

	spec, _ := tk.rt.Spec("uid-web-a-0")
	if spec.NetNSPath != "/run/test/netns/uid-web" {
		t.Errorf("container joins netns %q, want the sandbox's", spec.NetNSPath)
	}
	for k, v := range map[string]string{labelPodUID: "uid-web", labelContainerName: "a", labelAttempt: "0",
		labelPodName: "web", labelPodNamespace: "default", labelImage: "docker.io/library/img-a"} {
		if spec.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, spec.Labels[k], v)
		}
	}
	if _, ok := spec.Labels[labelInit]; ok {
		t.Error("an app container is labelled as init")
	}
	if !slices.ContainsFunc(spec.Mounts, func(m runtime.Mount) bool { return m.Destination == "/etc/resolv.conf" }) {
		t.Errorf("no /etc/resolv.conf among the mounts %+v", spec.Mounts)
	}
	hosts, err := os.ReadFile(tk.podDir(pod.UID) + "/hosts")
	if err != nil || !strings.Contains(string(hosts), "10.42.0.7\tweb\n") {
		t.Errorf("pod /etc/hosts = %q (%v), want the pod's IP and name", hosts, err)
	}

	// The next sync finds both running: nothing more to do.
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("pull", "create", "start", "stop"))
	if len(tk.net.Setups()) != 1 {
		t.Fatalf("the sandbox was set up again: %v", tk.net.Setups())
	}
	st := tk.apiPod(t, pod).Status
	if st.Phase != corev1.PodRunning || st.PodIP != "10.42.0.7" || st.HostIP != testNodeIP {
		t.Fatalf("status phase=%s podIP=%s hostIP=%s, want Running 10.42.0.7 %s", st.Phase, st.PodIP, st.HostIP, testNodeIP)
	}
	if podCond(st, corev1.PodReady) != corev1.ConditionTrue || podCond(st, corev1.PodReadyToStartContainers) != corev1.ConditionTrue {
		t.Fatalf("conditions %+v, want Ready and ReadyToStartContainers", st.Conditions)
	}
	if cs := containerStatus(t, st.ContainerStatuses, "b"); cs.State.Running == nil || !cs.Ready || cs.ContainerID != "containerd://uid-web-b-0" {
		t.Fatalf("container b status %+v, want running and ready", cs)
	}
}

func TestInitContainersRunInOrderBeforeAppContainers(t *testing.T) {
	pod := testPod("init", "app")
	pod.Spec.InitContainers = []corev1.Container{{Name: "i1", Image: "img-i1"}, {Name: "i2", Image: "img-i2"}}
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)

	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create"), "create uid-init-i1-0")
	if spec, _ := tk.rt.Spec("uid-init-i1-0"); spec.Labels[labelInit] != "true" {
		t.Errorf("init container labels %v, want %s=true", spec.Labels, labelInit)
	}
	st := tk.apiPod(t, pod).Status
	if st.Phase != corev1.PodPending || podCond(st, corev1.PodInitialized) != corev1.ConditionFalse {
		t.Fatalf("phase %s, Initialized %s while i1 runs; want Pending, False", st.Phase, podCond(st, corev1.PodInitialized))
	}
	if cs := containerStatus(t, st.ContainerStatuses, "app"); cs.State.Waiting == nil || cs.State.Waiting.Reason != "PodInitializing" {
		t.Fatalf("app container state %+v, want waiting PodInitializing", cs.State)
	}

	// Still running: the second waits.
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create"))

	exitContainer(t, tk.rt, "uid-init-i1-0", 0)
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create"), "create uid-init-i2-0")

	exitContainer(t, tk.rt, "uid-init-i2-0", 0)
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create"), "create uid-init-app-0")
	st = tk.apiPod(t, pod).Status
	if podCond(st, corev1.PodInitialized) != corev1.ConditionTrue {
		t.Fatalf("Initialized %s after both init containers succeeded", podCond(st, corev1.PodInitialized))
	}
	// Completed init containers are Ready, as upstream reports them (the
	// InitContainer conformance spec of a RestartAlways pod).
	for _, name := range []string{"i1", "i2"} {
		if cs := containerStatus(t, st.InitContainerStatuses, name); !cs.Ready || cs.State.Terminated == nil {
			t.Errorf("init container %s status %+v, want terminated and ready", name, cs)
		}
	}
}

func TestFailedInitContainerUnderNeverFailsThePod(t *testing.T) {
	pod := testPod("initfail", "app")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "img-i"}}
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	exitContainer(t, tk.rt, "uid-initfail-i-0", 1)
	tk.sync(t, w, pod)
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create"), "create uid-initfail-i-0")
	if ph := tk.apiPod(t, pod).Status.Phase; ph != corev1.PodFailed {
		t.Fatalf("phase %s, want Failed", ph)
	}
}

func TestRestartPolicyAfterExit(t *testing.T) {
	for _, tc := range []struct {
		policy  corev1.RestartPolicy
		code    int32
		restart bool
		phase   corev1.PodPhase
	}{
		{corev1.RestartPolicyNever, 0, false, corev1.PodSucceeded},
		{corev1.RestartPolicyNever, 1, false, corev1.PodFailed},
		{corev1.RestartPolicyOnFailure, 0, false, corev1.PodSucceeded},
		{corev1.RestartPolicyOnFailure, 1, true, corev1.PodRunning},
		{corev1.RestartPolicyAlways, 0, true, corev1.PodRunning},
		{corev1.RestartPolicyAlways, 1, true, corev1.PodRunning},
	} {
		t.Run(string(tc.policy)+"/"+map[bool]string{true: "fail", false: "ok"}[tc.code != 0], func(t *testing.T) {
			pod := testPod("job", "c")
			pod.Spec.RestartPolicy = tc.policy
			tk := newTestKubelet(t, pod)
			w := tk.worker(t, pod)
			tk.sync(t, w, pod)
			tk.rt.Took()
			exitContainer(t, tk.rt, "uid-job-c-0", tc.code)
			tk.sync(t, w, pod)
			var want []string
			if tc.restart {
				want = []string{"create uid-job-c-1", "start uid-job-c-1"}
			}
			assertCalls(t, tk.rt.Took("create", "start"), want...)
			st := tk.apiPod(t, pod).Status
			if st.Phase != tc.phase {
				t.Fatalf("phase %s, want %s", st.Phase, tc.phase)
			}
			cs := containerStatus(t, st.ContainerStatuses, "c")
			if tc.restart && (cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil ||
				cs.LastTerminationState.Terminated.ExitCode != tc.code) {
				t.Fatalf("restarted container status %+v, want restartCount 1 and the exit as lastState", cs)
			}
			if !tc.restart && (cs.State.Terminated == nil || cs.State.Terminated.ExitCode != tc.code) {
				t.Fatalf("container state %+v, want terminated with %d", cs.State, tc.code)
			}
		})
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	pod := testPod("crash", "c")
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	exitContainer(t, tk.rt, "uid-crash-c-0", 1)
	tk.sync(t, w, pod) // the first restart is immediate
	tk.rt.Took()
	exitContainer(t, tk.rt, "uid-crash-c-1", 1)
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create", "start"))
	cs := containerStatus(t, tk.apiPod(t, pod).Status.ContainerStatuses, "c")
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || !strings.Contains(cs.State.Waiting.Message, "back-off 10s") {
		t.Fatalf("state %+v, want waiting CrashLoopBackOff back-off 10s", cs.State)
	}
	if cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil {
		t.Fatalf("status %+v, want restartCount 1 with the last exit", cs)
	}
	// Only the previous instance is kept for lastState and logs --previous.
	if _, ok := tk.rt.Spec("uid-crash-c-0"); !ok {
		t.Fatal("spec of attempt 0 lost")
	}
	if _, err := tk.rt.ContainerStatus(t.Context(), "uid-crash-c-0"); err != nil {
		t.Fatalf("attempt 0 removed too early: %v", err)
	}
}

func TestRestartBackoffDoublesUpToMaxAndResets(t *testing.T) {
	b := &restartBackoff{max: 35 * time.Second}
	now := time.Now()
	if b.remaining(now) != 0 {
		t.Fatal("the first restart waits")
	}
	var delays []time.Duration
	for range 4 {
		b.next(now.Add(-time.Second), now)
		delays = append(delays, b.delay)
	}
	if !slices.Equal(delays, []time.Duration{10 * time.Second, 20 * time.Second, 35 * time.Second, 35 * time.Second}) {
		t.Fatalf("delays %v", delays)
	}
	if r := b.remaining(now); r <= 30*time.Second || r > 35*time.Second {
		t.Fatalf("remaining %v after a fresh exit, want about 35s", r)
	}
	b.next(now.Add(-backoffReset), now)
	if b.delay != 0 || b.remaining(now) != 0 {
		t.Fatalf("a container that ran %v still backs off %v", backoffReset, b.delay)
	}
}

func TestImagePullFailureBacksOff(t *testing.T) {
	pod := testPod("pull", "c")
	tk := newTestKubelet(t, pod)
	tk.rt.FailPull("img-c", &runtime.PullError{Reason: "ErrImagePull", Message: "no such image"})
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	cs := containerStatus(t, tk.apiPod(t, pod).Status.ContainerStatuses, "c")
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "ErrImagePull" {
		t.Fatalf("state %+v, want waiting ErrImagePull", cs.State)
	}
	tk.rt.Took()
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("pull"))
	cs = containerStatus(t, tk.apiPod(t, pod).Status.ContainerStatuses, "c")
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "ImagePullBackOff" {
		t.Fatalf("state %+v, want waiting ImagePullBackOff", cs.State)
	}
}

func TestRunningContainersAreAdoptedNotRestarted(t *testing.T) {
	pod := testPod("adopt", "c")
	tk := newTestKubelet(t, pod)
	id := adopt(tk.rt, pod, "c", 3)
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create", "start", "stop", "remove"))
	cs := containerStatus(t, tk.apiPod(t, pod).Status.ContainerStatuses, "c")
	if cs.State.Running == nil || cs.ContainerID != "containerd://"+id || cs.RestartCount != 3 {
		t.Fatalf("status %+v, want the adopted instance running with restartCount 3", cs)
	}
}

func TestHostNetworkPodGetsNoSandboxNetNS(t *testing.T) {
	pod := testPod("host", "c")
	pod.Spec.HostNetwork = true
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	tk.sync(t, w, pod)
	if len(tk.net.Setups()) != 0 {
		t.Fatalf("a hostNetwork pod got sandboxes %v", tk.net.Setups())
	}
	spec, ok := tk.rt.Spec("uid-host-c-0")
	if !ok || spec.NetNSPath != "" {
		t.Fatalf("container spec netns %q (created %v), want the host's", spec.NetNSPath, ok)
	}
	st := tk.apiPod(t, pod).Status
	if st.PodIP != testNodeIP || podCond(st, corev1.PodReadyToStartContainers) != corev1.ConditionTrue {
		t.Fatalf("podIP %s, ReadyToStartContainers %s; want the node IP and True", st.PodIP, podCond(st, corev1.PodReadyToStartContainers))
	}
}

func TestDeletedPodIsTornDown(t *testing.T) {
	pod := testPod("gone", "a", "b")
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	tk.rt.Took()
	if !w.sync(pod, true) {
		t.Fatal("sync of a deleted pod does not finish the worker")
	}
	stops := tk.rt.Took("stop", "remove")
	slices.Sort(stops)
	assertCalls(t, stops, "remove uid-gone-a-0", "remove uid-gone-b-0", "stop uid-gone-a-0 2s", "stop uid-gone-b-0 2s")
	if left, _ := tk.rt.ListContainers(t.Context(), nil); len(left) != 0 {
		t.Fatalf("containers left: %+v", left)
	}
	if !slices.Equal(tk.net.Teardowns(), []string{"uid-gone"}) {
		t.Fatalf("teardowns %v, want uid-gone", tk.net.Teardowns())
	}
	if _, err := os.Stat(tk.podDir(pod.UID)); !os.IsNotExist(err) {
		t.Fatalf("pod dir still there: %v", err)
	}
}

func TestTerminatingPodIsStoppedAndDeletionConfirmed(t *testing.T) {
	pod := testPod("term", "c")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	tk.rt.Took()

	terminating := tk.apiPod(t, pod)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	terminating.DeletionGracePeriodSeconds = ptr.To[int64](0)
	if !w.sync(terminating, false) {
		t.Fatal("termination did not finish the pod")
	}
	assertCalls(t, tk.rt.Took("stop", "remove"), "stop uid-term-c-0 0s", "remove uid-term-c-0")
	if !slices.Equal(tk.net.Teardowns(), []string{"uid-term"}) {
		t.Fatalf("teardowns %v", tk.net.Teardowns())
	}
	if _, err := tk.client.CoreV1().Pods("default").Get(t.Context(), "term", metav1.GetOptions{}); err == nil {
		t.Fatal("the pod's deletion was not confirmed")
	}
}

func TestNeedsSyncIgnoresStatusOnlyChanges(t *testing.T) {
	old := testPod("p", "c")
	cur := old.DeepCopy()
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if needsSync(old, cur) {
		t.Error("a status-only change wakes the worker")
	}
	cur.Status.Phase = corev1.PodFailed
	if !needsSync(old, cur) {
		t.Error("a phase change does not wake the worker")
	}
	cur = old.DeepCopy()
	cur.Labels = map[string]string{"a": "b"}
	if !needsSync(old, cur) {
		t.Error("a label change does not wake the worker")
	}
}

func TestOrphansOfPodsDeletedWhileDownAreRemoved(t *testing.T) {
	kept := testPod("kept", "c")
	tk := newTestKubelet(t, kept)
	keptID := adopt(tk.rt, kept, "c", 0)
	orphanID := adopt(tk.rt, testPod("orphan", "c"), "c", 0)
	tk.removeOrphans(t.Context())
	assertCalls(t, tk.rt.Took("stop", "remove"), "stop "+orphanID+" 0s", "remove "+orphanID)
	if _, err := tk.rt.ContainerStatus(t.Context(), keptID); err != nil {
		t.Fatalf("the kept pod's container went: %v", err)
	}
	if len(tk.net.Recovered()) != 1 || !tk.net.Recovered()["uid-kept"] {
		t.Fatalf("network recovered with %v, want only uid-kept", tk.net.Recovered())
	}
}

// A hostPort is handed to the node network, once, with the pod's IP, and
// the pod runs.
func TestHostPortIsMapped(t *testing.T) {
	pod := testPod("web", "app")
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)
	w.sync(pod, false)
	w.sync(pod, false)
	if got := tk.net.Mapped(); len(got) != 1 || got[0] != "web 10.42.0.7" {
		t.Errorf("host ports mapped %q, want once for web at 10.42.0.7", got)
	}
	if list, _ := tk.rt.ListContainers(t.Context(), nil); len(list) != 1 || list[0].State != runtime.StateRunning {
		t.Errorf("the pod's container did not start: %+v", list)
	}
}
