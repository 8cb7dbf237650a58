package hostcheck

import (
	"strings"
)

// PiCmdline is what a Raspberry Pi's cmdline.txt needs for the memory
// controller, which its kernels leave off by default (as k3s documents).
const PiCmdline = "cgroup_memory=1 cgroup_enable=memory"

// v1Controllers are cgroup v1 hierarchies kelp uses; each mounted one has
// a cgroup.procs at its root.
var v1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer", "blkio"}

// Cgroups checks the cgroup version and the memory controller (pod memory
// limits and OOM kills depend on it).
func (h *Host) Cgroups() []Result {
	const root = "sys/fs/cgroup/"
	version := Result{Check: "cgroups"}
	unified := h.exists(root + "cgroup.controllers")
	var v1 []string
	for _, c := range v1Controllers {
		if h.exists(root + c + "/cgroup.procs") {
			v1 = append(v1, c)
		}
	}
	switch {
	case unified:
		version.Detail = "v2 (unified)"
	case len(v1) > 0 && h.exists(root+"unified/cgroup.controllers"):
		version.Detail = "v1, hybrid: v2 at /sys/fs/cgroup/unified"
	case len(v1) > 0:
		version.Detail = "v1"
	default:
		version.Status, version.Detail = Missing, "no cgroup filesystem at /sys/fs/cgroup"
		version.Hint = "mount cgroup2 (or the v1 controllers) at /sys/fs/cgroup, as systemd does"
	}

	mem := Result{Check: "cgroups: memory controller"}
	// /proc/cgroups: "#subsys_name hierarchy num_cgroups enabled"; enabled
	// is 0 when the kernel command line turned the controller off.
	enabled, listed := false, false
	for _, l := range strings.Split(h.readFile("proc/cgroups"), "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "memory" {
			listed, enabled = true, f[3] == "1"
		}
	}
	mounted := false
	if unified {
		mounted = hasWord(h.readFile(root+"cgroup.controllers"), "memory")
	} else {
		mounted = h.exists(root + "memory/cgroup.procs")
	}
	cfg := h.kernelConfig()
	_, memcg := cfg["CONFIG_MEMCG"]
	switch {
	case cfg != nil && !memcg:
		mem.Status, mem.Detail = Missing, "CONFIG_MEMCG is not set"
		mem.Hint = "use a kernel built with CONFIG_MEMCG"
	case listed && !enabled:
		mem.Status, mem.Detail = Missing, "disabled on the kernel command line"
		mem.Hint = h.memoryHint()
	case !mounted && version.Status == OK:
		mem.Status, mem.Detail = Missing, "not mounted"
		if unified {
			mem.Detail = "not in /sys/fs/cgroup/cgroup.controllers"
		}
		mem.Hint = h.memoryHint()
	case mounted:
		mem.Detail = "enabled"
	default: // no cgroups at all: reported above
		mem.Status, mem.Detail = Missing, "no cgroup filesystem"
	}
	return []Result{version, mem}
}

// memoryHint says how to turn the memory controller on: on a Raspberry Pi,
// the line for cmdline.txt (k3s's instructions); elsewhere, what on the
// kernel command line turns it off.
func (h *Host) memoryHint() string {
	if file := h.piCmdlineFile(); file != "" {
		line := h.readFile(file)
		if hasWord(line, "cgroup_memory=1") && hasWord(line, "cgroup_enable=memory") {
			return "/" + file + " already has " + PiCmdline + ": reboot to apply it"
		}
		return "add " + PiCmdline + " to the end of the single line in /" + file + ", then reboot:\n" +
			"sed -i '1 s/$/ " + PiCmdline + "/' /" + file
	}
	if hasWord(h.readFile("proc/cmdline"), "cgroup_disable=memory") {
		return "remove cgroup_disable=memory from the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub) and reboot"
	}
	return "add cgroup_enable=memory to the kernel command line and reboot"
}

// piCmdlineFile is the Raspberry Pi's kernel command line file, relative
// to the root: /boot/firmware/cmdline.txt (Debian 12 and Raspberry Pi OS
// since bookworm, Ubuntu) or /boot/cmdline.txt (older releases); "" on a
// machine that is not a Pi.
func (h *Host) piCmdlineFile() string {
	model := h.readFile("proc/device-tree/model") + h.readFile("sys/firmware/devicetree/base/model")
	for _, f := range []string{"boot/firmware/cmdline.txt", "boot/cmdline.txt"} {
		if h.exists(f) {
			return f
		}
	}
	if strings.Contains(model, "Raspberry Pi") {
		return "boot/firmware/cmdline.txt"
	}
	return ""
}

func hasWord(text, word string) bool {
	for _, w := range strings.Fields(text) {
		if w == word {
			return true
		}
	}
	return false
}
