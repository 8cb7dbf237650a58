package etcd

import (
	"fmt"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"golang.org/x/sys/unix"
)

// DatabaseReserve is room for etcd's database to grow (bbolt extends its
// file 16 MiB at a time) and its snapshot files, on top of the WAL.
const DatabaseReserve = 16 << 20

// WALSegmentBytes is the size etcd preallocates for each WAL segment
// (64 MB, wal.SegmentSizeBytes). A running member always holds the next
// segment preallocated too, and allocates a new one whenever it starts
// writing a segment: a member needs one segment's worth of free space at
// any time, or its next cut fails and it stops.
var WALSegmentBytes = uint64(wal.SegmentSizeBytes)

// Statfs reports a filesystem's space available to unprivileged writers
// and its total size, in bytes.
type Statfs func(path string) (available, total uint64, err error)

// HostStatfs is statfs(2).
func HostStatfs(path string) (available, total uint64, err error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return 0, 0, err
	}
	return fs.Bavail * uint64(fs.Bsize), fs.Blocks * uint64(fs.Bsize), nil
}

// NeededSpace is the free space etcd needs in dir to start: a first WAL
// segment if it has none yet, the segment it preallocates ahead, and
// room for the database.
func NeededSpace(dir string) uint64 {
	need := WALSegmentBytes + DatabaseReserve
	if segs, _ := filepath.Glob(filepath.Join(dir, "member", "wal", "*.wal")); len(segs) == 0 {
		need += WALSegmentBytes
	}
	return need
}

// CheckSpace fails, with what is needed and what there is, when dir's
// filesystem cannot hold what etcd preallocates at start.
func CheckSpace(dir string, fs Statfs) error {
	// dir may not exist yet (a first start): its filesystem is the one of
	// its nearest existing parent.
	probe := dir
	for {
		if _, err := os.Stat(probe); err == nil || filepath.Dir(probe) == probe {
			break
		}
		probe = filepath.Dir(probe)
	}
	avail, _, err := fs(probe)
	if err != nil {
		// Not knowing is no reason to refuse: etcd reports real failures.
		return nil
	}
	if need := NeededSpace(dir); avail < need {
		return fmt.Errorf("not enough disk space for etcd in %s: %s needed (write-ahead log segments of %s are preallocated, plus the database), %s available", dir, FormatBytes(need), FormatBytes(WALSegmentBytes), FormatBytes(avail))
	}
	return nil
}

// FormatBytes is n in binary units with one decimal, as people read disk
// sizes ("61.0 MiB").
func FormatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
