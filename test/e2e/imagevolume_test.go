package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An image volume (pull policy Always, on a node with no registry: the
// imported image) shows the image's files read-only in the container;
// once the pod is gone so is the mount.
func TestImageVolume(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: image-volume}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    volumeMounts: [{name: demo, mountPath: /volume}]
  volumes:
  - name: demo
    image: {reference: kelp/demo:v1, pullPolicy: Always}
`)
	c.waitFor(90*time.Second, "image-volume Running", func() bool { return c.pod("image-volume").Status.Phase == corev1.PodRunning })
	uid := string(c.pod("image-volume").UID)

	if out := c.mustKubectl("exec", "image-volume", "--", "ls", "-l", "/volume/demo"); !strings.Contains(out, "/volume/demo") {
		t.Fatalf("the image's /demo in the volume: %q", out)
	}
	out, err := c.kubectl("exec", "image-volume", "--", "touch", "/volume/new")
	if err == nil || !strings.Contains(out, "Read-only file system") {
		t.Fatalf("writing into the image volume: %v, %q; want a read-only file system", err, out)
	}
	mounted := func() bool {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(b), uid+"/volumes/demo")
	}
	if !mounted() {
		t.Fatal("no mount of the image volume on the node")
	}

	if err := c.cs.CoreV1().Pods("default").Delete(ctx, "image-volume", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitFor(60*time.Second, "image-volume gone", func() bool {
		_, err := c.cs.CoreV1().Pods("default").Get(ctx, "image-volume", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	c.waitFor(30*time.Second, "the image volume unmounted", func() bool { return !mounted() })
}
