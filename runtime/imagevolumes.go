package runtime

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/mount"
	"github.com/containerd/containerd/snapshots"
	"github.com/opencontainers/image-spec/identity"
	corev1 "k8s.io/api/core/v1"
)

// An image volume is a read-only view of an image's unpacked layers: a
// snapshot View on the image's chain, labelled with the pod's UID so the
// pod's cleanup (or, after a crash, the orphan sweep) can remove it. The
// gc.root label keeps containerd's garbage collector off it (and so off
// the image layers it stands on) while the pod lives, even if the image
// itself is deleted meanwhile.
const (
	labelImageVolumePod = "kelp.io/image-volume-pod"
	labelGCRoot         = "containerd.io/gc.root"
)

func imageVolumeKey(podUID, volume string) string {
	return "kelp-image-volume/" + podUID + "/" + volume
}

// MountImage mounts the image ref, got as policy says (EnsureImage: an
// Always pull that fails falls back to a local image), read-only at
// target, as the pod's image volume volume.
func (r *Runtime) MountImage(ctx context.Context, podUID, volume, ref string, policy corev1.PullPolicy, target string) error {
	img, err := r.EnsureImage(ctx, ref, policy)
	if err != nil {
		return err
	}
	ctx = r.ctx(ctx)
	ci, err := r.client.GetImage(ctx, img.Ref)
	if err != nil {
		return fmt.Errorf("image %q: %w", img.Ref, err)
	}
	diffIDs, err := ci.RootFS(ctx)
	if err != nil {
		return fmt.Errorf("image %q: layers: %w", img.Ref, err)
	}
	sn := r.client.SnapshotService(Snapshotter)
	key := imageVolumeKey(podUID, volume)
	mounts, err := sn.View(ctx, key, identity.ChainID(diffIDs).String(), snapshots.WithLabels(map[string]string{
		labelImageVolumePod: podUID,
		labelGCRoot:         time.Now().UTC().Format(time.RFC3339),
	}))
	if errdefs.IsAlreadyExists(err) {
		// Made by an earlier try whose mount failed, or before a restart.
		mounts, err = sn.Mounts(ctx, key)
	}
	if err != nil {
		return fmt.Errorf("image %q: read-only view: %w", img.Ref, err)
	}
	for i := range mounts {
		mounts[i].Options = readOnly(mounts[i].Options)
	}
	if err := mount.All(mounts, target); err != nil {
		return fmt.Errorf("mounting image %q: %w", img.Ref, err)
	}
	return nil
}

// readOnly adds "ro" to mount options that lack it (a one-layer view is a
// bind mount of the layer, read-write unless told).
func readOnly(opts []string) []string {
	for _, o := range opts {
		if o == "ro" {
			return opts
		}
	}
	return append(opts, "ro")
}

// ReleaseImageVolumes removes the views of a pod's image volumes; the
// kubelet has unmounted them.
func (r *Runtime) ReleaseImageVolumes(ctx context.Context, podUID string) error {
	return r.removeImageVolumes(ctx, func(uid string) bool { return uid == podUID })
}

// RemoveOrphanImageVolumes removes the image volume views of pods not in
// keep (by UID): what a kelp that died during a pod's cleanup left.
func (r *Runtime) RemoveOrphanImageVolumes(ctx context.Context, keep map[string]bool) error {
	return r.removeImageVolumes(ctx, func(uid string) bool { return !keep[uid] })
}

func (r *Runtime) removeImageVolumes(ctx context.Context, match func(podUID string) bool) error {
	ctx = r.ctx(ctx)
	sn := r.client.SnapshotService(Snapshotter)
	var keys []string
	err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if uid, ok := info.Labels[labelImageVolumePod]; ok && match(uid) {
			keys = append(keys, info.Name)
		}
		return nil
	}, "labels."+strconv.Quote(labelImageVolumePod))
	if err != nil {
		return fmt.Errorf("listing image volumes: %w", err)
	}
	var failed []string
	for _, key := range keys {
		if err := sn.Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
			failed = append(failed, fmt.Sprintf("%s: %v", key, err))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("removing image volumes: %s", strings.Join(failed, "; "))
	}
	return nil
}
