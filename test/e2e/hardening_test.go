package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/namespaces"

	"github.com/kelp-project/kelp/runtime"
)

// shimsWithoutTask are the live shims of the cluster's containerd whose id
// names no containerd task.
func (c *cluster) shimsWithoutTask(t *testing.T) []string {
	t.Helper()
	sock := filepath.Join(c.runDir, "containerd", "containerd.sock")
	shims := liveShims(t, sock)
	if len(shims) == 0 {
		return nil
	}
	client, err := containerd.New(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	resp, err := client.TaskService().List(namespaces.WithNamespace(context.Background(), runtime.Namespace), &tasksapi.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tasks := map[string]bool{}
	for _, task := range resp.Tasks {
		tasks[task.ID] = true
	}
	var out []string
	for _, s := range shims {
		if !tasks[s.ID] {
			out = append(out, fmt.Sprintf("%s (pid %d)", s.ID, s.PID))
		}
	}
	return out
}

// liveShims lists the shims serving sock, zombies left out (PID 1 here
// reaps nothing, so a killed shim may linger as one).
func liveShims(t *testing.T, sock string) []runtime.Shim {
	t.Helper()
	all, err := runtime.ListShims("/proc", sock)
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Shim
	for _, s := range all {
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(s.PID), "stat")); err == nil && !strings.Contains(string(b), ") Z ") {
			out = append(out, s)
		}
	}
	return out
}

// startBareShim starts a shim for the containerd at sock the way
// containerd does (in a bundle holding a spec and the log fifo it writes
// to), and never creates its task. It returns the shim's id.
func startBareShim(t *testing.T, sock string) string {
	t.Helper()
	id := "bare-" + randomID()
	bundle := t.TempDir()
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(`{"ociVersion":"1.0.2"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(bundle, "log"), 0o600); err != nil {
		t.Fatal(err)
	}
	go func() { // the shim exits if nobody reads its log
		if f, err := os.Open(filepath.Join(bundle, "log")); err == nil {
			_, _ = io.Copy(io.Discard, f)
			f.Close()
		}
	}()
	cmd := exec.Command("containerd-shim-runc-v2", "-namespace", runtime.Namespace, "-id", id, "-address", sock, "-publish-binary", "containerd", "start")
	cmd.Dir = bundle
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("starting a bare shim: %v\n%s", err, out)
	}
	return id
}

// kelp killed with SIGKILL at several moments of a rollout, then started
// again: the rollout completes and no shim is left serving no task; kelp
// killall then leaves no shim at all.
func TestNoOrphanShimsAfterKillMidRollout(t *testing.T) {
	c := startCluster(t)
	c.apply(t, strings.Replace(seedDeployment, "replicas: 3", "replicas: 2", 1))
	c.mustKubectl("rollout", "status", "deployment/container-lab", "--timeout=90s")
	// The state a kill between a shim's start and its task's creation
	// leaves, made for sure: a shim started as containerd starts one,
	// never given a task. Whether a kill below lands in that window is
	// luck.
	sock := filepath.Join(c.runDir, "containerd", "containerd.sock")
	bare := startBareShim(t, sock)
	for i, delay := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond, 1500 * time.Millisecond} {
		image := []string{"kelp/demo:v2", "kelp/demo:v1"}[i%2]
		c.mustKubectl("set", "image", "deployment/container-lab", "app="+image)
		time.Sleep(delay)
		_ = c.cmd.Process.Kill()
		<-c.exited
		c.cmd = nil
		c.start()
		c.waitNodeReady()
		if out, err := c.kubectl("rollout", "status", "deployment/container-lab", "--timeout=120s"); err != nil {
			pods, _ := c.kubectl("get", "pods", "-o", "wide")
			yaml, _ := c.kubectl("get", "pods", "-o", "yaml")
			t.Fatalf("rollout to %s after kill -9 at +%v: %v\n%s\n%s\n%s", image, delay, err, out, pods, yaml)
		}
		// Orphans are judged once older than a few seconds and looked
		// for every 15 s (agent/kubelet): 45 s is ample.
		var orphans []string
		for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
			if orphans = c.shimsWithoutTask(t); len(orphans) == 0 {
				break
			}
		}
		if len(orphans) != 0 {
			t.Errorf("kill -9 at +%v: shims serving no task: %v", delay, orphans)
		}
		for _, s := range liveShims(t, sock) {
			if s.ID == bare {
				t.Errorf("the bare shim %s (pid %d) survived a restart", bare, s.PID)
			}
		}
	}
	c.stop()
	out, err := exec.Command(kelpBin, c.agentArgs("killall")...).CombinedOutput()
	if err != nil {
		t.Fatalf("kelp killall: %v\n%s", err, out)
	}
	if left := liveShims(t, filepath.Join(c.runDir, "containerd", "containerd.sock")); len(left) != 0 {
		t.Errorf("kelp killall left shims: %+v", left)
	}
}

// kelp killall given a data dir that is not the running cluster's refuses
// to touch the cluster's run dir, and with a run dir of its own removes
// nothing of the cluster's network: the pods keep serving throughout.
func TestKillAllLeavesAnotherClusterAlone(t *testing.T) {
	c := startCluster(t)
	c.apply(t, strings.Replace(seedDeployment, "replicas: 3", "replicas: 1", 1))
	c.mustKubectl("rollout", "status", "deployment/container-lab", "--timeout=90s")
	ip := c.livePods("app=container-lab")[0].Status.PodIP
	serving := func(when string) {
		t.Helper()
		if body, err := httpGet("http://" + ip + ":8000/"); err != nil || !strings.Contains(body, "Hello from") {
			t.Fatalf("the pod %s %s: %v %q", ip, when, err, body)
		}
		if out, err := exec.Command("nft", "list", "table", "ip", "kelp").CombinedOutput(); err != nil {
			t.Fatalf("table ip kelp %s: %v\n%s", when, err, out)
		}
	}
	serving("before")
	other := t.TempDir()
	out, err := exec.Command(kelpBin, "killall", "--data-dir", other, "--run-dir", c.runDir, "--cgroup-root", c.cgroupRoot).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "nothing removed") || !strings.Contains(string(out), c.runDir) {
		t.Errorf("kelp killall with another data dir on the cluster's run dir: %v\n%s", err, out)
	}
	serving("after a refused killall")
	if _, err := os.Stat(filepath.Join(c.runDir, "containerd", "containerd.sock")); err != nil {
		t.Errorf("the cluster's containerd socket: %v", err)
	}
	otherRun := "/run/kelp-e2e-other-" + randomID()
	out, err = exec.Command(kelpBin, "killall", "--data-dir", other, "--run-dir", otherRun, "--cgroup-root", "/kelp-e2e-other").CombinedOutput()
	if err != nil {
		t.Errorf("kelp killall of a data dir that never ran: %v\n%s", err, out)
	}
	serving("after killall of another data dir")
	if _, err := os.Stat(otherRun); !os.IsNotExist(err) {
		t.Errorf("killall left its own run dir %s: %v", otherRun, err)
	}
	if _, err := c.kubectl("get", "pods"); err != nil {
		t.Errorf("the API after both killalls: %v", err)
	}
}
