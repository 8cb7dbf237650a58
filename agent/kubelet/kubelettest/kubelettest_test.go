package kubelettest

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kelp-project/kelp/runtime"
)

// TestRuntimeLifecycle: create, start, exit and remove behave as the
// kubelet expects of containerd, and every call is recorded in order.
func TestRuntimeLifecycle(t *testing.T) {
	ctx := context.Background()
	r := NewRuntime()
	r.FailPull("bad", errors.New("no such image"))
	if _, err := r.EnsureImage(ctx, "bad", corev1.PullIfNotPresent); err == nil {
		t.Fatal("a failing pull succeeded")
	}
	spec := runtime.ContainerSpec{ID: "c1", Labels: map[string]string{"io.kubernetes.container.name": "app"}}
	if err := r.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateContainer(ctx, spec); err == nil {
		t.Fatal("a second create of c1 succeeded")
	}
	if err := r.Exit("c1", 1); err == nil {
		t.Fatal("a created, never started container exited")
	}
	if err := r.StartContainer(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Exit("c1", 3); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.ContainerStatus(ctx, "c1"); st.State != runtime.StateExited || st.ExitCode != 3 {
		t.Fatalf("after Exit: %+v", st)
	}
	if l, _ := r.ListContainers(ctx, map[string]string{"io.kubernetes.container.name": "other"}); len(l) != 0 {
		t.Fatalf("label filter matched %v", l)
	}
	if s, ok := r.SpecOf("app"); !ok || s.ID != "c1" {
		t.Fatalf("SpecOf(app) = %+v, %v", s, ok)
	}
	_ = r.RemoveContainer(ctx, "c1")
	if _, err := r.ContainerStatus(ctx, "c1"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("removed container: %v", err)
	}
	want := []string{"create c1", "create c1", "start c1", "remove c1"} // the refused second create is recorded too
	if got := r.Took("create", "start", "remove"); !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if len(r.Calls()) != 0 {
		t.Fatalf("Took left %v", r.Calls())
	}
}

func TestNetworkRecords(t *testing.T) {
	n := NewNetwork("10.42.0.7")
	path, ip, err := n.Setup("u1")
	if err != nil || ip.String() != "10.42.0.7" || path == "" {
		t.Fatalf("Setup = %q %v %v", path, ip, err)
	}
	_ = n.Teardown("u1")
	_ = n.Recover(map[string]bool{"u2": true})
	if !slices.Equal(n.Setups(), []string{"u1"}) || !slices.Equal(n.Teardowns(), []string{"u1"}) || !n.Recovered()["u2"] {
		t.Fatalf("recorded %v %v %v", n.Setups(), n.Teardowns(), n.Recovered())
	}
}
