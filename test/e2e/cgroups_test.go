package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestPodCgroups: on this host's real cgroups (v1 with cgroupfs on the
// project's machines), each pod gets its own cgroup, nested by QoS as
// upstream's kubelet nests them, with the pod-level limits (shares from
// requests, quota and memory from limits, --pod-max-pids), its
// containers run below it, and it goes with the pod.
func TestPodCgroups(t *testing.T) {
	c := startCluster(t, "--pod-max-pids", "200")
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: gold}
spec:
  containers:
  - {name: app, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"],
     resources: {limits: {cpu: 250m, memory: 64Mi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: silver}
spec:
  containers:
  - {name: app, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"],
     resources: {requests: {cpu: 100m, memory: 16Mi}, limits: {cpu: 500m, memory: 32Mi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: bronze}
spec:
  containers:
  - {name: app, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}
`)
	for _, p := range []string{"gold", "silver", "bronze"} {
		c.waitFor(60*time.Second, p+" Running", func() bool { return c.pod(p).Status.Phase == corev1.PodRunning })
	}
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	v2 := err == nil
	// path is a cgroup file: v2 has one hierarchy, v1 one per controller.
	path := func(controller, dir, file string) string {
		if v2 {
			return filepath.Join("/sys/fs/cgroup", dir, file)
		}
		return filepath.Join("/sys/fs/cgroup", controller, dir, file)
	}
	read := func(controller, dir, file string) string {
		b, err := os.ReadFile(path(controller, dir, file))
		if err != nil {
			t.Errorf("%v", err)
		}
		return strings.TrimSpace(string(b))
	}
	type want struct{ shares, weight, quotaV1, maxV2, memV1, memV2 string }
	pods := map[string]struct {
		qos string
		want
	}{
		"gold":   {"", want{"256", "10", "25000", "25000 100000", "67108864", "67108864"}},
		"silver": {"burstable", want{"102", "4", "50000", "50000 100000", "33554432", "33554432"}},
		"bronze": {"besteffort", want{"2", "1", "-1", "max 100000", "", "max"}},
	}
	dirs := map[string]string{}
	for name, p := range pods {
		pod := c.pod(name)
		if string(pod.Status.QOSClass) == "" {
			t.Fatalf("%s: no QoS class in its status", name)
		}
		dir := filepath.Join(c.cgroupRoot, p.qos, "pod"+string(pod.UID))
		dirs[name] = dir
		if v2 {
			for file, w := range map[string]string{"cpu.weight": p.weight, "cpu.max": p.maxV2, "memory.max": p.memV2, "pids.max": "200"} {
				if got := read("", dir, file); got != w {
					t.Errorf("%s (%s): %s/%s = %q, want %q", name, pod.Status.QOSClass, dir, file, got, w)
				}
			}
		} else {
			for file, w := range map[[2]string]string{{"cpu", "cpu.shares"}: p.shares, {"cpu", "cpu.cfs_quota_us"}: p.quotaV1,
				{"memory", "memory.limit_in_bytes"}: p.memV1, {"pids", "pids.max"}: "200"} {
				if got := read(file[0], dir, file[1]); w != "" && got != w {
					t.Errorf("%s (%s): %s %s/%s = %q, want %q", name, pod.Status.QOSClass, file[0], dir, file[1], got, w)
				}
			}
		}
		// The container runs in a cgroup of its own, below the pod's.
		ents, err := os.ReadDir(filepath.Dir(path("pids", dir, "x")))
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, e := range ents {
			if e.IsDir() && read("pids", filepath.Join(dir, e.Name()), "cgroup.procs") != "" {
				running++
			}
		}
		if running != 1 {
			t.Errorf("%s: %d container cgroups with processes below %s, want 1", name, running, dir)
		}
	}
	// Best-effort pods share the minimum weight, as upstream's QoS level.
	if v2 {
		if got := read("", filepath.Join(c.cgroupRoot, "besteffort"), "cpu.weight"); got != "1" {
			t.Errorf("besteffort level cpu.weight %q, want 1", got)
		}
	} else if got := read("cpu", filepath.Join(c.cgroupRoot, "besteffort"), "cpu.shares"); got != "2" {
		t.Errorf("besteffort level cpu.shares %q, want 2", got)
	}

	c.mustKubectl("delete", "pod", "silver", "--grace-period=0", "--wait=true")
	c.waitFor(30*time.Second, "silver's cgroup removed", func() bool {
		_, err := os.Stat(filepath.Dir(path("memory", dirs["silver"], "x")))
		return errors.Is(err, os.ErrNotExist)
	})
	if _, err := os.Stat(filepath.Dir(path("memory", dirs["gold"], "x"))); err != nil {
		t.Errorf("gold's cgroup went with silver: %v", err)
	}
}
