package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/snapshots"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// An image volume shows the image's files read-only; the pod's release
// removes its view (and only its), and the orphan sweep removes what pods
// no longer kept left.
func TestImageVolumeMountAndRelease(t *testing.T) {
	r := imgTestRuntime(t)
	ctx := context.Background()
	dir := t.TempDir()
	archive := filepath.Join(dir, "data.tar")
	imgTestTar(t, archive, imgTestArchive{name: "docker.io/kelp-test/data:1", file: "kitten\n"}, false)
	if _, err := r.ImportArchive(ctx, archive); err != nil {
		t.Fatal(err)
	}

	mountAt := func(uid, volume string) string {
		t.Helper()
		target := filepath.Join(dir, uid, volume)
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		// Always, with no registry: the local image, as on an air-gapped node.
		if err := r.MountImage(ctx, uid, volume, "kelp-test/data:1", corev1.PullAlways, target); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
		return target
	}
	a := mountAt("pod-a", "vol")
	b := mountAt("pod-b", "vol")

	if got, err := os.ReadFile(filepath.Join(a, "hello.txt")); err != nil || string(got) != "kitten\n" {
		t.Fatalf("hello.txt in the volume: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(a, "new"), []byte("x"), 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("writing into an image volume: %v, want EROFS", err)
	}

	views := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		err := r.client.SnapshotService(Snapshotter).Walk(r.ctx(ctx), func(_ context.Context, info snapshots.Info) error {
			if uid, ok := info.Labels[labelImageVolumePod]; ok {
				out[info.Name] = uid
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if v := views(); len(v) != 2 {
		t.Fatalf("views %v, want one per pod", v)
	}

	if err := unix.Unmount(a, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if err := r.ReleaseImageVolumes(ctx, "pod-a"); err != nil {
		t.Fatal(err)
	}
	if v := views(); len(v) != 1 || v[imageVolumeKey("pod-b", "vol")] != "pod-b" {
		t.Fatalf("after pod-a's release: %v, want pod-b's alone", v)
	}
	if got, err := os.ReadFile(filepath.Join(b, "hello.txt")); err != nil || string(got) != "kitten\n" {
		t.Fatalf("pod-b's volume after pod-a's release: %q, %v", got, err)
	}

	// A remount of a view left by an earlier try reuses it.
	if err := unix.Unmount(b, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	b = mountAt("pod-b", "vol")
	if _, err := os.Stat(filepath.Join(b, "hello.txt")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(b, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveOrphanImageVolumes(ctx, map[string]bool{"pod-b": true}); err != nil || len(views()) != 1 {
		t.Fatalf("the sweep removed a kept pod's view: %v, %v", err, views())
	}
	if err := r.RemoveOrphanImageVolumes(ctx, map[string]bool{}); err != nil || len(views()) != 0 {
		t.Fatalf("the sweep left %v (%v)", views(), err)
	}

	// An image that is not there and cannot be pulled.
	err := r.MountImage(ctx, "pod-c", "vol", "kelp-test/missing:1", corev1.PullIfNotPresent, filepath.Join(dir, "c"))
	var pe *PullError
	if !errors.As(err, &pe) || pe.Reason != "ErrImagePull" {
		t.Fatalf("a missing image: %v, want ErrImagePull", err)
	}
}
