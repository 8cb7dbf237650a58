package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kelp-project/kelp/config"
)

// TestUnknownNodeNetworkFailsFirst: a wrong --flannel-backend is refused
// with the known names before containerd or anything else is started.
func TestUnknownNodeNetworkFailsFirst(t *testing.T) {
	dir := t.TempDir()
	err := Run(context.Background(), Config{DataDir: dir, RunDir: filepath.Join(dir, "run"), NodeNetwork: "wireguard"}, Credentials{Node: &rest.Config{}})
	if err == nil || !strings.Contains(err.Error(), "--flannel-backend") || !strings.Contains(err.Error(), "host-gw, none, vxlan") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "agent")); !os.IsNotExist(err) {
		t.Errorf("the agent dir was created before the check: %v", err)
	}
}

func TestPaths(t *testing.T) {
	agentDir, runDir, sock := Config{DataDir: "/data"}.paths()
	if agentDir != "/data/agent" || runDir != config.RunDir || sock != filepath.Join(config.RunDir, "containerd", "containerd.sock") {
		t.Errorf("defaults: %q %q %q", agentDir, runDir, sock)
	}
	_, runDir, sock = Config{DataDir: "/data", RunDir: "/r"}.paths()
	if runDir != "/r" || sock != "/r/containerd/containerd.sock" {
		t.Errorf("with a run dir: %q %q", runDir, sock)
	}
	if _, _, sock = (Config{RunDir: "/r", ContainerdSocket: "/s.sock"}).paths(); sock != "/s.sock" {
		t.Errorf("an explicit socket: %q", sock)
	}
}
