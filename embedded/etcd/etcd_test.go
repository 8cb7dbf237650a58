package etcd

import (
	"context"
	"testing"
	"time"
)

// TestDataOutlivesTheMember: what one member wrote, the next member on the
// same directory reads, as after a restart of kelp.
func TestDataOutlivesTheMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	e, err := Start(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Put(ctx, "/registry/k", "v1"); err != nil {
		t.Fatal(err)
	}
	e.Close()

	e, err = Start(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	resp, err := e.Client.Get(ctx, "/registry/k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("after restart: %v", resp.Kvs)
	}
}

// TestTwoMembersAtOnce: each gets its own free ports, so tests and
// benchmarks can run several servers on one machine.
func TestTwoMembersAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.Client.Put(ctx, "k", "a"); err != nil {
		t.Fatal(err)
	}
	resp, err := b.Client.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatal("the two members share data")
	}
}

// A member that stops on its own is reported; one that is closed is not.
func TestFailedReportsAStopButNotAClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	failed := e.Failed()
	e.server.Server.HardStop() // what etcd does itself after a fatal storage error
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("nil error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stopped member was not reported")
	}
	e.Close()

	e, err = Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	failed = e.Failed()
	e.Close()
	select {
	case err := <-failed:
		t.Fatalf("a closed member was reported as failed: %v", err)
	case <-time.After(time.Second):
	}
}
