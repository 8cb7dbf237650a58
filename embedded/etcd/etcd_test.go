package etcd

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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

// TestRestartAfterSnapshots: a member that snapshotted and compacted its
// raft log several times (every SnapshotCount writes) restarts from the
// snapshot and the WAL after it, with every write there, twice over.
func TestRestartAfterSnapshots(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	writes := 3*1000 + 250
	for round := range 2 {
		e, err := Start(ctx, dir)
		if err != nil {
			t.Fatalf("start %d: %v", round, err)
		}
		for i := range writes {
			if _, err := e.Client.Put(ctx, fmt.Sprintf("/registry/r%d/%05d", round, i), strconv.Itoa(i)); err != nil {
				e.Close()
				t.Fatal(err)
			}
		}
		e.Close()
	}
	if snaps, _ := filepath.Glob(filepath.Join(dir, "member", "snap", "*.snap")); len(snaps) == 0 {
		t.Fatalf("no raft snapshot after %d writes", 2*writes)
	}
	e, err := Start(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for round := range 2 {
		resp, err := e.Client.Get(ctx, fmt.Sprintf("/registry/r%d/", round), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count != int64(writes) {
			t.Errorf("round %d: %d keys after the restarts, want %d", round, resp.Count, writes)
		}
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

// TestWatchFromAnOldRevision: a watch opened behind the current revision
// (as a watch cache's, between its list and its watch) gets what it
// missed within the store's resync period, which kelp lengthens.
func TestWatchFromAnOldRevision(t *testing.T) {
	if watchResyncPeriod != 250*time.Millisecond {
		t.Fatalf("etcd's watch resync period is %v, want kelp's 250ms", watchResyncPeriod)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	first, err := e.Client.Put(ctx, "/registry/a", "1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Put(ctx, "/registry/b", "2"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wc := e.Client.Watch(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithRev(first.Header.Revision))
	var keys []string
	for len(keys) < 2 {
		select {
		case resp := <-wc:
			for _, ev := range resp.Events {
				keys = append(keys, string(ev.Kv.Key))
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("after 2s the watch from revision %d has %v", first.Header.Revision, keys)
		}
	}
	if keys[0] != "/registry/a" || keys[1] != "/registry/b" {
		t.Errorf("events %v, want /registry/a then /registry/b", keys)
	}
	t.Logf("caught up in %v", time.Since(start))
}
