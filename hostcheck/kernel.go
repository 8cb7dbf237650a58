package hostcheck

import (
	"fmt"
	"sort"
	"strings"
)

// feature is a kernel feature kelp needs, and the traces it leaves when
// it is active: a filesystem in /proc/filesystems, a module in
// /proc/modules or /sys/module (built-in code shows up there too when it
// has parameters), or a file it creates.
type feature struct {
	what   string // "overlay filesystem"
	why    string
	module string
	config string // its CONFIG_ option
	fs     string // a filesystem it registers
	proc   string // a path that exists only when it is active
	// autoload: the kernel loads the module on first use (a mount, a link
	// of that kind, an nftables request). br_netfilter is the exception:
	// it must be loaded before the bridge carries pod traffic.
	autoload bool
}

var features = []feature{
	{what: "overlay filesystem", why: "containerd's overlayfs snapshotter", module: "overlay", config: "CONFIG_OVERLAY_FS", fs: "overlay", autoload: true},
	{what: "bridge", why: "the pods' bridge cni0", module: "bridge", config: "CONFIG_BRIDGE", autoload: true},
	{what: "br_netfilter", why: "Service traffic between pods on one bridge", module: "br_netfilter", config: "CONFIG_BRIDGE_NETFILTER",
		proc: "proc/sys/net/bridge/bridge-nf-call-iptables"},
	{what: "veth", why: "the pods' network interfaces", module: "veth", config: "CONFIG_VETH", autoload: true},
	{what: "vxlan", why: "the overlay between nodes, --flannel-backend vxlan", module: "vxlan", config: "CONFIG_VXLAN", autoload: true},
	{what: "nf_tables", why: "the service proxy and masquerade", module: "nf_tables", config: "CONFIG_NF_TABLES", autoload: true},
}

// nftExpressions are the nftables pieces kelp's rules use (table family
// ip, DNAT and masquerade, numgen for endpoint choice, conntrack, fib for
// NodePorts), by kernel option. Only the kernel config tells of them.
var nftExpressions = []struct{ name, config string }{
	{"ip family", "CONFIG_NF_TABLES_IPV4"},
	{"nat", "CONFIG_NFT_NAT"},
	{"masq", "CONFIG_NFT_MASQ"},
	{"numgen", "CONFIG_NFT_NUMGEN"},
	{"ct", "CONFIG_NFT_CT"},
	{"fib", "CONFIG_NFT_FIB_IPV4"},
}

// Kernel checks the kernel features, one result each.
func (h *Host) Kernel() []Result {
	cfg := h.kernelConfig()
	filesystems := map[string]bool{}
	for _, l := range strings.Split(h.readFile("proc/filesystems"), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			filesystems[f[len(f)-1]] = true // "nodev\toverlay" or "\text4"
		}
	}
	modules := firstFields(h.readFile("proc/modules"))
	var rs []Result
	for _, f := range features {
		rs = append(rs, h.feature(f, cfg, filesystems, modules))
	}
	return append(rs, nftExpressionsResult(cfg))
}

func (h *Host) feature(f feature, cfg map[string]string, filesystems, modules map[string]bool) Result {
	r := Result{Check: "kernel: " + f.what}
	active := (f.fs != "" && filesystems[f.fs]) || modules[f.module] || h.exists("sys/module/"+f.module) ||
		(f.proc != "" && h.exists(f.proc))
	v, known := cfg[f.config]
	switch {
	case active && v == "y":
		r.Detail = "built in"
	case active && v == "m":
		r.Detail = "module, loaded"
	case active:
		r.Detail = "active"
	case v == "y":
		r.Detail = "built in"
	case v == "m" && f.autoload:
		r.Detail = "module, loaded on first use"
	case v == "m":
		r.Status, r.Detail = Warn, "module, not loaded"
		r.Hint = fmt.Sprintf("load it (needed for %s): modprobe %s; echo %s > /etc/modules-load.d/kelp.conf (the unit install.sh writes loads it at start)",
			f.why, f.module, f.module)
	case cfg != nil && !known:
		r.Status, r.Detail = Missing, f.config+" is not set"
		r.Hint = fmt.Sprintf("needed for %s: use a kernel built with %s", f.why, f.config)
	default:
		r.Status, r.Detail = Warn, "not loaded, and no kernel config to tell (/proc/config.gz, /boot/config-<release>)"
		r.Hint = fmt.Sprintf("needed for %s; try: modprobe %s", f.why, f.module)
	}
	return r
}

func nftExpressionsResult(cfg map[string]string) Result {
	var names []string
	for _, e := range nftExpressions {
		names = append(names, e.name)
	}
	r := Result{Check: "kernel: nftables " + strings.Join(names, ", ")}
	if cfg == nil {
		r.Status, r.Detail = Warn, "no kernel config to tell"
		return r
	}
	var missing []string
	for _, e := range nftExpressions {
		if v := cfg[e.config]; v != "y" && v != "m" {
			missing = append(missing, e.config)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		r.Status, r.Detail = Missing, strings.Join(missing, ", ")+" not set"
		r.Hint = "the service proxy's rules need them: use a kernel built with them"
	}
	return r
}
