package kubelet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kelp-project/kelp/agent/kubelet/prober"
	"github.com/kelp-project/kelp/runtime"
)

// containerID names a container instance: unique per pod, container and
// attempt, so a restart never collides with the instance it replaces.
// containerd refuses identifiers longer than 76 characters, which a pod
// UID (36) and a container name (up to 63) can exceed: then the name is
// replaced by a hash of it. Nothing reads the name back from the ID (the
// kubelet finds its containers by their labels).
func containerID(pod *corev1.Pod, name string, attempt int) string {
	id := fmt.Sprintf("%s-%s-%d", pod.UID, name, attempt)
	if len(id) <= maxContainerIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(name))
	return fmt.Sprintf("%s-%x-%d", pod.UID, sum[:8], attempt)
}

// maxContainerIDLen is containerd's limit on identifiers.
const maxContainerIDLen = 76

// logPath is upstream's layout: /var/log/pods/<ns>_<name>_<uid>/<container>/<restart>.log
func (k *Kubelet) logPath(pod *corev1.Pod, name string, attempt int) string {
	return filepath.Join(k.logRoot(), fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), name, strconv.Itoa(attempt)+".log")
}

func (k *Kubelet) logRoot() string {
	if k.cfg.LogRoot != "" {
		return k.cfg.LogRoot
	}
	return "/var/log/pods"
}

// startContainer pulls the image, creates and starts attempt n of c, then
// runs its postStart hook; failures become the container's waiting reason
// and an Event, as upstream reports them.
func (w *podWorker) startContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, n int, init bool, previous []runtime.ContainerStatus) {
	k := w.k
	b := w.backoffFor("image:" + c.Name)
	if wait := b.remaining(b.lastFailure); wait > 0 {
		w.waiting[c.Name] = waitingState{"ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q", c.Image)}
		time.AfterFunc(wait, w.kick)
		return
	}
	img, err := k.runtime.EnsureImage(ctx, c.Image, c.ImagePullPolicy)
	if err != nil {
		var pe *runtime.PullError
		reason, msg := "ErrImagePull", err.Error()
		if errors.As(err, &pe) {
			reason, msg = pe.Reason, pe.Message
		}
		w.waiting[c.Name] = waitingState{reason, msg}
		k.event(pod, corev1.EventTypeWarning, "Failed", "Failed to pull image %q: %s", c.Image, msg)
		b.lastFailure = time.Now()
		b.next(time.Time{}, b.lastFailure)
		time.AfterFunc(b.remaining(b.lastFailure), w.kick)
		return
	}
	b.delay = 0
	spec, err := w.containerSpec(ctx, pod, c, img, n, init)
	if err != nil {
		w.waiting[c.Name] = waitingState{"CreateContainerConfigError", err.Error()}
		k.event(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return
	}
	// Keep only the previous instance (for lastState and logs --previous).
	for i := 0; i+1 < len(previous); i++ {
		_ = k.runtime.RemoveContainer(ctx, previous[i].ID)
	}
	if err := os.MkdirAll(filepath.Dir(spec.LogPath), 0o755); err != nil {
		w.waiting[c.Name] = waitingState{"CreateContainerError", err.Error()}
		return
	}
	if err := k.runtime.CreateContainer(ctx, spec); err != nil {
		w.waiting[c.Name] = waitingState{"CreateContainerError", err.Error()}
		k.event(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return
	}
	k.event(pod, corev1.EventTypeNormal, "Created", "Created container: %s", c.Name)
	if err := k.runtime.StartContainer(ctx, spec.ID); err != nil {
		w.waiting[c.Name] = waitingState{"RunContainerError", err.Error()}
		k.event(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return
	}
	k.event(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
	delete(w.waiting, c.Name)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if err := w.hook(ctx, c, spec.ID, c.Lifecycle.PostStart); err != nil {
			k.event(pod, corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed: %v", err)
			_ = k.runtime.StopContainer(ctx, spec.ID, prober.GracePeriod(pod))
		}
	}
	w.started[spec.ID] = true
	logrus.Debugf("kubelet: started %s/%s %s (attempt %d)", pod.Namespace, pod.Name, c.Name, n)
}

// containerSpec turns the pod's container into what the runtime needs.
func (w *podWorker) containerSpec(ctx context.Context, pod *corev1.Pod, c *corev1.Container, img runtime.Image, n int, init bool) (runtime.ContainerSpec, error) {
	k := w.k
	env, err := k.containerEnv(ctx, pod, c, w.podIP.String())
	if err != nil {
		return runtime.ContainerSpec{}, err
	}

	cgroupParent, err := k.podCgroup(ctx, pod)
	if err != nil {
		return runtime.ContainerSpec{}, fmt.Errorf("pod cgroup: %w", err)
	}
	hostname := k.utsHostname(pod)
	labels := map[string]string{
		labelPodUID: string(pod.UID), labelPodName: pod.Name, labelPodNamespace: pod.Namespace,
		labelContainerName: c.Name, labelAttempt: strconv.Itoa(n),
	}
	if init {
		labels[labelInit] = "true"
	}
	labels[labelImage], labels[labelImageID] = img.Ref, img.ID
	labels[labelResources] = encodeResources(c.Resources)
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	mounts, err := k.containerMounts(pod, c, vars)
	if err != nil {
		return runtime.ContainerSpec{}, err
	}
	command := make([]string, len(c.Command))
	for i, a := range c.Command {
		command[i] = expand(a, vars)
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = expand(a, vars)
	}
	pidNS, err := w.targetPIDNamespace(ctx, pod, c.Name)
	if err != nil {
		return runtime.ContainerSpec{}, err
	}
	return runtime.ContainerSpec{
		PIDNSPath:    pidNS,
		ID:           containerID(pod, c.Name, n),
		Labels:       labels,
		Image:        img,
		Command:      command,
		Args:         args,
		Env:          env,
		WorkingDir:   c.WorkingDir,
		Hostname:     hostname,
		NetNSPath:    w.netnsPath,
		Mounts:       mounts,
		CgroupParent: cgroupParent,
		Resources:    containerResources(c),
		Security:     containerSecurity(pod, c),
		Sysctls:      podSysctls(pod),
		LogPath:      k.logPath(pod, c.Name, n),
		TTY:          c.TTY,
		Stdin:        c.Stdin,
	}, nil
}

// containerResources maps requests and limits as upstream (in v1 units;
// runc converts them on v2): shares from the CPU request (the limit when
// no request is given, 2 at least), quota from the CPU limit over a
// 100 ms period, and the memory limit. The pod's pids limit is its
// cgroup's (podResources), as upstream.
func containerResources(c *corev1.Container) runtime.Resources {
	var r runtime.Resources
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		r.CPUShares = milliCPUToShares(q.MilliValue())
	} else if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		r.CPUShares = milliCPUToShares(q.MilliValue())
	} else {
		r.CPUShares = minShares
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		r.CPUPeriod = cpuPeriod
		r.CPUQuota = max(q.MilliValue()*cpuPeriod/1000, minQuota)
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		r.MemoryLimit = q.Value()
	}
	return r
}

func containerSecurity(pod *corev1.Pod, c *corev1.Container) runtime.Security {
	var s runtime.Security
	if psc := pod.Spec.SecurityContext; psc != nil {
		s.RunAsUser, s.RunAsGroup = psc.RunAsUser, psc.RunAsGroup
		s.SupplementalGroups = psc.SupplementalGroups
		// As CRI runtimes do: the fsGroup that owns the volumes is one of
		// the containers' groups.
		if psc.FSGroup != nil {
			s.SupplementalGroups = append(append([]int64(nil), psc.SupplementalGroups...), *psc.FSGroup)
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			s.RunAsUser = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			s.RunAsGroup = sc.RunAsGroup
		}
		s.Privileged = sc.Privileged != nil && *sc.Privileged
		s.ReadOnlyRootfs = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
		s.NoNewPrivileges = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
		if caps := sc.Capabilities; caps != nil {
			for _, x := range caps.Add {
				s.CapAdd = append(s.CapAdd, string(x))
			}
			for _, x := range caps.Drop {
				s.CapDrop = append(s.CapDrop, string(x))
			}
		}
	}
	return s
}

// targetPIDNamespace is the PID namespace an ephemeral container named
// name joins: that of its targetContainerName's running instance (so a
// debugger sees that container's processes), or "" for any other
// container, or an ephemeral one without a target.
func (w *podWorker) targetPIDNamespace(ctx context.Context, pod *corev1.Pod, name string) (string, error) {
	target := ""
	for _, ec := range pod.Spec.EphemeralContainers {
		if ec.Name == name {
			target = ec.TargetContainerName
		}
	}
	if target == "" {
		return "", nil
	}
	inst, err := w.instances(ctx)
	if err != nil {
		return "", err
	}
	last := latest(inst[target])
	if last == nil || last.State != runtime.StateRunning || last.Pid == 0 {
		return "", fmt.Errorf("target container %q is not running", target)
	}
	return fmt.Sprintf("/proc/%d/ns/pid", last.Pid), nil
}
