package agent

// Whose run dir. Several agents may share a host (the lab, tests), each
// with its own data dir and run dir; the run dir holds containerd's socket
// and state, and the host's table ip kelp goes with the agent using the
// default run dir. An agent records its data dir in the run dir, so that
// `kelp killall` given another data dir can tell it would tear down a
// cluster that is not its own, and refuse.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kelp-project/kelp/embedded/containerd"
)

// ownerFile, in the run dir, holds the absolute data dir of its agent.
const ownerFile = "data-dir"

// claimRunDir records dataDir as the run dir's owner, unless another
// agent's live cluster holds it.
func claimRunDir(runDir, dataDir, sock string) error {
	if err := checkRunDirOwner(runDir, dataDir, sock); err != nil {
		return err
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(runDir, 0o711); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(runDir, ownerFile), []byte(abs+"\n"), 0o644)
}

// checkRunDirOwner fails when the run dir belongs to another data dir's
// agent that is still there: its containerd answers on sock running
// another agent directory's config, or the recorded owner's data dir
// still exists. A run dir whose owner is gone (data dir deleted, nothing
// answering) is free to take.
func checkRunDirOwner(runDir, dataDir, sock string) error {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	ours := containerd.ConfigPath(filepath.Join(abs, "agent"))
	if answers(sock) {
		if pid, cfg := containerd.Serving(sock); cfg != "" && cfg != ours {
			return fmt.Errorf("%s is in use by another cluster: the containerd on %s (pid %d) runs with %s, not %s; "+
				"give that cluster's --data-dir (and --run-dir) to act on it", runDir, sock, pid, cfg, ours)
		}
	}
	b, err := os.ReadFile(filepath.Join(runDir, ownerFile))
	if err != nil {
		return nil
	}
	owner := strings.TrimSpace(string(b))
	if owner == "" || owner == abs {
		return nil
	}
	if _, err := os.Stat(owner); err == nil {
		return fmt.Errorf("%s belongs to the cluster with --data-dir %s, not %s; give that --data-dir to act on it", runDir, owner, abs)
	}
	return nil
}
