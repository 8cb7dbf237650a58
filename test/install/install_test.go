// Package install tests install.sh as a user runs it, in a temporary root
// (INSTALL_KELP_ROOT), against stub systemctl, rc-service and rc-update
// scripts that record their calls, and a stub kelp binary.
//
// It is its own package, not part of test/integration, because it needs
// no kelp build and no server: a stub kelp answers --version and records
// `kelp killall`, so the uninstall and kill-all scripts the installer
// writes can be run here too without stopping anything on this machine.
// (test/integration's TestInstallScript installs the real binary and checks
// its kubectl symlink.) Nothing is written outside t.TempDir(), and no
// network is used but the loopback HTTP server release_test.go serves a
// release from.
package install

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "kelp" {
		fakeKelp(os.Args[1:])
	}
	os.Exit(m.Run())
}

// fakeKelp is this test binary copied in as kelp, for the kill-all test:
// kelp-killall.sh finds a running kelp by /proc/<pid>/exe, which for a
// shell stub is the shell. `killall` is recorded in $INSTALL_TEST_CALLS;
// anything else runs until SIGTERM (or a minute, so that a failed test
// leaves nothing behind).
func fakeKelp(args []string) {
	if len(args) > 0 && args[0] == "killall" {
		f, err := os.OpenFile(os.Getenv("INSTALL_TEST_CALLS"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			os.Exit(1)
		}
		fmt.Fprintf(f, "kelp killall KELP_DATA_DIR=%s\n", os.Getenv("KELP_DATA_DIR"))
		f.Close()
		os.Exit(0)
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	select {
	case <-c:
	case <-time.After(time.Minute):
	}
	os.Exit(0)
}

// script is the repository's install.sh.
func script(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "install.sh")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// host is a fake machine: a root the installer writes under, a directory
// of stubs first on PATH, and the log the stubs append to.
type host struct {
	t     *testing.T
	root  string
	stubs string
	calls string // one line per stub call: "systemctl enable kelp"
	kelp  string // the stub binary install.sh copies (KELP_BINARY)
}

// newHost makes a fake machine. init is "systemd" (/run/systemd/system
// exists under the root), "openrc" (rc-service and rc-update on PATH) or
// "none".
func newHost(t *testing.T, init string) *host {
	dir := t.TempDir()
	h := &host{t: t, root: filepath.Join(dir, "root"), stubs: filepath.Join(dir, "stubs"),
		calls: filepath.Join(dir, "calls"), kelp: filepath.Join(dir, "kelp-build")}
	for _, d := range []string{h.root, h.stubs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	switch init {
	case "systemd":
		if err := os.MkdirAll(filepath.Join(h.root, "run/systemd/system"), 0o755); err != nil {
			t.Fatal(err)
		}
		names = []string{"systemctl"}
	case "openrc":
		names = []string{"rc-service", "rc-update"}
	case "none":
	default:
		t.Fatalf("init %q", init)
	}
	for _, n := range names {
		h.write(filepath.Join(h.stubs, n), "#!/bin/sh\necho \""+n+" $*\" >>"+h.calls+"\n")
	}
	// The stub kelp records killall with the data dir it was given through
	// the environment (kelp-killall.sh sources the service's env file).
	h.write(h.kelp, "#!/bin/sh\n"+
		"if [ \"$1\" = --version ]; then echo 'kelp version v0.0.0-test'; exit 0; fi\n"+
		"echo \"kelp $* KELP_DATA_DIR=${KELP_DATA_DIR:-}\" >>"+h.calls+"\n")
	return h
}

func (h *host) write(path, content string) {
	h.t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

// env is the environment of a run: the stubs first on PATH, the system's
// tools after them, and no KELP_ variable but those given (the test's own
// environment may hold some, e.g. KELP_BIN from scripts/test.sh).
func (h *host) env(extra ...string) []string {
	env := []string{"PATH=" + h.stubs + ":/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + h.t.TempDir(), "LC_ALL=C"}
	return append(env, extra...)
}

// install runs install.sh with the fake machine's settings plus extra
// variables and arguments, and returns its output.
func (h *host) install(extra []string, args ...string) (string, error) {
	h.t.Helper()
	// As `curl … | sh -s - args`: the arguments after the script are its own.
	cmd := exec.Command("sh", append([]string{script(h.t)}, args...)...)
	cmd.Env = h.env(append([]string{"KELP_BINARY=" + h.kelp, "INSTALL_KELP_ROOT=" + h.root, "INSTALL_KELP_SKIP_DEPS=true"}, extra...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (h *host) mustInstall(extra []string, args ...string) string {
	h.t.Helper()
	out, err := h.install(extra, args...)
	if err != nil {
		h.t.Fatalf("install.sh: %v\n%s", err, out)
	}
	return out
}

// run runs a script the installer wrote (uninstall, killall).
func (h *host) run(path string) string {
	h.t.Helper()
	cmd := exec.Command(path)
	cmd.Env = h.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		h.t.Fatalf("%s: %v\n%s", path, err, out)
	}
	return string(out)
}

// takeCalls returns the recorded calls and clears the log.
func (h *host) takeCalls() []string {
	h.t.Helper()
	b, err := os.ReadFile(h.calls)
	if err != nil && !os.IsNotExist(err) {
		h.t.Fatal(err)
	}
	os.Remove(h.calls)
	var calls []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			calls = append(calls, l)
		}
	}
	return calls
}

func (h *host) path(rel string) string { return filepath.Join(h.root, rel) }

func (h *host) read(rel string) string {
	h.t.Helper()
	b, err := os.ReadFile(h.path(rel))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func (h *host) exists(rel string) bool {
	_, err := os.Lstat(h.path(rel))
	return err == nil
}

func wantCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls\n got %q\nwant %q", got, want)
	}
}

// hasLines checks that text holds each line exactly (unit files are line
// oriented: "KillMode=process" must be a line, not a substring).
func hasLines(t *testing.T, what, text string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		have[l] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("%s lacks the line %q:\n%s", what, l, text)
		}
	}
}

// verifyUnit runs systemd-analyze verify, which parses a unit the way
// systemd does without a running systemd. It exits 0 on settings it
// ignores ("Failed to parse service type, ignoring"), so any output at all
// is a failure.
func verifyUnit(t *testing.T, unit string) {
	t.Helper()
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is not installed (apt-get install systemd; scripts/test.sh installs it)")
	}
	out, err := exec.Command(bin, "verify", "--man=no", unit).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
	}
}

func TestServerUnderSystemd(t *testing.T) {
	h := newHost(t, "systemd")
	h.mustInstall(nil)
	bin := h.path("usr/local/bin")
	unit := h.read("etc/systemd/system/kelp.service")
	envFile := h.path("etc/systemd/system/kelp.service.env")
	hasLines(t, "kelp.service", unit,
		"[Service]",
		"Type=exec", // kelp does not notify
		"KillMode=process",
		"Delegate=yes",
		"Restart=always",
		"LimitNOFILE=1048576",
		"EnvironmentFile=-"+envFile,
		"ExecStart="+bin+"/kelp server",
		"WantedBy=multi-user.target",
	)
	verifyUnit(t, h.path("etc/systemd/system/kelp.service"))
	wantCalls(t, h.takeCalls(), "systemctl daemon-reload", "systemctl enable kelp", "systemctl restart kelp")

	st, err := os.Stat(envFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("env file: %v %v, want mode 0600", st, err)
	}
	if env := h.read("etc/systemd/system/kelp.service.env"); env != "" {
		t.Errorf("server env file holds %q, want nothing (no KELP_ variables given)", env)
	}
	if l, err := os.Readlink(filepath.Join(bin, "kubectl")); err != nil || l != "kelp" {
		t.Errorf("kubectl symlink: %q %v", l, err)
	}
	for _, f := range []string{"kelp", "kelp-killall.sh", "kelp-uninstall.sh"} {
		if st, err := os.Stat(filepath.Join(bin, f)); err != nil || st.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s: %v %v", f, st, err)
		}
	}

	// The uninstall stops and disables the unit, stops the data plane
	// (kelp killall, through kelp-killall.sh) and removes what was installed.
	if err := os.MkdirAll(h.path("var/lib/kelp/server"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.run(filepath.Join(bin, "kelp-uninstall.sh"))
	// (kelp-killall.sh runs while the unit file is still there, for its
	// environment, so it stops the stopped unit once more: a no-op.)
	wantCalls(t, h.takeCalls(), "systemctl disable --now kelp", "systemctl stop kelp.service", "kelp killall KELP_DATA_DIR=",
		"systemctl daemon-reload", "systemctl reset-failed kelp")
	for _, f := range []string{"etc/systemd/system/kelp.service", "etc/systemd/system/kelp.service.env",
		"usr/local/bin/kelp", "usr/local/bin/kubectl", "usr/local/bin/kelp-killall.sh",
		"usr/local/bin/kelp-uninstall.sh", "var/lib/kelp"} {
		if h.exists(f) {
			t.Errorf("%s is still there after the uninstall", f)
		}
	}
}

func TestAgentUnderSystemd(t *testing.T) {
	h := newHost(t, "systemd")
	out := h.mustInstall([]string{"KELP_URL=https://192.0.2.10:6443", "KELP_TOKEN=K10abc::server:s3cret", "KELP_NODE_NAME=pi-2", "KELP_KUBELET_PORT="},
		"--node-ip", "192.0.2.11")
	if !strings.Contains(out, "joining https://192.0.2.10:6443") {
		t.Errorf("output: %s", out)
	}
	unit := h.read("etc/systemd/system/kelp-agent.service")
	hasLines(t, "kelp-agent.service", unit,
		"ExecStart="+h.path("usr/local/bin/kelp")+" agent --node-ip 192.0.2.11",
		"EnvironmentFile=-"+h.path("etc/systemd/system/kelp-agent.service.env"),
		"KillMode=process")
	verifyUnit(t, h.path("etc/systemd/system/kelp-agent.service"))
	// Every KELP_ variable but the installer's own KELP_BINARY and the empty
	// ones (kelp would fail to parse an empty number).
	env := h.read("etc/systemd/system/kelp-agent.service.env")
	if want := "KELP_NODE_NAME='pi-2'\nKELP_TOKEN='K10abc::server:s3cret'\nKELP_URL='https://192.0.2.10:6443'\n"; env != want {
		t.Errorf("env file\n%s\nwant\n%s", env, want)
	}
	wantCalls(t, h.takeCalls(), "systemctl daemon-reload", "systemctl enable kelp-agent", "systemctl restart kelp-agent")
	if h.exists("etc/systemd/system/kelp.service") || !h.exists("usr/local/bin/kelp-agent-uninstall.sh") {
		t.Error("an agent install should write kelp-agent.service and kelp-agent-uninstall.sh only")
	}
}

func TestAgentWithTokenFile(t *testing.T) {
	h := newHost(t, "systemd")
	tok := filepath.Join(t.TempDir(), "token")
	h.write(tok, "K10abc::server:s3cret\n")
	h.mustInstall([]string{"KELP_URL=https://192.0.2.10:6443", "KELP_TOKEN_FILE=" + tok})
	if env := h.read("etc/systemd/system/kelp-agent.service.env"); !strings.Contains(env, "KELP_TOKEN_FILE='"+tok+"'\n") {
		t.Errorf("env file: %s", env)
	}
	if !strings.Contains(h.read("etc/systemd/system/kelp-agent.service"), " agent\n") {
		t.Error("KELP_URL with KELP_TOKEN_FILE should run kelp agent")
	}

	out, err := newHost(t, "systemd").install([]string{"KELP_URL=https://192.0.2.10:6443", "KELP_TOKEN_FILE=/nonexistent"})
	if err == nil || !strings.Contains(out, "KELP_TOKEN_FILE=/nonexistent is not a readable file") {
		t.Errorf("missing token file: %v %s", err, out)
	}
}

// Refusals write nothing and start nothing.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"url without token", []string{"KELP_URL=https://192.0.2.10:6443"}, nil, "neither KELP_TOKEN nor KELP_TOKEN_FILE"},
		{"url not https", []string{"KELP_URL=192.0.2.10:6443", "KELP_TOKEN=x"}, nil, "must be https://"},
		{"unknown command", []string{"INSTALL_KELP_EXEC=kubectl"}, nil, "unknown kelp command 'kubectl'"},
		{"argument needing quotes", nil, []string{"--node-name", "a b"}, "needs quoting"},
		{"quote in a value", []string{"KELP_NODE_NAME=it's"}, nil, "contains a quote"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t, "systemd")
			out, err := h.install(c.env, c.args...)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("got %v %s, want an error with %q", err, out, c.want)
			}
			if h.exists("etc/systemd/system/kelp.service") || h.exists("etc/systemd/system/kelp-agent.service") {
				t.Error("a unit was written")
			}
			wantCalls(t, h.takeCalls())
		})
	}
}

// INSTALL_KELP_EXEC keeps its meaning from before agents: a command, or
// flags only (then KELP_URL decides).
func TestExec(t *testing.T) {
	h := newHost(t, "systemd")
	h.mustInstall([]string{"INSTALL_KELP_EXEC=server --disable-agent"}, "--https-listen-port", "7443")
	hasLines(t, "unit", h.read("etc/systemd/system/kelp.service"),
		"ExecStart="+h.path("usr/local/bin/kelp")+" server --disable-agent --https-listen-port 7443")

	h = newHost(t, "systemd")
	h.mustInstall([]string{"INSTALL_KELP_EXEC=--node-name n3", "KELP_URL=https://192.0.2.10:6443", "KELP_TOKEN=t"})
	hasLines(t, "unit", h.read("etc/systemd/system/kelp-agent.service"),
		"ExecStart="+h.path("usr/local/bin/kelp")+" agent --node-name n3")
}

func TestSkipStartAndEnable(t *testing.T) {
	h := newHost(t, "systemd")
	h.mustInstall([]string{"INSTALL_KELP_SKIP_START=true"})
	wantCalls(t, h.takeCalls(), "systemctl daemon-reload", "systemctl enable kelp")

	h = newHost(t, "systemd")
	h.mustInstall([]string{"INSTALL_KELP_SKIP_ENABLE=true"})
	wantCalls(t, h.takeCalls())
	if !h.exists("etc/systemd/system/kelp.service") {
		t.Error("INSTALL_KELP_SKIP_ENABLE still writes the unit")
	}
}

func TestOpenRC(t *testing.T) {
	h := newHost(t, "openrc")
	h.mustInstall([]string{"KELP_URL=https://192.0.2.10:6443", "KELP_TOKEN=t", "KELP_DATA_DIR=" + h.path("srv/kelp")})
	svc := h.read("etc/init.d/kelp-agent")
	hasLines(t, "openrc service", svc,
		"#!/sbin/openrc-run",
		"supervisor=supervise-daemon",
		`command="`+h.path("usr/local/bin/kelp")+`"`,
		`command_args="agent"`,
		"respawn_max=0",
		`if [ -f "`+h.path("etc/kelp/kelp-agent.env")+`" ]; then . "`+h.path("etc/kelp/kelp-agent.env")+`"; fi`)
	if out, err := exec.Command("sh", "-n", h.path("etc/init.d/kelp-agent")).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v %s", err, out)
	}
	if h.exists("etc/systemd/system/kelp-agent.service") {
		t.Error("a systemd unit under openrc")
	}
	wantCalls(t, h.takeCalls(), "rc-update add kelp-agent default", "rc-service kelp-agent restart")
	// The environment file is what openrc sources: sh must read the values back.
	out, err := exec.Command("sh", "-c", `set -a; . "$0"; printf '%s %s' "$KELP_URL" "$KELP_TOKEN"`, h.path("etc/kelp/kelp-agent.env")).CombinedOutput()
	if err != nil || string(out) != "https://192.0.2.10:6443 t" {
		t.Errorf("sourcing the env file: %v %q", err, out)
	}

	h.run(h.path("usr/local/bin/kelp-agent-uninstall.sh"))
	// killall runs with the service's environment: it finds the data dir.
	wantCalls(t, h.takeCalls(), "rc-service kelp-agent stop", "rc-update delete kelp-agent default", "rc-service kelp-agent stop",
		"kelp killall KELP_DATA_DIR="+h.path("srv/kelp"))
	if h.exists("etc/init.d/kelp-agent") || h.exists("etc/kelp/kelp-agent.env") || h.exists("usr/local/bin/kelp") {
		t.Error("the uninstall left the service, its environment or the binary")
	}
}

// Without systemd or openrc (a container; this machine) the unit is
// written for later and nothing is called.
func TestNoInit(t *testing.T) {
	h := newHost(t, "none")
	out := h.mustInstall(nil)
	if !strings.Contains(out, "start kelp with:") {
		t.Errorf("output: %s", out)
	}
	verifyUnit(t, h.path("etc/systemd/system/kelp.service"))
	wantCalls(t, h.takeCalls())
}

// A server and an agent on one machine share the binary and kelp-killall.sh:
// uninstalling one leaves the other working.
func TestServerAndAgentOnOneMachine(t *testing.T) {
	h := newHost(t, "systemd")
	h.mustInstall(nil)
	h.mustInstall([]string{"KELP_URL=https://127.0.0.1:6443", "KELP_TOKEN=t", "KELP_DATA_DIR=" + h.path("var/lib/kelp-agent")})
	h.takeCalls()

	h.run(h.path("usr/local/bin/kelp-agent-uninstall.sh"))
	wantCalls(t, h.takeCalls(), "systemctl disable --now kelp-agent", "systemctl daemon-reload", "systemctl reset-failed kelp-agent")
	if h.exists("etc/systemd/system/kelp-agent.service") || !h.exists("etc/systemd/system/kelp.service") ||
		!h.exists("usr/local/bin/kelp") || !h.exists("usr/local/bin/kelp-uninstall.sh") {
		t.Error("uninstalling the agent should remove only the agent's service")
	}

	// kelp-killall.sh stops every kelp unit.
	h.run(h.path("usr/local/bin/kelp-killall.sh"))
	wantCalls(t, h.takeCalls(), "systemctl stop kelp.service", "kelp killall KELP_DATA_DIR=")
}

// kelp-killall.sh stops a kelp server or agent started by hand from the
// installed binary, and nothing else: not kubectl (the same binary), not a
// kelp installed elsewhere.
func TestKillAllStopsOnlyThisKelp(t *testing.T) {
	h := newHost(t, "systemd")
	h.mustInstall(nil)
	h.takeCalls()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := h.path("usr/local/bin/kelp")
	other := filepath.Join(t.TempDir(), "kelp")
	for _, dst := range []string{bin, other} {
		copyFile(t, self, dst)
	}
	// start runs a fake kelp; its channel closes when it exits (a killed
	// child is a zombie until waited for, and a zombie still takes signal 0).
	start := func(path string, args ...string) chan struct{} {
		cmd := exec.Command(path, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		return done
	}
	server := start(bin, "--debug", "server")
	kubectl := start(bin, "kubectl", "get", "pods", "server")
	elsewhere := start(other, "server")
	time.Sleep(200 * time.Millisecond) // let them set up their signal handlers

	cmd := exec.Command(h.path("usr/local/bin/kelp-killall.sh"))
	cmd.Env = h.env("INSTALL_TEST_CALLS=" + h.calls)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kelp-killall.sh: %v\n%s", err, out)
	}
	select {
	case <-server:
	case <-time.After(5 * time.Second):
		t.Error("the kelp server started by hand is still running")
	}
	time.Sleep(300 * time.Millisecond) // a stray SIGTERM would have landed by now
	for name, done := range map[string]chan struct{}{"kubectl": kubectl, "a kelp installed elsewhere": elsewhere} {
		select {
		case <-done:
			t.Errorf("%s was stopped", name)
		default:
		}
	}
	wantCalls(t, h.takeCalls(), "systemctl stop kelp.service", "kelp killall KELP_DATA_DIR=")
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	os.Remove(dst) // a fresh inode, not a write into the installed file
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
