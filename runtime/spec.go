package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/pkg/cap"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kelp-project/kelp/runtime/cgroups"
)

// defaultCaps is the capability set Docker and CRI give an unprivileged
// container (the same list as containerd's default spec).
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// allCaps is what "ALL" and privileged grant: the capabilities kelp
// itself holds (as CRI does), not every capability the kernel knows; a
// VM or container may withhold some (these machines lack SYS_RESOURCE),
// and runc fails to apply a capability its caller lacks.
func allCaps() []string {
	caps, err := cap.Current()
	if err != nil || len(caps) == 0 {
		return append([]string{}, defaultCaps...)
	}
	return caps
}

// defaultPath is what a container gets when neither the image nor the pod
// sets PATH (the value Docker and containerd use).
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// processArgs applies the Kubernetes rules for command and args against
// the image's ENTRYPOINT and CMD:
//   - neither set: ENTRYPOINT + CMD;
//   - command set: command + args (the image's CMD is ignored);
//   - only args set: ENTRYPOINT + args.
func processArgs(img Image, command, args []string) []string {
	if len(command) > 0 {
		return append(append([]string{}, command...), args...)
	}
	if len(args) > 0 {
		return append(append([]string{}, img.Entrypoint...), args...)
	}
	return append(append([]string{}, img.Entrypoint...), img.Cmd...)
}

// mergeEnv returns base with each "K=V" of over replacing the same key in
// place or appended, so the pod's values win and the image's order stays.
func mergeEnv(base, over []string) []string {
	out := append([]string{}, base...)
	idx := map[string]int{}
	for i, kv := range out {
		idx[envKey(kv)] = i
	}
	for _, kv := range over {
		k := envKey(kv)
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

func envKey(kv string) string {
	k, _, _ := strings.Cut(kv, "=")
	return k
}

// containerEnv is PATH default < image env < pod env.
func containerEnv(img Image, env []string) []string {
	return mergeEnv(mergeEnv([]string{defaultPath}, img.Env), env)
}

// normalizeCap turns "net_admin" or "CAP_NET_ADMIN" into "CAP_NET_ADMIN".
func normalizeCap(c string) string {
	c = strings.ToUpper(strings.TrimSpace(c))
	if c == "ALL" || strings.HasPrefix(c, "CAP_") {
		return c
	}
	return "CAP_" + c
}

// capabilities applies CapAdd and CapDrop to the default set as CRI does:
// "ALL" in add grants everything, "ALL" in drop starts from nothing (adds
// still apply after it).
func capabilities(sec Security) []string {
	set := map[string]bool{}
	for _, c := range defaultCaps {
		set[c] = true
	}
	for _, c := range sec.CapDrop {
		if c = normalizeCap(c); c == "ALL" {
			set = map[string]bool{}
		} else {
			delete(set, c)
		}
	}
	for _, c := range sec.CapAdd {
		if c = normalizeCap(c); c == "ALL" {
			for _, a := range allCaps() {
				set[a] = true
			}
		} else {
			set[c] = true
		}
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// specOpts builds the OCI spec on top of containerd's default Linux spec
// (namespaces, /proc, /dev, masked paths, default caps, no seccomp, no
// AppArmor/SELinux). Order matters: user lookups read the snapshot, which
// WithNewSnapshot has prepared before these run.
func (r *Runtime) specOpts(spec ContainerSpec) []oci.SpecOpts {
	img := spec.Image
	cwd := spec.WorkingDir
	if cwd == "" {
		cwd = img.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	opts := []oci.SpecOpts{
		oci.WithProcessArgs(processArgs(img, spec.Command, spec.Args)...),
		withEnv(containerEnv(img, spec.Env)),
		oci.WithProcessCwd(cwd),
		oci.WithCgroup(r.cgroupPath(spec)),
		withResources(spec.Resources, r.opts.Cgroups),
		withCgroupMount(spec.Security.Privileged),
		withMounts(spec.Mounts),
	}
	if spec.Hostname != "" {
		opts = append(opts, oci.WithHostname(spec.Hostname))
	}
	if r.opts.Cgroups.Version == cgroups.V2 {
		// As CRI on a unified host: a private cgroup namespace, so the
		// container sees its own cgroup as the root of /sys/fs/cgroup
		// (runc mounts cgroup2 there inside it) and cannot see the
		// node's. v1 has no such mount to scope: runc binds the
		// container's own directories of each hierarchy instead.
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.CgroupNamespace}))
	}
	if spec.NetNSPath != "" {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: spec.NetNSPath}))
	} else {
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace))
	}
	if spec.PIDNSPath != "" {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.PIDNamespace, Path: spec.PIDNSPath}))
	}
	if spec.TTY {
		opts = append(opts, oci.WithTTY)
	}
	if len(spec.Sysctls) > 0 {
		opts = append(opts, withSysctls(spec.Sysctls))
	}
	opts = append(opts, userOpts(img, spec.Security)...)
	opts = append(opts, securityOpts(spec.Security)...)
	return opts
}

// withSysctls sets the pod's sysctls in the spec (Linux.Sysctl).
func withSysctls(sysctls map[string]string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Sysctl == nil {
			s.Linux.Sysctl = map[string]string{}
		}
		for k, v := range sysctls {
			s.Linux.Sysctl[k] = v
		}
		return nil
	}
}

// withEnv sets the environment outright; oci.WithEnv would merge with the
// default spec's PATH, which containerEnv already accounts for.
func withEnv(env []string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Process.Env = env
		return nil
	}
}

// userOpts picks the user: RunAsUser/RunAsGroup win over the image's USER;
// the image's USER (name or uid[:gid]) is resolved against the rootfs.
func userOpts(img Image, sec Security) []oci.SpecOpts {
	var opts []oci.SpecOpts
	switch {
	case sec.RunAsUser != nil:
		opts = append(opts, oci.WithUserID(uint32(*sec.RunAsUser)))
	case img.User != "":
		opts = append(opts, oci.WithUser(img.User), oci.WithAdditionalGIDs(img.User))
	}
	return append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if sec.RunAsGroup != nil {
			s.Process.User.GID = uint32(*sec.RunAsGroup)
		}
		for _, g := range sec.SupplementalGroups {
			s.Process.User.AdditionalGids = append(s.Process.User.AdditionalGids, uint32(g))
		}
		return nil
	})
}

// securityOpts: privileged means all caps, all host devices, writable /sys
// and nothing masked; never AppArmor or SELinux (the kernel has neither).
func securityOpts(sec Security) []oci.SpecOpts {
	var opts []oci.SpecOpts
	if sec.Privileged {
		opts = append(opts, oci.WithCapabilities(allCaps()), oci.WithHostDevices, oci.WithAllDevicesAllowed, withPrivilegedPaths)
	} else {
		opts = append(opts, oci.WithCapabilities(capabilities(sec)))
	}
	if sec.ReadOnlyRootfs {
		opts = append(opts, oci.WithRootFSReadonly())
	}
	if sec.NoNewPrivileges {
		opts = append(opts, oci.WithNoNewPrivileges)
	}
	return append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Process.ApparmorProfile = ""
		s.Process.SelinuxLabel = ""
		s.Linux.MountLabel = ""
		return nil
	})
}

// withPrivilegedPaths unmasks /proc paths and makes /sys writable.
func withPrivilegedPaths(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	s.Linux.MaskedPaths = nil
	s.Linux.ReadonlyPaths = nil
	for i, m := range s.Mounts {
		if m.Type == "sysfs" {
			s.Mounts[i].Options = replaceOpt(m.Options, "ro", "rw")
		}
	}
	return nil
}

func replaceOpt(opts []string, from, to string) []string {
	out := make([]string, 0, len(opts))
	for _, o := range opts {
		if o == from {
			o = to
		}
		out = append(out, o)
	}
	return out
}

// withResources writes the limits into Linux.Resources, in v1 units on
// either version: runc writes them to the container's cgroup, converting
// for v2 (shares to cpu.weight, quota and period to cpu.max, the limit to
// memory.max, pids to pids.max). Zero means unset.
func withResources(res Resources, host cgroups.Host) oci.SpecOpts {
	return func(ctx context.Context, c oci.Client, ctr *containers.Container, s *oci.Spec) error {
		if res.CPUShares > 0 {
			if err := oci.WithCPUShares(res.CPUShares)(ctx, c, ctr, s); err != nil {
				return err
			}
		}
		if res.CPUQuota > 0 {
			period := res.CPUPeriod
			if period == 0 {
				period = 100000
			}
			if err := oci.WithCPUCFS(res.CPUQuota, period)(ctx, c, ctr, s); err != nil {
				return err
			}
		}
		if res.MemoryLimit > 0 {
			if err := oci.WithMemoryLimit(uint64(res.MemoryLimit))(ctx, c, ctr, s); err != nil {
				return err
			}
			if host.Version == cgroups.V2 && host.SwapLimit {
				// On v2 swap is limited apart (memory.swap.max, unlimited
				// by default), so a limited container could swap past its
				// limit; swap equal to the limit is runc's "no swap"
				// (memory.swap.max 0), as the kubelet asks CRI for (and,
				// as CRI, only where the kernel accounts swap: runc fails
				// otherwise). On v1 memory+swap is left alone, as before:
				// the memsw files exist only with swap accounting on.
				swap := res.MemoryLimit
				s.Linux.Resources.Memory.Swap = &swap
			}
		}
		if res.PidsLimit > 0 {
			if err := oci.WithPidsLimit(res.PidsLimit)(ctx, c, ctr, s); err != nil {
				return err
			}
		}
		return nil
	}
}

// withCgroupMount adds /sys/fs/cgroup as CRI does (the default spec lacks
// it), read-only unless privileged. runc's "cgroup" mount type is right
// for both versions: on v1 it binds the container's own directory of
// each hierarchy; on v2 it mounts cgroup2, which the private cgroup
// namespace (specOpts) roots at the container's cgroup.
func withCgroupMount(privileged bool) oci.SpecOpts {
	mode := "ro"
	if privileged {
		mode = "rw"
	}
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Mounts = append(s.Mounts, specs.Mount{
			Destination: "/sys/fs/cgroup",
			Type:        "cgroup",
			Source:      "cgroup",
			Options:     []string{"nosuid", "noexec", "nodev", "relatime", mode},
		})
		return nil
	}
}

// withMounts adds the kubelet's mounts; one at a destination the default
// spec already mounts replaces the default (e.g. /dev/shm).
func withMounts(mounts []Mount) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		for _, m := range mounts {
			om, err := ociMount(m)
			if err != nil {
				return err
			}
			kept := s.Mounts[:0]
			for _, d := range s.Mounts {
				if filepath.Clean(d.Destination) != filepath.Clean(om.Destination) {
					kept = append(kept, d)
				}
			}
			s.Mounts = append(kept, om)
		}
		return nil
	}
}

func ociMount(m Mount) (specs.Mount, error) {
	if !filepath.IsAbs(m.Destination) {
		return specs.Mount{}, fmt.Errorf("mount destination %q is not absolute", m.Destination)
	}
	mode := "rw"
	if m.ReadOnly {
		mode = "ro"
	}
	switch m.Type {
	case "", "bind":
		opts := append([]string{"rbind", "rprivate", mode}, m.Options...)
		return specs.Mount{Destination: m.Destination, Type: "bind", Source: m.Source, Options: opts}, nil
	case "tmpfs":
		opts := append([]string{"nosuid", "nodev", mode}, m.Options...)
		return specs.Mount{Destination: m.Destination, Type: "tmpfs", Source: "tmpfs", Options: opts}, nil
	default:
		return specs.Mount{}, fmt.Errorf("mount %s: unsupported type %q", m.Destination, m.Type)
	}
}
