package hostcheck

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
)

// fullConfig is a kernel config with everything kelp needs built in.
const fullConfig = `CONFIG_OVERLAY_FS=y
CONFIG_BRIDGE=y
CONFIG_BRIDGE_NETFILTER=y
CONFIG_VETH=y
CONFIG_VXLAN=y
CONFIG_NF_TABLES=y
CONFIG_NF_TABLES_IPV4=y
CONFIG_NFT_NAT=y
CONFIG_NFT_MASQ=y
CONFIG_NFT_NUMGEN=y
CONFIG_NFT_CT=y
CONFIG_NFT_FIB_IPV4=y
CONFIG_MEMCG=y
`

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return b.Bytes()
}

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

// procCgroups is /proc/cgroups with the memory controller enabled or not.
func procCgroups(memory bool) *fstest.MapFile {
	on := "1"
	if !memory {
		on = "0"
	}
	return file("#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t30\t1\ncpu\t1\t30\t1\nmemory\t4\t201\t" + on + "\npids\t8\t30\t1\n")
}

// hybridV1 is a tree like the machines kelp is built on: cgroup v1
// controllers plus an empty unified mount, everything built into the
// kernel (no /proc/modules), the config in /proc/config.gz.
func hybridV1(t *testing.T) fstest.MapFS {
	fs := fstest.MapFS{
		"proc/config.gz":   {Data: gz(t, fullConfig)},
		"proc/filesystems": file("nodev\tsysfs\nnodev\tcgroup\nnodev\toverlay\n\text4\n"),
		"proc/cgroups":     procCgroups(true),
		"proc/cmdline":     file("console=ttyS0 quiet\n"),
		"proc/sys/net/bridge/bridge-nf-call-iptables": file("1\n"),
		"sys/module/bridge/uevent":                    file(""),
		"sys/module/vxlan/uevent":                     file(""),
		"sys/fs/cgroup/unified/cgroup.controllers":    file(""),
	}
	for _, c := range []string{"cpu", "memory", "pids", "devices"} {
		fs["sys/fs/cgroup/"+c+"/cgroup.procs"] = file("1\n")
	}
	return fs
}

// v2 is a pure cgroup v2 host (Debian 12 with systemd) whose kernel config
// is in /boot and whose features are modules.
func v2(memory bool) fstest.MapFS {
	controllers := "cpuset cpu io pids"
	if memory {
		controllers = "cpuset cpu io memory pids"
	}
	return fstest.MapFS{
		"boot/config-6.1.0-test":           file(strings.ReplaceAll(fullConfig, "=y", "=m")),
		"proc/filesystems":                 file("nodev\tsysfs\nnodev\tcgroup2\n"),
		"proc/modules":                     file("br_netfilter 32768 0 - Live 0x0\nbridge 311296 1 br_netfilter, Live 0x0\noverlay 163840 0 - Live 0x0\n"),
		"proc/cgroups":                     procCgroups(memory),
		"proc/cmdline":                     file("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n"),
		"sys/fs/cgroup/cgroup.controllers": file(controllers + "\n"),
		"sys/fs/cgroup/cgroup.procs":       file("1\n"),
	}
}

func byCheck(rs []Result) map[string]Result {
	m := map[string]Result{}
	for _, r := range rs {
		m[r.Check] = r
	}
	return m
}

func want(t *testing.T, rs []Result, check string, status Status, detail string) Result {
	t.Helper()
	r, ok := byCheck(rs)[check]
	if !ok {
		t.Fatalf("no check %q in %v", check, rs)
	}
	if r.Status != status || !strings.Contains(r.Detail, detail) {
		t.Errorf("%s: %v %q, want %v with %q (hint %q)", check, r.Status, r.Detail, status, detail, r.Hint)
	}
	return r
}

func TestKernelBuiltIn(t *testing.T) {
	rs := (&Host{FS: hybridV1(t)}).Kernel()
	for _, r := range rs {
		if r.Status != OK {
			t.Errorf("%s: %v (%s)", r.Check, r.Status, r.Detail)
		}
	}
	want(t, rs, "kernel: overlay filesystem", OK, "built in")
	want(t, rs, "kernel: veth", OK, "built in") // no trace but the config
}

func TestKernelModules(t *testing.T) {
	h := &Host{FS: v2(true), Release: "6.1.0-test"} // config from /boot/config-<release>
	rs := h.Kernel()
	want(t, rs, "kernel: br_netfilter", OK, "module, loaded")           // in /proc/modules
	want(t, rs, "kernel: overlay filesystem", OK, "module, loaded")     // in /proc/modules
	want(t, rs, "kernel: vxlan", OK, "module, loaded on first use")     // autoloaded with its first link
	want(t, rs, "kernel: nf_tables", OK, "module, loaded on first use") // autoloaded by netlink

	// br_netfilter is not autoloaded: a module that is not loaded is a warning
	// that says how to load it.
	fs := v2(true)
	fs["proc/modules"] = file("bridge 311296 0 - Live 0x0\n")
	r := want(t, (&Host{FS: fs, Release: "6.1.0-test"}).Kernel(), "kernel: br_netfilter", Warn, "not loaded")
	if !strings.Contains(r.Hint, "modprobe br_netfilter") {
		t.Errorf("hint %q", r.Hint)
	}

	// Without a release, /boot/config-* is not found, and unloaded
	// features cannot be told apart from absent ones.
	rs = (&Host{FS: v2(true)}).Kernel()
	want(t, rs, "kernel: vxlan", Warn, "no kernel config")
	want(t, rs, "kernel: bridge", OK, "active") // loaded, so present
	want(t, rs, "kernel: nftables ip family, nat, masq, numgen, ct, fib", Warn, "no kernel config")
}

func TestKernelMissing(t *testing.T) {
	fs := hybridV1(t)
	cfg := strings.NewReplacer("CONFIG_VXLAN=y\n", "# CONFIG_VXLAN is not set\n", "CONFIG_NFT_MASQ=y\n", "").Replace(fullConfig)
	fs["proc/config.gz"] = &fstest.MapFile{Data: gz(t, cfg)}
	delete(fs, "sys/module/vxlan/uevent")
	h := &Host{FS: fs}
	rs := h.Kernel()
	want(t, rs, "kernel: vxlan", Missing, "CONFIG_VXLAN is not set")
	want(t, rs, "kernel: nftables ip family, nat, masq, numgen, ct, fib", Missing, "CONFIG_NFT_MASQ not set")
	want(t, rs, "kernel: bridge", OK, "built in")
	if !AnyMissing(h.Check(Options{})) {
		t.Error("AnyMissing: false with vxlan missing")
	}
}

func TestCgroupsV1Hybrid(t *testing.T) {
	rs := (&Host{FS: hybridV1(t)}).Cgroups()
	want(t, rs, "cgroups", OK, "v1, hybrid")
	want(t, rs, "cgroups: memory controller", OK, "enabled")

	fs := hybridV1(t)
	delete(fs, "sys/fs/cgroup/unified/cgroup.controllers")
	want(t, (&Host{FS: fs}).Cgroups(), "cgroups", OK, "v1")

	// A v1 host whose memory hierarchy is not mounted.
	delete(fs, "sys/fs/cgroup/memory/cgroup.procs")
	r := want(t, (&Host{FS: fs}).Cgroups(), "cgroups: memory controller", Missing, "not mounted")
	if r.Hint == "" {
		t.Error("no hint")
	}
}

func TestCgroupsV2(t *testing.T) {
	rs := (&Host{FS: v2(true), Release: "6.1.0-test"}).Cgroups()
	want(t, rs, "cgroups", OK, "v2 (unified)")
	want(t, rs, "cgroups: memory controller", OK, "enabled")

	// Enabled in the kernel but not offered at the root of the unified tree.
	fs := v2(false)
	fs["proc/cgroups"] = procCgroups(true)
	want(t, (&Host{FS: fs}).Cgroups(), "cgroups: memory controller", Missing, "not in /sys/fs/cgroup/cgroup.controllers")

	fs = fstest.MapFS{"proc/cgroups": procCgroups(true)}
	want(t, (&Host{FS: fs}).Cgroups(), "cgroups", Missing, "no cgroup filesystem")
}

// A Raspberry Pi leaves the memory controller off; check-config prints the
// words to add to its cmdline.txt.
func TestCgroupsRaspberryPi(t *testing.T) {
	pi := func(cmdlineFile, cmdline string) fstest.MapFS {
		fs := v2(false)
		fs["proc/device-tree/model"] = file("Raspberry Pi 4 Model B Rev 1.4\x00")
		fs["proc/cmdline"] = file("coherent_pool=1M 8250.nr_uarts=1 cgroup_disable=memory console=ttyS0,115200 root=PARTUUID=1234-02 rootwait\n")
		if cmdlineFile != "" {
			fs[cmdlineFile] = file(cmdline)
		}
		return fs
	}
	const stock = "console=serial0,115200 console=tty1 root=PARTUUID=1234-02 rootfstype=ext4 fsck.repair=yes rootwait\n"

	r := want(t, (&Host{FS: pi("boot/firmware/cmdline.txt", stock)}).Cgroups(), "cgroups: memory controller", Missing, "disabled on the kernel command line")
	if !strings.Contains(r.Hint, "add cgroup_memory=1 cgroup_enable=memory to the end of the single line in /boot/firmware/cmdline.txt") ||
		!strings.Contains(r.Hint, "sed -i '1 s/$/ cgroup_memory=1 cgroup_enable=memory/' /boot/firmware/cmdline.txt") {
		t.Errorf("hint %q", r.Hint)
	}
	// Before bookworm the file was /boot/cmdline.txt.
	r = want(t, (&Host{FS: pi("boot/cmdline.txt", stock)}).Cgroups(), "cgroups: memory controller", Missing, "disabled")
	if !strings.Contains(r.Hint, "/boot/cmdline.txt") || strings.Contains(r.Hint, "firmware") {
		t.Errorf("hint %q", r.Hint)
	}
	// Added but not yet booted with.
	r = want(t, (&Host{FS: pi("boot/firmware/cmdline.txt", strings.TrimSpace(stock)+" cgroup_memory=1 cgroup_enable=memory\n")}).Cgroups(),
		"cgroups: memory controller", Missing, "disabled")
	if !strings.Contains(r.Hint, "reboot to apply") {
		t.Errorf("hint %q", r.Hint)
	}
	// The model alone (the boot partition not mounted) still names the file.
	r = want(t, (&Host{FS: pi("", "")}).Cgroups(), "cgroups: memory controller", Missing, "disabled")
	if !strings.Contains(r.Hint, PiCmdline) {
		t.Errorf("hint %q", r.Hint)
	}
}

func TestCgroupsDisabledOnAPC(t *testing.T) {
	fs := v2(false)
	fs["proc/cmdline"] = file("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro cgroup_disable=memory\n")
	r := want(t, (&Host{FS: fs}).Cgroups(), "cgroups: memory controller", Missing, "disabled on the kernel command line")
	if !strings.Contains(r.Hint, "remove cgroup_disable=memory") || strings.Contains(r.Hint, "cmdline.txt") {
		t.Errorf("hint %q", r.Hint)
	}

	fs = hybridV1(t)
	fs["proc/config.gz"] = &fstest.MapFile{Data: gz(t, strings.Replace(fullConfig, "CONFIG_MEMCG=y\n", "", 1))}
	want(t, (&Host{FS: fs}).Cgroups(), "cgroups: memory controller", Missing, "CONFIG_MEMCG is not set")
}

func TestNFTables(t *testing.T) {
	for _, c := range []struct {
		list   func() (int, error)
		status Status
		detail string
	}{
		{func() (int, error) { return 2, nil }, OK, "usable: 2 tables"},
		{func() (int, error) { return 0, fmt.Errorf("netlink receive: %w", syscall.EPERM) }, Warn, "not allowed"},
		{func() (int, error) { return 0, fmt.Errorf("netlink receive: %w", syscall.EPROTONOSUPPORT) }, Missing, "protocol not supported"},
		{nil, Warn, "cannot check"},
	} {
		r := (&Host{ListTables: c.list}).NFTables()
		if r.Status != c.status || !strings.Contains(r.Detail, c.detail) {
			t.Errorf("%v %q, want %v %q", r.Status, r.Detail, c.status, c.detail)
		}
	}
}

func TestRuntime(t *testing.T) {
	h := &Host{
		LookPath: func(f string) (string, error) {
			if f == "containerd" {
				return "/usr/bin/containerd", nil
			}
			return "", errors.New("not found")
		},
		Output: func(name string, args ...string) (string, error) {
			if name != "/usr/bin/containerd" || len(args) != 1 || args[0] != "--version" {
				return "", fmt.Errorf("unexpected %s %v", name, args)
			}
			return "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n", nil
		},
	}
	rs := h.Runtime()
	want(t, rs, "containerd", OK, "/usr/bin/containerd: containerd github.com/containerd/containerd 1.6.20~ds1")
	r := want(t, rs, "runc", Missing, "not on PATH")
	if !strings.Contains(r.Hint, "apt-get install containerd runc") {
		t.Errorf("hint %q", r.Hint)
	}

	h.Output = func(string, ...string) (string, error) { return "", errors.New("exit status 1") }
	want(t, h.Runtime(), "containerd", Warn, "--version failed")
}

func TestPorts(t *testing.T) {
	var probed []string
	h := &Host{Listen: func(network string, port int) error {
		probed = append(probed, fmt.Sprintf("%d/%s", port, network))
		if port == 10250 {
			return syscall.EADDRINUSE
		}
		return nil
	}}
	rs := h.Ports(Options{APIPort: 6443, KubeletPort: 10250, VXLANPort: 8472})
	want(t, rs, "port 6443/tcp for the API server", OK, "free")
	r := want(t, rs, "port 10250/tcp for the kubelet", Missing, "in use")
	if !strings.Contains(r.Hint, "--kubelet-port") {
		t.Errorf("hint %q", r.Hint)
	}
	want(t, rs, "port 8472/udp for the VXLAN overlay", OK, "free")
	if strings.Join(probed, " ") != "6443/tcp 10250/tcp 8472/udp" {
		t.Errorf("probed %v", probed)
	}

	// Port 0 is not checked (an agent needs no API port).
	probed = nil
	if rs := h.Ports(Options{KubeletPort: 10251}); len(rs) != 1 || len(probed) != 1 {
		t.Errorf("results %v, probed %v", rs, probed)
	}
}

// The real probes see a port another socket holds, on loopback only.
func TestLocalListen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	h := Local()
	if err := h.Listen("tcp", l.Addr().(*net.TCPAddr).Port); err == nil {
		t.Error("a taken tcp port reported free")
	}
	if err := h.Listen("udp", u.LocalAddr().(*net.UDPAddr).Port); err == nil {
		t.Error("a taken udp port reported free")
	}
}

func TestDiskSpace(t *testing.T) {
	var asked string
	h := &Host{FS: fstest.MapFS{"var/lib/.keep": file("")}}
	free := uint64(0)
	h.FreeBytes = func(p string) (uint64, error) { asked = p; return free, nil }
	for _, c := range []struct {
		free   uint64
		status Status
	}{{100 << 20, Missing}, {1 << 30, Warn}, {50 << 30, OK}} {
		free = c.free
		r := h.DiskSpace("/var/lib/kelp")
		if r.Status != c.status {
			t.Errorf("%d bytes free: %v (%s), want %v", c.free, r.Status, r.Detail, c.status)
		}
	}
	// The data dir does not exist yet: the filesystem that will hold it.
	if asked != "/var/lib" {
		t.Errorf("asked about %q, want /var/lib", asked)
	}
	h.FreeBytes = func(string) (uint64, error) { return 0, os.ErrNotExist }
	if r := h.DiskSpace("/var/lib/kelp"); r.Status != Warn {
		t.Errorf("error: %v", r)
	}
}

// This machine, read-only: whatever it has, each check answers.
func TestLocal(t *testing.T) {
	rs := Local().Check(Options{DataDir: t.TempDir()})
	if len(rs) < 12 {
		t.Fatalf("%d results", len(rs))
	}
	for _, r := range rs {
		if r.Check == "" || (r.Status != OK && r.Detail == "") {
			t.Errorf("result %+v", r)
		}
	}
	if byCheck(rs)["kernel: overlay filesystem"].Status == Missing && fileExists("/proc/filesystems") &&
		strings.Contains(readAll("/proc/filesystems"), "overlay") {
		t.Error("overlay is in /proc/filesystems but reported missing")
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func readAll(p string) string { b, _ := os.ReadFile(p); return string(b) }
