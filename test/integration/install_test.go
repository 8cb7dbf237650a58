package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// install.sh installs the real binary, a kubectl symlink that runs the
// built-in kubectl, killall and uninstall scripts and a service unit. The
// script itself (init systems, agent mode, uninstall) is tested in
// test/install with a stub binary; this checks the real one installs.
// INSTALL_KELP_ROOT keeps every path, and the init system it detects,
// inside the temporary directory, so nothing on this machine is enabled.
func TestInstallScript(t *testing.T) {
	dir := t.TempDir()
	bin, units := filepath.Join(dir, "bin"), filepath.Join(dir, "systemd")
	cmd := exec.Command("sh", "../../install.sh")
	cmd.Env = append(os.Environ(), "KELP_BINARY="+kelpBin, "INSTALL_KELP_ROOT="+filepath.Join(dir, "root"), "INSTALL_KELP_BIN_DIR="+bin,
		"INSTALL_KELP_SYSTEMD_DIR="+units, "INSTALL_KELP_SKIP_ENABLE=true", "INSTALL_KELP_SKIP_DEPS=true",
		"KELP_URL=", "KELP_TOKEN=", "KELP_TOKEN_FILE=") // a server, whatever this environment holds
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	for _, f := range []string{"bin/kelp", "bin/kelp-uninstall.sh", "bin/kelp-killall.sh", "systemd/kelp.service"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not installed: %v", f, err)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(units, "kelp.service"))
	if !strings.Contains(string(unit), "ExecStart="+filepath.Join(bin, "kelp")+" server") {
		t.Errorf("unit: %s", unit)
	}
	v, err := exec.Command(filepath.Join(bin, "kubectl"), "version", "--client").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "Client Version: v1.37") {
		t.Errorf("kubectl symlink: %v %s", err, v)
	}
	bad := exec.Command("sh", "../../install.sh")
	bad.Env = append(os.Environ(), "KELP_BINARY="+filepath.Join(dir, "missing"), "INSTALL_KELP_ROOT="+filepath.Join(dir, "root"),
		"INSTALL_KELP_BIN_DIR="+bin, "INSTALL_KELP_SKIP_DEPS=true", "KELP_URL=")
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "does not exist") {
		t.Errorf("missing binary should fail clearly: %v %s", err, out)
	}
}

func TestKubeconfigMode(t *testing.T) {
	s := startServer(t)
	st, err := os.Stat(s.kubeconfig)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	ca, err := os.Stat(filepath.Join(s.dataDir, "server", "tls", "ca.key"))
	if err != nil || ca.Mode().Perm() != 0o600 {
		t.Fatalf("CA key mode: %v %v", ca, err)
	}
}
