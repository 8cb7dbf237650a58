package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Resources are cgroup limits in cgroup v1 units, as the OCI spec and
// upstream's kubelet express them; 0 means unset (no limit, or the
// kernel's default weight). On v2 they are converted as runc converts
// them, so a pod level written here and a container level written by runc
// agree.
type Resources struct {
	CPUShares   uint64 // v1 cpu.shares; v2 cpu.weight (SharesToWeight)
	CPUQuota    int64  // µs of CPU per CPUPeriod: the CPU limit
	CPUPeriod   uint64 // 0 → DefaultCPUPeriod when CPUQuota is set
	MemoryLimit int64  // bytes: v1 memory.limit_in_bytes, v2 memory.max
	PidsLimit   int64  // pids.max
}

// DefaultCPUPeriod is the CFS period upstream uses, 100 ms.
const DefaultCPUPeriod = 100000

// SharesToWeight maps cpu.shares [2, 262144] onto cpu.weight [1, 10000]
// linearly, the formula runc and systemd use, so 1024 shares (one CPU)
// is weight 39 and the minimum 2 is 1.
func SharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	shares = min(max(shares, 2), 262144)
	return 1 + ((shares-2)*9999)/262142
}

// period is the CFS period to write with a quota.
func (r Resources) period() uint64 {
	if r.CPUPeriod == 0 {
		return DefaultCPUPeriod
	}
	return r.CPUPeriod
}

// FS writes and reads cgroups through the cgroup filesystem mounted at
// Root. Directories (dir) are relative to a hierarchy's root, as
// Layout.Dir and Layout.ContainerDir give them.
type FS struct {
	Root    string
	Version Version
}

// limitControllers are the controllers whose files Apply writes.
var limitControllers = []string{"cpu", "memory", "pids"}

// Apply creates the cgroup at dir (and its ancestors) and writes every
// limit of res; unset limits are written as "no limit", so applying again
// after a change leaves no stale value. A controller the host lacks (the
// memory controller on a Raspberry Pi without cgroup_enable=memory) is
// skipped: the agent warns about it at start.
func (f *FS) Apply(dir string, res Resources) error {
	if f.Version == V2 {
		return f.applyV2(dir, res)
	}
	return f.applyV1(dir, res)
}

func (f *FS) applyV1(dir string, res Resources) error {
	var files []cgroupFile
	for _, c := range limitControllers {
		mount := filepath.Join(f.Root, c)
		if !exists(filepath.Join(mount, "cgroup.procs")) {
			continue
		}
		d := filepath.Join(mount, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		switch c {
		case "cpu":
			if res.CPUShares > 0 {
				files = append(files, cgroupFile{d, "cpu.shares", strconv.FormatUint(res.CPUShares, 10)})
			}
			// The period first: a quota is checked against the period
			// in force when it is written.
			quota := "-1"
			if res.CPUQuota > 0 {
				quota = strconv.FormatInt(res.CPUQuota, 10)
			}
			files = append(files, cgroupFile{d, "cpu.cfs_period_us", strconv.FormatUint(res.period(), 10)},
				cgroupFile{d, "cpu.cfs_quota_us", quota})
		case "memory":
			files = append(files, cgroupFile{d, "memory.limit_in_bytes", limitOr(res.MemoryLimit, "-1")})
		case "pids":
			files = append(files, cgroupFile{d, "pids.max", limitOr(res.PidsLimit, "max")})
		}
	}
	return writeAll(files)
}

func (f *FS) applyV2(dir string, res Resources) error {
	// A controller's files appear in a cgroup only when its parent lists
	// the controller in cgroup.subtree_control, so each level from the
	// root down enables them for the next (runc does the same for the
	// container's own cgroup below).
	enabled := f.controllersV2("")
	parent := f.Root
	for _, c := range strings.Split(filepath.Clean(dir), string(filepath.Separator)) {
		if c == "" || c == "." {
			continue
		}
		if err := enableV2(parent, enabled); err != nil {
			return err
		}
		parent = filepath.Join(parent, c)
		if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	d := parent
	var files []cgroupFile
	if enabled["cpu"] {
		if w := SharesToWeight(res.CPUShares); w > 0 {
			files = append(files, cgroupFile{d, "cpu.weight", strconv.FormatUint(w, 10)})
		}
		quota := "max"
		if res.CPUQuota > 0 {
			quota = strconv.FormatInt(res.CPUQuota, 10)
		}
		files = append(files, cgroupFile{d, "cpu.max", quota + " " + strconv.FormatUint(res.period(), 10)})
	}
	if enabled["memory"] {
		files = append(files, cgroupFile{d, "memory.max", limitOr(res.MemoryLimit, "max")})
	}
	if enabled["pids"] {
		files = append(files, cgroupFile{d, "pids.max", limitOr(res.PidsLimit, "max")})
	}
	return writeAll(files)
}

// controllersV2 are the limit controllers available at dir (from its
// cgroup.controllers).
func (f *FS) controllersV2(dir string) map[string]bool {
	b, _ := os.ReadFile(filepath.Join(f.Root, dir, "cgroup.controllers"))
	out := map[string]bool{}
	for _, c := range limitControllers {
		out[c] = hasWord(string(b), c)
	}
	return out
}

// enableV2 turns the controllers on for dir's children; ones already on
// are left (a write of "+c" for an enabled c is a no-op anyway, but a
// read first keeps the common case free of writes).
func enableV2(dir string, want map[string]bool) error {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	var add []string
	for _, c := range limitControllers {
		if want[c] && !hasWord(string(b), c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return writeFile(cgroupFile{dir, "cgroup.subtree_control", strings.Join(add, " ")})
}

func limitOr(n int64, unlimited string) string {
	if n > 0 {
		return strconv.FormatInt(n, 10)
	}
	return unlimited
}

type cgroupFile struct{ dir, name, value string }

func writeAll(files []cgroupFile) error {
	for _, f := range files {
		if err := writeFile(f); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(f cgroupFile) error {
	if err := os.WriteFile(filepath.Join(f.dir, f.name), []byte(f.value), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: writing %q to %s: %w", f.dir, f.value, f.name, err)
	}
	return nil
}

// Remove removes the cgroup at dir and every cgroup below it, deepest
// first, in every hierarchy (each v1 controller, or the v2 one). Only
// empty cgroups can go: a cgroup that still has processes is an error;
// one already gone is not.
func (f *FS) Remove(dir string) error {
	if filepath.Clean("/"+dir) == "/" {
		return errors.New("refusing to remove a hierarchy's root cgroup")
	}
	var errs []error
	for _, h := range f.hierarchies() {
		errs = append(errs, removeTree(filepath.Join(h, dir)))
	}
	return errors.Join(errs...)
}

// hierarchies are the mounted hierarchies' roots: Root on v2; on v1 each
// controller's mount once (cpu and cpuacct are usually one mount, with
// symlinks to it).
func (f *FS) hierarchies() []string {
	if f.Version == V2 {
		return []string{f.Root}
	}
	ents, _ := os.ReadDir(f.Root)
	seen := map[string]bool{}
	var out []string
	for _, e := range ents {
		p := filepath.Join(f.Root, e.Name())
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] {
			continue
		}
		if st, err := os.Stat(real); err != nil || !st.IsDir() {
			continue
		}
		seen[real] = true
		out = append(out, real)
	}
	return out
}

// children are the names of the cgroups directly below dir, in any
// hierarchy.
func (f *FS) children(dir string) []string {
	seen := map[string]bool{}
	var out []string
	for _, h := range f.hierarchies() {
		ents, _ := os.ReadDir(filepath.Join(h, dir))
		for _, e := range ents {
			if e.IsDir() && !seen[e.Name()] {
				seen[e.Name()] = true
				out = append(out, e.Name())
			}
		}
	}
	sort.Strings(out)
	return out
}

func removeTree(base string) error {
	var dirs []string
	_ = filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stats is one cgroup's usage, as the kubelet's summary reports it.
type Stats struct {
	CPUUsageNanos uint64 // v1 cpuacct.usage; v2 cpu.stat usage_usec × 1000
	MemoryUsage   uint64 // v1 memory.usage_in_bytes; v2 memory.current
	// MemoryWorkingSet is MemoryUsage less inactive file pages, the
	// figure evictions and `kubectl top` use.
	MemoryWorkingSet uint64
	Pids             uint64 // pids.current
	// OOMKills counts processes the kernel OOM-killed in the cgroup:
	// oom_kill of v1 memory.oom_control or v2 memory.events.
	OOMKills uint64
}

// Stats reads the cgroup at dir. A file that is missing (a controller the
// host lacks) leaves its fields 0; an error means none could be read,
// e.g. the cgroup is gone.
func (f *FS) Stats(dir string) (Stats, error) {
	var s Stats
	var inactive uint64
	var read int
	get := func(field *uint64, file string, parse func(string) (uint64, bool)) {
		b, err := os.ReadFile(filepath.Join(f.Root, file))
		if err != nil {
			return
		}
		if v, ok := parse(string(b)); ok {
			*field = v
			read++
		}
	}
	if f.Version == V2 {
		get(&s.CPUUsageNanos, filepath.Join(dir, "cpu.stat"), func(t string) (uint64, bool) {
			us, ok := keyed(t, "usage_usec")
			return us * 1000, ok
		})
		get(&s.MemoryUsage, filepath.Join(dir, "memory.current"), single)
		get(&inactive, filepath.Join(dir, "memory.stat"), keyedBy("inactive_file"))
		get(&s.Pids, filepath.Join(dir, "pids.current"), single)
		get(&s.OOMKills, filepath.Join(dir, "memory.events"), keyedBy("oom_kill"))
	} else {
		get(&s.CPUUsageNanos, filepath.Join("cpuacct", dir, "cpuacct.usage"), single)
		get(&s.MemoryUsage, filepath.Join("memory", dir, "memory.usage_in_bytes"), single)
		get(&inactive, filepath.Join("memory", dir, "memory.stat"), keyedBy("total_inactive_file"))
		get(&s.Pids, filepath.Join("pids", dir, "pids.current"), single)
		get(&s.OOMKills, filepath.Join("memory", dir, "memory.oom_control"), keyedBy("oom_kill"))
	}
	if read == 0 {
		return Stats{}, fmt.Errorf("cgroup %s: no statistics under %s", dir, f.Root)
	}
	if s.MemoryUsage > inactive {
		s.MemoryWorkingSet = s.MemoryUsage - inactive
	}
	return s, nil
}

// OOMKilled reports whether the kernel OOM-killed a process in the cgroup
// at dir (false when it cannot be read).
func (f *FS) OOMKilled(dir string) bool {
	s, err := f.Stats(dir)
	return err == nil && s.OOMKills > 0
}

func single(t string) (uint64, bool) {
	v, err := strconv.ParseUint(strings.TrimSpace(t), 10, 64)
	return v, err == nil
}

func keyedBy(key string) func(string) (uint64, bool) {
	return func(t string) (uint64, bool) { return keyed(t, key) }
}

// keyed reads "key value" lines (memory.stat, cpu.stat, memory.events,
// memory.oom_control).
func keyed(t, key string) (uint64, bool) {
	sc := bufio.NewScanner(strings.NewReader(t))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == key {
			v, err := strconv.ParseUint(f[1], 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}
