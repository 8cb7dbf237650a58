package hostcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// NFTables checks that the kernel answers nftables requests as kelp sends
// them (netlink, not the nft command, which kelp does not need).
func (h *Host) NFTables() Result {
	r := Result{Check: "nftables"}
	if h.ListTables == nil {
		r.Status, r.Detail = Warn, "cannot check"
		return r
	}
	n, err := h.ListTables()
	switch {
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, os.ErrPermission):
		r.Status, r.Detail, r.Hint = Warn, "not allowed to list tables", "run kelp check-config as root to check nftables"
	case err != nil:
		r.Status, r.Detail = Missing, err.Error()
		r.Hint = "kelp's service proxy and masquerade need nf_tables in the kernel (see the kernel checks)"
	default:
		r.Detail = fmt.Sprintf("usable: %d tables now", n)
	}
	return r
}

// Runtime checks that containerd and runc, which the node agent drives,
// are on PATH, and reports their versions.
func (h *Host) Runtime() []Result {
	var rs []Result
	for _, bin := range []string{"containerd", "runc"} {
		r := Result{Check: bin}
		path := ""
		var err error
		if h.LookPath == nil {
			err = errors.New("cannot look it up")
		} else {
			path, err = h.LookPath(bin)
		}
		if err != nil {
			r.Status, r.Detail = Missing, "not on PATH"
			r.Hint = "install it: apt-get install containerd runc (install.sh does), or run kelp server --disable-agent"
			rs = append(rs, r)
			continue
		}
		r.Detail = path
		if h.Output != nil {
			out, err := h.Output(path, "--version")
			if v := firstLine(out); err == nil && v != "" {
				r.Detail += ": " + v
			} else {
				r.Status, r.Detail = Warn, path+": --version failed"
				r.Hint = fmt.Sprintf("%s --version: %v", path, err)
			}
		}
		rs = append(rs, r)
	}
	return rs
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(l)
}

// Ports checks that kelp's ports are free. A port in use is Missing: kelp
// could not listen on it (it may be kelp itself, already running here).
func (h *Host) Ports(o Options) []Result {
	var rs []Result
	for _, p := range []struct {
		network, what, flag string
		port                int
	}{
		{"tcp", "API server", "--https-listen-port", o.APIPort},
		{"tcp", "kubelet", "--kubelet-port", o.KubeletPort},
		{"udp", "VXLAN overlay", "--vxlan-port", o.VXLANPort},
	} {
		if p.port == 0 {
			continue
		}
		r := Result{Check: fmt.Sprintf("port %d/%s for the %s", p.port, p.network, p.what)}
		switch {
		case h.Listen == nil:
			r.Status, r.Detail = Warn, "cannot check"
		default:
			if err := h.Listen(p.network, p.port); err != nil {
				r.Status, r.Detail = Missing, "in use"
				r.Hint = fmt.Sprintf("stop what listens on it (if kelp already runs here, that is kelp), or check another port with %s", p.flag)
			} else {
				r.Detail = "free"
			}
		}
		rs = append(rs, r)
	}
	return rs
}

// DiskSpace checks the space left on the filesystem that holds (or will
// hold) the data dir: the nearest existing directory at or above it.
func (h *Host) DiskSpace(dataDir string) Result {
	r := Result{Check: "free space for " + dataDir}
	if h.FreeBytes == nil {
		r.Status, r.Detail = Warn, "cannot check"
		return r
	}
	dir := filepath.Clean(dataDir)
	for {
		if _, err := fs.Stat(h.FS, strings.TrimPrefix(dir, "/")); err == nil || dir == "/" || dir == "." {
			break
		}
		dir = filepath.Dir(dir)
	}
	free, err := h.FreeBytes(dir)
	switch {
	case err != nil:
		r.Status, r.Detail = Warn, err.Error()
	case free < MinFreeBytes:
		r.Status, r.Detail = Missing, humanBytes(free)+" free on "+dir
		r.Hint = "etcd alone needs 138 MiB to start (two 64 MB WAL segments and its database); free space or choose another --data-dir"
	case free < WarnFreeBytes:
		r.Status, r.Detail = Warn, humanBytes(free)+" free on "+dir
		r.Hint = "images, etcd and the pods' files need more room over time"
	default:
		r.Detail = humanBytes(free) + " free on " + dir
	}
	return r
}

func humanBytes(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	default:
		return fmt.Sprintf("%d MiB", b>>20)
	}
}
