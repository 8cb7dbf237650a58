package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/kelp-project/kelp/embedded/containerd"
	"github.com/kelp-project/kelp/netplane/nft"
	"github.com/kelp-project/kelp/netplane/nodenet"
	"github.com/kelp-project/kelp/netplane/proxy"
	"github.com/kelp-project/kelp/runtime"
	"github.com/kelp-project/kelp/runtime/cgroups"
	"github.com/kelp-project/kelp/runtime/containerlog"
)

// KillAll stops everything the agent leaves running when kelp stops (the
// data plane outlives kelp by design): every container, the supervised
// containerd, the pod network and service rules (each netplane
// component's Cleanup, then table ip kelp if that left it empty) and the
// pod cgroups. `kelp killall` runs it, for
// uninstalling and for tests; nothing outside kelp's own objects is
// touched.
func KillAll(ctx context.Context, cfg Config) error {
	agentDir, runDir, sock := cfg.paths()
	// Another cluster's run dir (or containerd) is left exactly as it is.
	if err := checkRunDirOwner(runDir, cfg.DataDir, sock); err != nil {
		return fmt.Errorf("nothing removed: %w", err)
	}
	var errs []error
	stateDir := filepath.Join(runDir, "runtime")
	if answers(sock) {
		if rt, err := runtime.New(ctx, runtime.Options{Address: sock, StateDir: stateDir,
			CgroupRoot: cfg.CgroupRoot, CgroupDriver: cfg.CgroupDriver, LogRoot: cfg.LogRoot}); err == nil {
			list, _ := rt.ListContainers(ctx, nil)
			for _, c := range list {
				_ = rt.StopContainer(ctx, c.ID, 0)
				if err := rt.RemoveContainer(ctx, c.ID); err != nil {
					errs = append(errs, err)
				}
			}
			// With every container gone, any shim left serves nothing.
			if _, err := rt.RemoveAllShims(ctx); err != nil {
				errs = append(errs, err)
			}
			rt.Close()
		}
		if sup, err := containerd.Start(ctx, containerd.Config{Dir: agentDir, Address: sock}); err == nil {
			if err := sup.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping containerd: %w", err))
			}
		}
	}
	// The log daemon outlives kelp as containerd does; with the
	// containers gone it has nothing left to copy.
	if err := containerlog.StopDaemon(runtime.LogSocket(stateDir)); err != nil {
		errs = append(errs, fmt.Errorf("stopping the container log daemon: %w", err))
	}
	if err := unmountPodVolumes(agentDir); err != nil {
		errs = append(errs, err)
	}
	// Each netplane component removes its own objects; table ip kelp goes
	// once none of them has anything left in it. They live in the node's
	// network namespace, which other clusters' agents may share: they are
	// removed only if this data dir's agent set up a pod network here.
	if netOpts := (nodenet.Options{AgentDir: agentDir, RunDir: runDir}); nodenet.Ran(netOpts) {
		if err := proxy.Cleanup(""); err != nil {
			errs = append(errs, err)
		}
		if err := nodenet.Cleanup(netOpts); err != nil {
			errs = append(errs, err)
		}
		if err := nft.DropIfEmpty(""); err != nil {
			errs = append(errs, err)
		}
	} else {
		logrus.Infof("killall: %s set up no pod network: leaving the host's network (cni0, kelp.1, table ip kelp) alone", cfg.DataDir)
	}
	if cfg.CgroupRoot != "" {
		removeCgroups(cfg)
	}
	if !mountsUnder(runDir) {
		_ = os.RemoveAll(runDir)
	}
	return errors.Join(errs...)
}

// mountsUnder reports whether anything is still mounted below dir (then
// it is left alone rather than deleted through a live mount).
func mountsUnder(dir string) bool {
	points, err := mountPointsUnder(dir)
	return err != nil || len(points) > 0
}

// mountPointsUnder lists the mount points below dir, deepest first.
func mountPointsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out, nil
}

// unmountPodVolumes detaches the pods' tmpfs volumes (secrets, projected
// tokens, memory emptyDirs) under the agent's pods directory, as
// k3s-killall.sh unmounts the kubelet's: with the containers gone nothing
// uses them, and the pod directories can be removed.
func unmountPodVolumes(agentDir string) error {
	points, err := mountPointsUnder(filepath.Join(agentDir, "pods"))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

func answers(sock string) bool {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// removeCgroups removes the pods' root cgroup and everything below it,
// deepest first, in every hierarchy (each v1 controller or the v2 one;
// under the systemd driver, its slice first). A cgroup goes only when
// empty: one still in use is left, and said at debug level.
func removeCgroups(cfg Config) {
	h, err := cfg.cgroups()
	if err != nil {
		logrus.Debugf("killall: cgroups: %v", err)
		return
	}
	pods, err := cgroups.NewPods(h)
	if err == nil {
		err = pods.RemoveAll()
	}
	if err != nil {
		logrus.Debugf("killall: %v", err)
	}
}
