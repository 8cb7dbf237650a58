package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPodResizeInPlace: a running container's cpu and memory limits
// change in place through pods/resize: the cgroup files the container
// sees (/sys/fs/cgroup, v1 here; v2 read too) and its pod's cgroup on the
// host show the new values, the container is not restarted, and the
// status reports the new resources with the resize done
// (observedGeneration caught up, no resize condition).
func TestPodResizeInPlace(t *testing.T) {
	c := startCluster(t)
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: resized}
spec:
  containers:
  - {name: app, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"],
     resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 200m, memory: 64Mi}}}
`)
	c.waitFor(60*time.Second, "resized Running", func() bool { return c.pod("resized").Status.Phase == corev1.PodRunning })
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	v2 := err == nil
	// inContainer reads the container's own cgroup files, as the upstream
	// conformance specs do.
	inContainer := func(v1File, v2File string) string {
		path := "/sys/fs/cgroup/" + v1File
		if v2 {
			path = "/sys/fs/cgroup/" + v2File
		}
		return strings.TrimSpace(c.mustKubectl("exec", "resized", "--", "head", "-n", "1", path))
	}
	check := func(mem, quota, shares string) {
		t.Helper()
		if v2 {
			// runc's conversions: memory.max in bytes, cpu.max "quota period".
			if got := inContainer("", "memory.max"); got != mem {
				t.Errorf("memory.max = %s, want %s", got, mem)
			}
			if got := inContainer("", "cpu.max"); got != quota+" 100000" {
				t.Errorf("cpu.max = %s, want %s 100000", got, quota)
			}
			return
		}
		if got := inContainer("memory/memory.limit_in_bytes", ""); got != mem {
			t.Errorf("memory.limit_in_bytes = %s, want %s", got, mem)
		}
		if got := inContainer("cpu/cpu.cfs_quota_us", ""); got != quota {
			t.Errorf("cpu.cfs_quota_us = %s, want %s", got, quota)
		}
		if got := inContainer("cpu/cpu.shares", ""); got != shares {
			t.Errorf("cpu.shares = %s, want %s", got, shares)
		}
	}
	check("67108864", "20000", "102")
	before := c.pod("resized")
	id := before.Status.ContainerStatuses[0].ContainerID

	c.mustKubectl("patch", "pod", "resized", "--subresource", "resize", "-p",
		`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"150m"},"limits":{"cpu":"300m","memory":"96Mi"}}}]}}`)
	c.waitFor(60*time.Second, "resize done", func() bool {
		p := c.pod("resized")
		if p.Generation != 2 || p.Status.ObservedGeneration < 2 || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodResizePending || cond.Type == corev1.PodResizeInProgress {
				return false
			}
		}
		r := p.Status.ContainerStatuses[0].Resources
		return r != nil && r.Limits.Memory().Cmp(resource.MustParse("96Mi")) == 0
	})
	check("100663296", "30000", "153")

	after := c.pod("resized")
	cs := after.Status.ContainerStatuses[0]
	if cs.ContainerID != id || cs.RestartCount != 0 {
		t.Errorf("container %s (restarts %d) after an in-place resize, want %s unrestarted", cs.ContainerID, cs.RestartCount, id)
	}
	if q := cs.AllocatedResources[corev1.ResourceCPU]; q.Cmp(resource.MustParse("150m")) != 0 {
		t.Errorf("allocatedResources = %v, want cpu 150m", cs.AllocatedResources)
	}
	// The pod's own cgroup on the host follows (pod-level limits).
	podDir := filepath.Join(c.cgroupRoot, "burstable", "pod"+string(after.UID))
	memFile := filepath.Join("/sys/fs/cgroup/memory", podDir, "memory.limit_in_bytes")
	if v2 {
		memFile = filepath.Join("/sys/fs/cgroup", podDir, "memory.max")
	}
	if b, err := os.ReadFile(memFile); err != nil || strings.TrimSpace(string(b)) != "100663296" {
		t.Errorf("pod cgroup %s = %q (%v), want 100663296", memFile, b, err)
	}
}
