package lab

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// What lab.sh leaves in its directory is read back: nodes in numeric
// order, their addresses, PIDs and boot times.
func TestReadsWhatLabShLeaves(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"node-10", "node-2", "node-1"} {
		write(n+".ip", "192.168.77.1"+n[len("node-"):]+"\n")
	}
	write("node-2.pid", "4242\n")
	write("node-2.boot", "2026-12-01T21:00:00.123456Z\n")
	l := &Lab{Dir: dir}
	if got := l.Nodes(); !slices.Equal(got, []string{"node-1", "node-2", "node-10"}) {
		t.Errorf("Nodes() = %v", got)
	}
	if ip := l.IP("node-2"); ip != "192.168.77.12" {
		t.Errorf("IP(node-2) = %q", ip)
	}
	if pid := l.PID("node-2"); pid != 4242 {
		t.Errorf("PID(node-2) = %d", pid)
	}
	if pid := l.PID("node-1"); pid != 0 {
		t.Errorf("PID of a node that is off = %d, want 0", pid)
	}
	boot, err := l.Boot("node-2")
	if want := time.Date(2026, 12, 1, 21, 0, 0, 123456000, time.UTC); err != nil || !boot.Equal(want) {
		t.Errorf("Boot(node-2) = %v, %v; want %v", boot, err, want)
	}
	if _, err := l.Boot("node-1"); err == nil {
		t.Error("Boot of a node never booted: no error")
	}
	if got := l.PodNetns("node-2", "uid-1"); got != "/run/kelp-lab/node-2/netns/uid-1" {
		t.Errorf("PodNetns = %q", got)
	}
}
