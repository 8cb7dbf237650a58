// Package hostcheck says what a host lacks to run kelp (`kelp
// check-config`, as `k3s check-config`): kernel features, cgroups and the
// memory controller, nftables, containerd and runc, free ports and the
// data dir's free space.
//
// Every check is a method of Host, which reads the machine only through
// its fields: a filesystem root (for /proc, /sys and /boot), command
// lookups, and probes for nftables, ports and disk space. Local() is the
// real machine; tests give a Host a fake /proc and /sys tree instead. The
// checks only read: nothing is loaded, mounted or changed (a port is
// probed by listening on it and closing it at once).
package hostcheck

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// Status is a check's outcome.
type Status int

const (
	OK      Status = iota
	Warn           // kelp may work without it, or the check could not tell
	Missing        // required: kelp will not work without it
)

func (s Status) String() string {
	switch s {
	case OK:
		return "OK"
	case Warn:
		return "WARN"
	default:
		return "MISSING"
	}
}

// Result is one check's outcome: "OK      kernel: overlay filesystem (built in)".
type Result struct {
	Check  string // what was checked: "kernel: overlay filesystem"
	Status Status
	Detail string // what was found
	Hint   string // what to do about it, when not OK
}

func (r Result) String() string {
	s := fmt.Sprintf("%-7s %s", r.Status, r.Check)
	if r.Detail != "" {
		s += " (" + r.Detail + ")"
	}
	return s
}

// Host is the machine checked. FS is its root filesystem, read with
// relative paths ("proc/filesystems"); the funcs stand in for what cannot
// be read from files. A nil func's check reports Warn ("cannot check").
type Host struct {
	FS      fs.FS
	Release string // uname -r: /boot/config-<Release>

	// LookPath finds a command on PATH (exec.LookPath).
	LookPath func(file string) (string, error)
	// Output runs a command and returns its standard output.
	Output func(name string, args ...string) (string, error)
	// ListTables lists nftables tables through netlink, as kelp's own
	// rules are written, and returns how many there are.
	ListTables func() (int, error)
	// Listen reports whether network ("tcp" or "udp") port is free on all
	// addresses: nil if it could be bound.
	Listen func(network string, port int) error
	// FreeBytes is the space available to unprivileged writers on the
	// filesystem holding path.
	FreeBytes func(path string) (uint64, error)
}

// Options are what a host is checked for: the ports and data dir kelp
// will be started with. A port of 0 is not checked (an agent-only host
// needs no API port).
type Options struct {
	DataDir     string
	APIPort     int // tcp
	KubeletPort int // tcp
	VXLANPort   int // udp
}

// Thresholds for the data dir's filesystem. etcd alone preallocates two
// 64 MB WAL segments at its first start (kelp server refuses to start on
// less than 138 MiB), then needs room for its snapshots, the images and
// the pods' writable layers; and the API server refuses writes below
// --storage-min-free (by default 5% or 256 MiB).
const (
	MinFreeBytes  = 256 << 20 // below this: Missing
	WarnFreeBytes = 2 << 30   // below this: Warn
)

// Check runs every check, in the order check-config prints them.
func (h *Host) Check(o Options) []Result {
	var rs []Result
	rs = append(rs, h.Kernel()...)
	rs = append(rs, h.Cgroups()...)
	rs = append(rs, h.NFTables())
	rs = append(rs, h.Runtime()...)
	rs = append(rs, h.Ports(o)...)
	rs = append(rs, h.DiskSpace(o.DataDir))
	return rs
}

// AnyMissing reports whether a required item is missing.
func AnyMissing(rs []Result) bool {
	for _, r := range rs {
		if r.Status == Missing {
			return true
		}
	}
	return false
}

// readFile reads a file of the host; "" if it is absent or unreadable.
func (h *Host) readFile(name string) string {
	b, err := fs.ReadFile(h.FS, name)
	if err != nil {
		return ""
	}
	return string(b)
}

func (h *Host) exists(name string) bool {
	_, err := fs.Stat(h.FS, name)
	return err == nil
}

// kernelConfig is the running kernel's build configuration, from
// /proc/config.gz or /boot/config-<release>, as CONFIG_X -> "y", "m" (or
// a value); nil when neither is there, so callers tell "not set" (a key
// absent from a non-nil map) from "cannot tell".
func (h *Host) kernelConfig() map[string]string {
	var text []byte
	if b, err := fs.ReadFile(h.FS, "proc/config.gz"); err == nil {
		if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
			text, _ = io.ReadAll(zr)
		}
	}
	if text == nil && h.Release != "" {
		text, _ = fs.ReadFile(h.FS, "boot/config-"+h.Release)
	}
	if text == nil {
		return nil
	}
	cfg := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		// "# CONFIG_X is not set" lines stay absent.
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "CONFIG_") {
			cfg[k] = v
		}
	}
	return cfg
}

// fields returns the first field of each line of a /proc table.
func firstFields(text string) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			m[f[0]] = true
		}
	}
	return m
}
