package agent

import (
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/hostcheck"
	"github.com/kelp-project/kelp/runtime/cgroups"
)

// cgroups detects the host's cgroup version and resolves --cgroup-driver,
// once at start: a wrong driver (systemd without systemd) stops the
// agent here, not at its first container.
func (c Config) cgroups() (cgroups.Host, error) {
	root := c.CgroupRoot
	if root == "" {
		root = config.CgroupRoot
	}
	return cgroups.Detect(cgroups.DefaultRoot, c.CgroupDriver, cgroups.SystemdRunDir, root)
}

// reportCgroups says at start what the node runs on, and, loudly, what
// it lacks: checks are `kelp check-config`'s cgroup checks (hostcheck),
// whose hint for a missing memory controller is the exact fix (on a
// Raspberry Pi, the line for cmdline.txt). The agent still runs without
// it, as k3s's does, but memory limits are not enforced and OOM kills
// not seen.
func reportCgroups(h cgroups.Host, checks []hostcheck.Result) []string {
	logrus.Infof("agent: cgroups %s, driver %s, pods under %s", h.Version, h.Layout.Driver, h.Layout.Parent(h.Layout.Root()))
	var msgs []string
	for _, r := range checks {
		if r.Status != hostcheck.Missing {
			continue
		}
		msg := r.Check + ": " + r.Detail
		if strings.Contains(r.Check, "memory") {
			msg += ": pod memory limits are not enforced and OOM kills are not detected"
		}
		if r.Hint != "" {
			msg += "; fix: " + r.Hint
		}
		logrus.Error("agent: " + msg)
		msgs = append(msgs, msg)
	}
	return msgs
}
