package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kelp-project/kelp/runtime"
	"github.com/kelp-project/kelp/runtime/containerlog"
)

// volumeDir is where a pod volume's content lives on the node.
func (k *Kubelet) volumeDir(pod *corev1.Pod, name string) string {
	return filepath.Join(k.podDir(pod.UID), "volumes", name)
}

// prepareVolumes makes every volume's content ready before containers
// start (an image volume is the image's files, read-only), and refreshes configMap, secret, downward API, token, trust
// bundle and pod certificate content on each sync (files are replaced by rename, so containers see whole files).
func (k *Kubelet) prepareVolumes(ctx context.Context, pod *corev1.Pod) error {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if err := k.prepareVolume(ctx, pod, v); err != nil {
			var ce claimError
			if errors.As(err, &ce) {
				// Upstream's kubelet says so before it mounts anything.
				return fmt.Errorf("Unable to attach or mount volumes: unmounted volumes=[%s], unattached volumes=[%s]: error processing PVC %s/%s: %v",
					v.Name, v.Name, pod.Namespace, v.PersistentVolumeClaim.ClaimName, ce.error)
			}
			return fmt.Errorf("MountVolume.SetUp failed for volume %q : %v", v.Name, err)
		}
	}
	return nil
}

func (k *Kubelet) prepareVolume(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) error {
	dir := k.volumeDir(pod, v.Name)
	switch {
	case v.EmptyDir != nil:
		_, statErr := os.Stat(dir)
		fresh := os.IsNotExist(statErr)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		if v.EmptyDir.Medium == corev1.StorageMediumMemory && !isMountPoint(dir) {
			opts := "mode=0777"
			if v.EmptyDir.SizeLimit != nil {
				opts += ",size=" + strconv.FormatInt(v.EmptyDir.SizeLimit.Value(), 10)
			}
			if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
				return fmt.Errorf("mounting tmpfs: %w", err)
			}
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return err
		}
		// Only when made: what containers wrote since is theirs to own,
		// and a big emptyDir is not walked at every sync.
		if gid, ok := fsGroupOf(pod); ok && fresh {
			return setVolumeOwnership(dir, gid, false)
		}
		return nil
	case v.HostPath != nil:
		return prepareHostPath(v.HostPath)
	case v.PersistentVolumeClaim != nil:
		return k.prepareClaim(ctx, pod, v)
	case v.Image != nil:
		// Mounted once; the mount outlives an agent restart.
		if isMountPoint(dir) {
			return nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return k.runtime.MountImage(ctx, string(pod.UID), v.Name, v.Image.Reference, v.Image.PullPolicy, dir)
	case v.ConfigMap != nil:
		files, err := k.configMapFiles(ctx, pod, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode)
		if err != nil {
			return err
		}
		return writeOwnedVolumeFiles(pod, dir, files)
	case v.Secret != nil:
		files, err := k.secretFiles(ctx, pod, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode)
		if err != nil {
			return err
		}
		if err := ensureTmpfs(dir); err != nil {
			return err
		}
		return writeOwnedVolumeFiles(pod, dir, files)
	case v.DownwardAPI != nil:
		files, err := k.downwardFiles(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
		if err != nil {
			return err
		}
		return writeOwnedVolumeFiles(pod, dir, files)
	case v.Projected != nil:
		files := map[string]volumeFile{}
		for i, src := range v.Projected.Sources {
			var part map[string]volumeFile
			var err error
			switch {
			case src.ConfigMap != nil:
				part, err = k.configMapFiles(ctx, pod, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, v.Projected.DefaultMode)
			case src.Secret != nil:
				part, err = k.secretFiles(ctx, pod, src.Secret.Name, src.Secret.Items, src.Secret.Optional, v.Projected.DefaultMode)
			case src.DownwardAPI != nil:
				part, err = k.downwardFiles(pod, src.DownwardAPI.Items, v.Projected.DefaultMode)
			case src.ServiceAccountToken != nil:
				part, err = k.tokenFiles(ctx, pod, src.ServiceAccountToken, v.Projected.DefaultMode)
			case src.ClusterTrustBundle != nil:
				part, err = k.trustBundleFiles(ctx, pod, src.ClusterTrustBundle, v.Projected.DefaultMode)
			case src.PodCertificate != nil:
				part, err = k.podCertificateFiles(ctx, pod, v.Name, i, src.PodCertificate, v.Projected.DefaultMode)
			default:
				err = fmt.Errorf("projected source %+v is not supported by kelp yet", src)
			}
			if err != nil {
				return err
			}
			for p, f := range part {
				files[p] = f
			}
		}
		// Projected volumes carry Secrets and service-account tokens.
		if err := ensureTmpfs(dir); err != nil {
			return err
		}
		return writeOwnedVolumeFiles(pod, dir, files)
	}
	return fmt.Errorf("volume type is not supported by kelp yet")
}

func prepareHostPath(h *corev1.HostPathVolumeSource) error {
	typ := corev1.HostPathUnset
	if h.Type != nil {
		typ = *h.Type
	}
	fi, err := os.Stat(h.Path)
	switch typ {
	case corev1.HostPathDirectoryOrCreate:
		if os.IsNotExist(err) {
			return os.MkdirAll(h.Path, 0o755)
		}
	case corev1.HostPathFileOrCreate:
		if os.IsNotExist(err) {
			if err := os.MkdirAll(filepath.Dir(h.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(h.Path, os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
	case corev1.HostPathDirectory:
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", h.Path)
		}
	case corev1.HostPathFile:
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", h.Path)
		}
	case corev1.HostPathSocket:
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a socket file", h.Path)
		}
	}
	return nil
}

// claimError is a persistentVolumeClaim volume whose claim cannot be
// used (yet): missing, not bound, going away.
type claimError struct{ error }

// prepareClaim resolves a persistentVolumeClaim volume to the host path
// of the PersistentVolume bound to its claim, which containerMounts then
// bind-mounts like a hostPath volume. Resolved once per pod: a bound
// claim's volume never changes, and a running pod keeps its volume while
// its claim is being deleted (the claim's protection waits for the pod).
func (k *Kubelet) prepareClaim(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) error {
	k.mu.Lock()
	_, done := k.claimPaths[pod.UID][v.Name]
	k.mu.Unlock()
	if done {
		return nil
	}
	path, err := k.claimVolumePath(ctx, pod, v.PersistentVolumeClaim.ClaimName)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.claimPaths[pod.UID] == nil {
		k.claimPaths[pod.UID] = map[string]string{}
	}
	k.claimPaths[pod.UID][v.Name] = path
	return nil
}

// claimVolumePath is where the data of the volume bound to the pod's claim
// lives on this node: a hostPath or local PersistentVolume's path. The
// checks and their words are upstream kubelet's.
func (k *Kubelet) claimVolumePath(ctx context.Context, pod *corev1.Pod, claimName string) (string, error) {
	claim, err := k.claim(ctx, pod, claimName)
	switch {
	case err != nil:
		return "", claimError{fmt.Errorf("failed to fetch PVC from API server: %v", err)}
	case claim.DeletionTimestamp != nil && !podStarted(pod):
		return "", claimError{errors.New("PVC is being deleted")}
	case claim.Status.Phase != corev1.ClaimBound:
		return "", claimError{errors.New("PVC is not bound")}
	case claim.Spec.VolumeName == "":
		return "", claimError{errors.New("PVC has empty pvc.Spec.VolumeName")}
	}
	name := claim.Spec.VolumeName
	pv, err := k.volume(ctx, pod, name)
	switch {
	case err != nil:
		return "", fmt.Errorf("failed to fetch PV %s from API server: %v", name, err)
	case pv.Spec.ClaimRef == nil:
		return "", fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", name)
	case pv.Spec.ClaimRef.UID != claim.UID:
		return "", fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID (%s) does not point to claim.UID (%s)", name, pv.Spec.ClaimRef.UID, claim.UID)
	case pv.Spec.HostPath != nil:
		if err := prepareHostPath(pv.Spec.HostPath); err != nil {
			return "", err
		}
		return pv.Spec.HostPath.Path, nil
	case pv.Spec.Local != nil:
		if fi, err := os.Stat(pv.Spec.Local.Path); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("local volume %s: path %q is not a directory on this node", name, pv.Spec.Local.Path)
		}
		return pv.Spec.Local.Path, nil
	}
	return "", fmt.Errorf("PersistentVolume %s: its volume source is unsupported by kelp (only hostPath and local volumes are mounted)", name)
}

// podStarted reports whether any of pod's containers was ever created: a
// pod not started yet must not start on a claim being deleted.
func podStarted(pod *corev1.Pod) bool {
	for _, s := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if s.ContainerID != "" {
			return true
		}
	}
	return false
}

// claimPath is the host path prepareClaim resolved for the pod's volume.
func (k *Kubelet) claimPath(pod *corev1.Pod, volume string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.claimPaths[pod.UID][volume]
	return p, ok
}

type volumeFile struct {
	data []byte
	mode os.FileMode
}

func fileMode(item *int32, def *int32) os.FileMode {
	switch {
	case item != nil:
		return os.FileMode(*item)
	case def != nil:
		return os.FileMode(*def)
	}
	return 0o644
}

func keyFiles(data map[string][]byte, items []corev1.KeyToPath, def *int32, what string) (map[string]volumeFile, error) {
	out := map[string]volumeFile{}
	if len(items) == 0 {
		for key, v := range data {
			out[key] = volumeFile{v, fileMode(nil, def)}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("configuration error: key %q not found in %s", it.Key, what)
		}
		out[it.Path] = volumeFile{v, fileMode(it.Mode, def)}
	}
	return out, nil
}

func (k *Kubelet) configMapFiles(ctx context.Context, pod *corev1.Pod, name string, items []corev1.KeyToPath, optional *bool, def *int32) (map[string]volumeFile, error) {
	ns := pod.Namespace
	cm, err := k.configMap(ctx, pod, name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return map[string]volumeFile{}, nil
		}
		return nil, readError("configmap", name, err)
	}
	data := map[string][]byte{}
	for key, v := range cm.Data {
		data[key] = []byte(v)
	}
	for key, v := range cm.BinaryData {
		data[key] = v
	}
	return keyFiles(data, items, def, "ConfigMap "+ns+"/"+name)
}

func (k *Kubelet) secretFiles(ctx context.Context, pod *corev1.Pod, name string, items []corev1.KeyToPath, optional *bool, def *int32) (map[string]volumeFile, error) {
	ns := pod.Namespace
	s, err := k.secret(ctx, pod, name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return map[string]volumeFile{}, nil
		}
		return nil, readError("secret", name, err)
	}
	return keyFiles(s.Data, items, def, "Secret "+ns+"/"+name)
}

func (k *Kubelet) downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, def *int32) (map[string]volumeFile, error) {
	out := map[string]volumeFile{}
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = k.fieldValue(pod, it.FieldRef.FieldPath, "")
		case it.ResourceFieldRef != nil:
			v, err = k.resourceValue(pod, &pod.Spec.Containers[0], it.ResourceFieldRef)
		}
		if err != nil {
			return nil, err
		}
		out[it.Path] = volumeFile{[]byte(v), fileMode(it.Mode, def)}
	}
	return out, nil
}

// tokenFiles is a serviceAccountToken projection: the pod's token, from
// the token manager (fetched or refreshed when due).
func (k *Kubelet) tokenFiles(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection, def *int32) (map[string]volumeFile, error) {
	tok, err := k.tokens.token(ctx, pod, src)
	if err != nil {
		return nil, err
	}
	return map[string]volumeFile{src.Path: {[]byte(tok), fileMode(nil, def)}}, nil
}

// writeOwnedVolumeFiles writes a read-only volume's files, then applies
// the pod's fsGroup to them (after each write: new files are root's).
func writeOwnedVolumeFiles(pod *corev1.Pod, dir string, files map[string]volumeFile) error {
	if err := writeVolumeFiles(dir, files); err != nil {
		return err
	}
	if gid, ok := fsGroupOf(pod); ok {
		return setVolumeOwnership(dir, gid, true)
	}
	return nil
}

// writeVolumeFiles makes dir hold exactly files: each is written to a
// temporary name and renamed, so a reader never sees half a file; files no
// longer wanted are removed.
func writeVolumeFiles(dir string, files map[string]volumeFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for rel, f := range files {
		if strings.Contains(rel, "..") || filepath.IsAbs(rel) {
			return fmt.Errorf("invalid path %q", rel)
		}
		p := filepath.Join(dir, rel)
		if cur, err := os.ReadFile(p); err == nil && string(cur) == string(f.data) {
			_ = os.Chmod(p, f.mode)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp := p + ".kelp-tmp"
		if err := os.WriteFile(tmp, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(tmp, f.mode); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	return filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if _, ok := files[rel]; !ok {
			_ = os.Remove(p)
		}
		return nil
	})
}

// containerMounts lists the bind mounts of one container: its volumes
// (with subPath, or subPathExpr expanded with the container's environment
// vars), then the pod's hosts, hostname and resolv.conf, each unless a
// volume is mounted there (as the kubelet and containerd's CRI skip
// them), and a termination-message file, as the CRI runtime adds them.
func (k *Kubelet) containerMounts(pod *corev1.Pod, c *corev1.Container, vars map[string]string) ([]runtime.Mount, error) {
	vols := map[string]*corev1.Volume{}
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var out []runtime.Mount
	mounted := map[string]bool{}
	for _, m := range c.VolumeMounts {
		v := vols[m.Name]
		if v == nil {
			return nil, fmt.Errorf("volume %q of container %q is not defined in the pod", m.Name, c.Name)
		}
		src := k.volumeDir(pod, v.Name)
		switch {
		case v.HostPath != nil:
			src = v.HostPath.Path
		case v.PersistentVolumeClaim != nil:
			p, ok := k.claimPath(pod, v.Name)
			if !ok {
				// Never an empty directory in its place.
				return nil, fmt.Errorf("volume %q: claim %s not resolved yet", v.Name, v.PersistentVolumeClaim.ClaimName)
			}
			src = p
		}
		subPath, err := subPathOf(m, vars)
		if err != nil {
			return nil, err
		}
		if subPath != "" {
			if filepath.IsAbs(subPath) {
				return nil, fmt.Errorf("subPath %q must not be an absolute path", subPath)
			}
			if slices.Contains(strings.Split(filepath.ToSlash(subPath), "/"), "..") {
				return nil, fmt.Errorf("subPath %q must not contain '..'", subPath)
			}
			src = filepath.Join(src, subPath)
			if _, err := os.Stat(src); os.IsNotExist(err) {
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, err
				}
			}
		}
		readOnly := m.ReadOnly || v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil || v.Image != nil ||
			v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly
		out = append(out, runtime.Mount{Source: src, Destination: m.MountPath, ReadOnly: readOnly})
		mounted[filepath.Clean(m.MountPath)] = true
	}
	dir := k.podDir(pod.UID)
	for _, f := range []string{"hosts", "hostname", "resolv.conf"} {
		if dst := "/etc/" + f; !mounted[dst] {
			out = append(out, runtime.Mount{Source: filepath.Join(dir, f), Destination: dst})
		}
	}
	termPath := c.TerminationMessagePath
	if termPath == "" {
		termPath = corev1.TerminationMessagePathDefault
	}
	term := filepath.Join(dir, "containers", c.Name, "termination-log")
	if err := os.MkdirAll(filepath.Dir(term), 0o755); err != nil {
		return nil, err
	}
	if f, err := os.OpenFile(term, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666); err == nil {
		f.Close()
		_ = os.Chmod(term, 0o666)
	}
	out = append(out, runtime.Mount{Source: term, Destination: termPath})
	return out, nil
}

// terminationMessage is a terminated container's message, as upstream's
// kubelet makes it: what it wrote to its termination log (at most 4 KiB),
// or, under FallbackToLogsOnError when it wrote nothing and failed, the
// last 80 lines of its log, at most 2 KiB.
func (k *Kubelet) terminationMessage(pod *corev1.Pod, spec *corev1.Container, c runtime.ContainerStatus) string {
	b, _ := os.ReadFile(filepath.Join(k.podDir(pod.UID), "containers", spec.Name, "termination-log"))
	if len(b) > 4096 {
		b = b[:4096]
	}
	if len(b) == 0 && c.ExitCode != 0 {
		if spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
			return containerlog.Tail(k.logPath(pod, spec.Name, attempt(c)), 80, 2048)
		}
	}
	return string(b)
}

// isMountPoint reports whether something is mounted at dir. Comparing
// devices with the parent misses a bind mount from the same filesystem,
// which is what a one-layer image volume is (its snapshot lives on the
// node's disk, as the pod directory does).
func isMountPoint(dir string) bool {
	mounted, err := mountinfo.Mounted(dir)
	return err == nil && mounted
}

// ensureTmpfs makes dir a tmpfs mount, as upstream's kubelet backs secret
// and projected volumes by memory: what they hold never reaches the
// node's disk. Readable by every user of the pod, as upstream's.
func ensureTmpfs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if isMountPoint(dir) {
		return nil
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return fmt.Errorf("mounting tmpfs on %s: %w", dir, err)
	}
	return nil
}

// unmountVolumes unmounts the tmpfs and image volumes under a pod dir
// before removal (each as often as it is mounted there).
func unmountVolumes(podDir string) {
	entries, _ := os.ReadDir(filepath.Join(podDir, "volumes"))
	for _, e := range entries {
		p := filepath.Join(podDir, "volumes", e.Name())
		for isMountPoint(p) {
			if unix.Unmount(p, unix.MNT_DETACH) != nil {
				break
			}
		}
	}
}
