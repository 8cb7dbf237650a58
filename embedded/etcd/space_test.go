package etcd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fakeStatfs(avail uint64) Statfs {
	return func(string) (uint64, uint64, error) { return avail, 64 << 20, nil }
}

func TestCheckSpaceNamesNeededAndAvailable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "server", "db") // not there yet: its parent is asked
	err := CheckSpace(dir, fakeStatfs(58<<20))
	if err == nil {
		t.Fatal("a 58 MiB filesystem passed")
	}
	want := "not enough disk space for etcd in " + dir + ": 138.1 MiB needed (write-ahead log segments of 61.0 MiB are preallocated, plus the database), 58.0 MiB available"
	if err.Error() != want {
		t.Fatalf("got  %q\nwant %q", err, want)
	}
	if err := CheckSpace(dir, fakeStatfs(139<<20)); err != nil {
		t.Fatal(err)
	}
}

// A member with a WAL already has its current segment: it needs room for
// the next one only.
func TestCheckSpaceWithExistingWAL(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "member", "wal", "0000000000000000-0000000000000000.wal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := NeededSpace(dir); got != WALSegmentBytes+DatabaseReserve {
		t.Fatalf("needed %d", got)
	}
	if err := CheckSpace(dir, fakeStatfs(80<<20)); err != nil {
		t.Fatal(err)
	}
	if err := CheckSpace(dir, fakeStatfs(70<<20)); err == nil || !strings.Contains(err.Error(), "77.0 MiB needed") {
		t.Fatalf("got %v", err)
	}
}
