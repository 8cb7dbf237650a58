package runtime

// Shims without a task. A containerd shim outlives the request that
// started it: when kelp dies between containerd starting a shim and the
// task being created (a kill -9 mid-rollout), containerd forgets the
// half-made task but the shim keeps running, with no container, holding
// its bundle and socket. Nothing in containerd reaps it, so the agent
// does: a shim serving our containerd's address in our namespace whose id
// names no task is an orphan, and is killed along with any runc container
// it had created.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/sirupsen/logrus"
)

// shimBinary is the only runtime kelp starts tasks with (runtimeOpts).
const shimBinary = "containerd-shim-runc-v2"

// orphanMinAge spares a shim that another client of the same containerd
// may be creating a task in right now: our own creations are excluded by
// the task lock, but only age tells a foreign one from an orphan.
const orphanMinAge = 5 * time.Second

// Shim is a running shim process.
type Shim struct {
	PID int
	// ID is the task it serves (-id), Namespace and Address the
	// containerd it belongs to (-namespace, -address).
	ID, Namespace, Address string
	Started                time.Time
}

// ListShims finds the shim processes of the containerd at address in
// kelp's namespace, from /proc under procRoot ("/proc").
func ListShims(procRoot, address string) ([]Shim, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	boot := bootTime(procRoot)
	var out []Shim
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		s, ok := parseShim(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"))
		if !ok || s.Namespace != Namespace || s.Address != address {
			continue
		}
		s.PID = pid
		s.Started = startTime(procRoot, pid, boot)
		out = append(out, s)
	}
	return out, nil
}

// parseShim reads a shim's command line: containerd starts it as
// `containerd-shim-runc-v2 -namespace NS -id ID -address SOCK ...`.
func parseShim(args []string) (Shim, bool) {
	if len(args) == 0 || filepath.Base(args[0]) != shimBinary {
		return Shim{}, false
	}
	var s Shim
	for i := 1; i+1 < len(args); i++ {
		switch strings.TrimLeft(args[i], "-") {
		case "namespace":
			s.Namespace = args[i+1]
		case "id":
			s.ID = args[i+1]
		case "address":
			s.Address = args[i+1]
		default:
			continue
		}
		i++
	}
	return s, s.ID != "" && s.Namespace != "" && s.Address != ""
}

// bootTime is the system's boot time (btime in /proc/stat).
func bootTime(procRoot string) time.Time {
	b, err := os.ReadFile(filepath.Join(procRoot, "stat"))
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(n, 0)
			}
		}
	}
	return time.Time{}
}

// startTime is when pid started: field 22 of /proc/<pid>/stat, in clock
// ticks since boot (USER_HZ is 100 on Linux). The zero time if unknown,
// which counts as old.
func startTime(procRoot string, pid int, boot time.Time) time.Time {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil || boot.IsZero() {
		return time.Time{}
	}
	// The command name (field 2) may hold spaces; fields count from after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return time.Time{}
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return time.Time{}
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return boot.Add(time.Duration(ticks) * time.Second / 100)
}

// RemoveOrphanShims kills the shims of our containerd that serve no task,
// and deletes the runc container each may have created, returning the ids
// removed. Task creations of this Runtime wait meanwhile, so a shim being
// started by one is never taken for an orphan.
func (r *Runtime) RemoveOrphanShims(ctx context.Context) ([]string, error) {
	r.tasks.Lock()
	defer r.tasks.Unlock()
	return r.removeShims(ctx, func(s Shim, hasTask bool) bool {
		return !hasTask && time.Since(s.Started) >= orphanMinAge
	})
}

// RemoveAllShims kills every shim of our containerd, for `kelp killall`
// once the containers are gone (a shim left then is an orphan whatever
// its age).
func (r *Runtime) RemoveAllShims(ctx context.Context) ([]string, error) {
	r.tasks.Lock()
	defer r.tasks.Unlock()
	return r.removeShims(ctx, func(Shim, bool) bool { return true })
}

func (r *Runtime) removeShims(ctx context.Context, remove func(s Shim, hasTask bool) bool) ([]string, error) {
	shims, err := ListShims("/proc", r.opts.Address)
	if err != nil || len(shims) == 0 {
		return nil, err
	}
	// Listed after the shims: a task that appeared in between is seen.
	resp, err := r.client.TaskService().List(r.ctx(ctx), &tasks.ListTasksRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	live := map[string]bool{}
	for _, t := range resp.Tasks {
		live[t.ID] = true
	}
	var removed []string
	var errs []error
	for _, s := range shims {
		if !remove(s, live[s.ID]) {
			continue
		}
		logrus.Infof("runtime: killing shim %d of %s, which serves no task", s.PID, s.ID)
		// The shim runs in its bundle, whose "address" file names its
		// socket (under /run/containerd/s): read before the kill, removed
		// after it, as containerd would on a clean task delete.
		sock := shimSocket(s.PID)
		if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("killing shim %d: %w", s.PID, err))
			continue
		}
		if sock != "" {
			_ = os.Remove(sock)
		}
		r.deleteRuncContainer(ctx, s.ID)
		removed = append(removed, s.ID)
	}
	return removed, errors.Join(errs...)
}

// shimSocket is the unix socket a shim serves, from the address file in
// its working directory (the bundle); "" if unknown.
func shimSocket(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cwd", "address"))
	if err != nil {
		return ""
	}
	addr := strings.TrimSpace(string(b))
	if p, ok := strings.CutPrefix(addr, "unix://"); ok && filepath.IsAbs(p) {
		return p
	}
	return ""
}

// deleteRuncContainer force-deletes a runc container the shim had created
// (its init would otherwise hold the namespaces and cgroup), if runc knows
// it under our state root.
func (r *Runtime) deleteRuncContainer(ctx context.Context, id string) {
	root := filepath.Join(r.opts.StateDir, "runc", Namespace)
	if _, err := os.Stat(filepath.Join(root, id)); err != nil {
		return
	}
	if out, err := exec.CommandContext(ctx, "runc", "--root", root, "delete", "--force", id).CombinedOutput(); err != nil {
		logrus.Warnf("runtime: runc delete %s: %v: %s", id, err, strings.TrimSpace(string(out)))
	}
}
