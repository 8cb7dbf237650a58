package runtime

import (
	"context"
	"testing"
	"time"
)

func TestStatusNotFound(t *testing.T) {
	rt := needRuntime(t)
	_, err := rt.ContainerStatus(context.Background(), "no-such-container")
	if !IsNotFound(err) {
		t.Errorf("err %v, want not found", err)
	}
	if err := rt.RemoveContainer(context.Background(), "no-such-container"); err != nil {
		t.Errorf("remove missing: %v", err)
	}
}

// TestStatusSurvivesRestart: a fresh Runtime (kelp restarted, no events
// seen) still reports exit code, finish time and OOM from containerd.
func TestStatusSurvivesRestart(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sh", "-c", "exit 4")
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateExited, 10*time.Second)

	rt2, err := New(context.Background(), rt.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	st, err := rt2.ContainerStatus(context.Background(), spec.ID)
	if err != nil || st.State != StateExited || st.ExitCode != 4 || st.Reason != ReasonError || st.FinishedAt.IsZero() || st.StartedAt.IsZero() {
		t.Errorf("status after restart %+v %v", st, err)
	}
}

func TestStatusReasonFromCgroupOOM(t *testing.T) {
	rt := needRuntime(t)
	if rt.cgroupOOMKilled("") {
		t.Error("empty path")
	}
	if got := rt.exitReason("x", map[string]string{labelOOM: "true"}, 137); got != ReasonOOMKilled {
		t.Errorf("label: %s", got)
	}
	if got := rt.exitReason("x", nil, 0); got != ReasonCompleted {
		t.Errorf("0: %s", got)
	}
}
