// Package containerd supervises the agent's private containerd, the way k3s
// does: kelp writes a minimal config, starts containerd as a child in its own
// session (so signals aimed at kelp or its terminal do not reach it), and
// restarts it when it dies or stops answering.
//
// The data plane outlives kelp (shared/docs/design.md): when the supervising
// context ends, the watching stops but containerd keeps running, and a later
// kelp adopts it through the socket and the PID file next to it. Only Stop
// terminates containerd.
package containerd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	client "github.com/containerd/containerd"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// DefaultAddress is containerd's grpc socket unless Config.Address says otherwise.
const DefaultAddress = "/run/kelp/containerd/containerd.sock"

// Tunables; variables so tests can shrink them.
var (
	// readyTimeout bounds how long Start waits for a fresh containerd to answer.
	readyTimeout = 30 * time.Second
	// probeInterval is how often the watcher asks containerd for its
	// version: upstream's kubelet checks its runtime every 5 s.
	probeInterval = 5 * time.Second
	// probeTimeout bounds one health probe.
	probeTimeout = 2 * time.Second
	// probeFailures consecutive failed probes count as "stopped answering".
	probeFailures = 3
	// backoffMin and backoffMax bound the delay before a restart.
	backoffMin = 500 * time.Millisecond
	backoffMax = 30 * time.Second
	// stableAfter: a containerd that ran this long resets the backoff.
	stableAfter = 30 * time.Second
	// stopGrace is the time between SIGTERM and SIGKILL in Stop.
	stopGrace = 10 * time.Second
)

// Config places one agent's containerd.
type Config struct {
	// Dir is the agent directory (<data-dir>/agent). The config goes to
	// Dir/etc/containerd/config.toml; containerd's root is Dir/containerd.
	Dir string
	// Address is the grpc socket; default /run/kelp/containerd/containerd.sock.
	// containerd's state dir is <dir of Address>/state; ttrpc socket next to it.
	Address string
	// NetNS, when set, is a pinned network-namespace path that containerd is
	// started in (only the network namespace is switched).
	NetNS string
	// Log is where containerd's output goes; default Dir/containerd/containerd.log.
	Log string
}

// Supervisor watches one containerd.
type Supervisor struct {
	cfg        Config
	configPath string
	rootDir    string
	stateDir   string
	pidFile    string
	lockFile   string

	mu      sync.Mutex
	proc    *proc // the containerd currently supervised; nil if unknown
	stopped bool
	cancel  context.CancelFunc // ends the watcher
	watchWG sync.WaitGroup
}

// proc is one containerd process. done is non-nil only for our own children:
// it is closed once the process has been reaped.
type proc struct {
	pid     int
	done    chan struct{}
	started time.Time
}

// Start writes the config, then adopts a containerd already answering on
// Address (kelp restarted while containerd kept running) or starts one, and
// returns once the socket answers. It keeps watching: if containerd dies or
// stops answering it is restarted (with backoff). ctx ending stops the
// watching but does not stop containerd.
func Start(ctx context.Context, cfg Config) (*Supervisor, error) {
	if cfg.Dir == "" {
		return nil, errors.New("containerd: Config.Dir is required")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	if cfg.Address == "" {
		cfg.Address = DefaultAddress
	}
	if cfg.Address, err = filepath.Abs(cfg.Address); err != nil {
		return nil, err
	}
	if len(cfg.Address)+len(".ttrpc") >= 108 {
		return nil, fmt.Errorf("containerd: socket path %q is too long for a unix socket", cfg.Address)
	}
	if cfg.Log == "" {
		cfg.Log = filepath.Join(cfg.Dir, "containerd", "containerd.log")
	}
	sockDir := filepath.Dir(cfg.Address)
	s := &Supervisor{
		cfg:        cfg,
		configPath: ConfigPath(cfg.Dir),
		rootDir:    filepath.Join(cfg.Dir, "containerd"),
		stateDir:   filepath.Join(sockDir, "state"),
		pidFile:    pidFileFor(cfg.Address),
		lockFile:   filepath.Join(sockDir, "containerd.lock"),
	}
	if err := s.writeConfig(); err != nil {
		return nil, err
	}
	p, adopted, err := s.ensure(ctx)
	if err != nil {
		return nil, err
	}
	if adopted {
		logrus.Infof("containerd: adopted running containerd (pid %d) at %s", p.pid, cfg.Address)
	} else {
		logrus.Infof("containerd: started containerd (pid %d) at %s, log %s", p.pid, cfg.Address, cfg.Log)
	}
	wctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.proc = p
	s.cancel = cancel
	s.mu.Unlock()
	s.watchWG.Add(1)
	go s.watch(wctx)
	return s, nil
}

// Address is containerd's grpc socket.
func (s *Supervisor) Address() string { return s.cfg.Address }

// PID is the supervised containerd's process id (0 when unknown).
func (s *Supervisor) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid
}

// Stop terminates containerd (SIGTERM, then SIGKILL after 10s) and waits for
// it to exit. The supervisor does not restart it afterwards.
func (s *Supervisor) Stop() error {
	s.mu.Lock()
	s.stopped = true
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.watchWG.Wait()

	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || !s.isOurContainerd(p.pid) {
		// Maybe the PID file knows better (another supervisor restarted it).
		if pid := s.readPID(); pid > 0 && s.isOurContainerd(pid) {
			p = &proc{pid: pid}
		} else if p == nil {
			return fmt.Errorf("containerd: no known containerd process for %s", s.cfg.Address)
		} else {
			s.removePID(p.pid)
			return nil // already gone
		}
	}
	err := terminate(p, stopGrace)
	s.removePID(p.pid)
	logrus.Infof("containerd: stopped containerd (pid %d)", p.pid)
	return err
}

func (s *Supervisor) writeConfig() error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{
		{filepath.Dir(s.configPath), 0o700},
		{s.rootDir, 0o700},
		{s.stateDir, 0o711},
		{filepath.Dir(s.cfg.Address), 0o711},
		{filepath.Dir(s.cfg.Log), 0o700},
	} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return fmt.Errorf("containerd: %w", err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by kelp; rewritten at every start.\n")
	fmt.Fprintf(&b, "version = 2\n")
	fmt.Fprintf(&b, "root = %s\n", strconv.Quote(s.rootDir))
	fmt.Fprintf(&b, "state = %s\n", strconv.Quote(s.stateDir))
	fmt.Fprintf(&b, "# kelp drives containerd through the Go client, not CRI, and uses the\n")
	fmt.Fprintf(&b, "# overlayfs snapshotter (the client's default); the snapshotters that\n")
	fmt.Fprintf(&b, "# cannot work here are off so they do not log warnings.\n")
	fmt.Fprintf(&b, "disabled_plugins = [\"io.containerd.grpc.v1.cri\", \"io.containerd.snapshotter.v1.devmapper\", \"io.containerd.snapshotter.v1.aufs\", \"io.containerd.snapshotter.v1.btrfs\", \"io.containerd.snapshotter.v1.zfs\"]\n\n")
	fmt.Fprintf(&b, "[grpc]\n  address = %s\n\n", strconv.Quote(s.cfg.Address))
	fmt.Fprintf(&b, "[ttrpc]\n  address = %s\n\n", strconv.Quote(s.cfg.Address+".ttrpc"))
	fmt.Fprintf(&b, "[debug]\n  address = \"\"\n\n")
	fmt.Fprintf(&b, "[metrics]\n  address = \"\"\n\n")
	fmt.Fprintf(&b, "[plugins]\n")
	fmt.Fprintf(&b, "  [plugins.\"io.containerd.internal.v1.opt\"]\n    path = %s\n", strconv.Quote(filepath.Join(s.rootDir, "opt")))
	return writeFileAtomic(s.configPath, []byte(b.String()), 0o600)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// lock serialises start/adopt decisions between supervisors of one socket
// (in this process or another kelp).
func (s *Supervisor) lock() (func(), error) {
	f, err := os.OpenFile(s.lockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// ensure adopts the containerd answering on the socket or starts a new one,
// and returns once it answers.
func (s *Supervisor) ensure(ctx context.Context) (*proc, bool, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, false, fmt.Errorf("containerd: lock: %w", err)
	}
	defer unlock()

	pid := s.readPID()
	if pid > 0 && !s.isOurContainerd(pid) {
		pid = 0
	}
	if probe(ctx, s.cfg.Address) == nil {
		if pid == 0 {
			pid = s.findPID()
			if pid > 0 {
				_ = s.writePID(pid)
			}
		}
		return &proc{pid: pid, started: time.Now()}, true, nil
	}
	if pid > 0 {
		// Our containerd is alive but does not answer (yet): give it a
		// moment, as it may be starting up, then replace it.
		if err := waitReady(ctx, s.cfg.Address, 5*time.Second, func() bool { return !alive(pid) }); err == nil {
			return &proc{pid: pid, started: time.Now()}, true, nil
		}
		logrus.Warnf("containerd: pid %d does not answer on %s; killing it", pid, s.cfg.Address)
		_ = terminate(&proc{pid: pid}, 0)
	}
	p, err := s.spawn()
	if err != nil {
		return nil, false, err
	}
	exited := func() bool {
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}
	if err := waitReady(ctx, s.cfg.Address, readyTimeout, exited); err != nil {
		if !exited() {
			_ = terminate(p, 0)
		}
		s.removePID(p.pid)
		return nil, false, fmt.Errorf("containerd did not come up on %s (log %s): %w%s", s.cfg.Address, s.cfg.Log, err, logTail(s.cfg.Log))
	}
	return p, false, nil
}

// spawn starts containerd in its own session, in cfg.NetNS if set.
func (s *Supervisor) spawn() (*proc, error) {
	bin, err := exec.LookPath("containerd")
	if err != nil {
		bin = "/usr/bin/containerd"
	}
	// A stale socket from a dead containerd would make the listen fail.
	for _, sock := range []string{s.cfg.Address, s.cfg.Address + ".ttrpc"} {
		if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	logf, err := os.OpenFile(s.cfg.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("containerd: log: %w", err)
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()

	cmd := exec.Command(bin, "--config", s.configPath)
	cmd.Stdin = devnull
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Dir = "/"
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if s.cfg.NetNS != "" {
		err = startInNetNS(cmd, s.cfg.NetNS)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("containerd: start %s: %w", bin, err)
	}
	p := &proc{pid: cmd.Process.Pid, done: make(chan struct{}), started: time.Now()}
	go func() {
		err := cmd.Wait()
		logrus.Debugf("containerd: pid %d exited: %v", p.pid, err)
		close(p.done)
	}()
	if err := s.writePID(p.pid); err != nil {
		logrus.Warnf("containerd: pid file: %v", err)
	}
	return p, nil
}

// childEnv is kelp's environment with a PATH that surely finds runc and the
// shims.
func childEnv() []string {
	env := os.Environ()
	const need = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for i, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			env[i] = e + ":" + need
			return env
		}
	}
	return append(env, "PATH="+need)
}

// startInNetNS starts cmd with only its network namespace switched to the
// pinned namespace at path (like nsenter --net): the forking thread enters
// the namespace and comes back.
func startInNetNS(cmd *exec.Cmd, path string) error {
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("netns %s: %w", path, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		// If the thread cannot be restored, leaving it locked makes the
		// runtime discard it when this goroutine ends.
		orig, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", path, err)
			return
		}
		startErr := cmd.Start()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			logrus.Errorf("containerd: restoring network namespace: %v", err)
			errc <- startErr
			return
		}
		goruntime.UnlockOSThread()
		errc <- startErr
	}()
	return <-errc
}

// watch restarts containerd when it dies or stops answering.
func (s *Supervisor) watch(ctx context.Context) {
	defer s.watchWG.Done()
	failures := 0 // consecutive failed probes
	restarts := 0 // consecutive quick restarts, for the backoff
	ticker := time.NewTicker(probeInterval)
	defer ticker.Stop()
	var health healthClient
	defer health.close()
	for {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		var done <-chan struct{}
		if p != nil && p.done != nil {
			done = p.done
		}
		dead := false
		select {
		case <-ctx.Done():
			return
		case <-done:
			dead = true
			logrus.Warnf("containerd: pid %d exited", p.pid)
		case <-ticker.C:
			if p != nil && p.pid > 0 && p.done == nil && !alive(p.pid) {
				dead = true
				logrus.Warnf("containerd: pid %d is gone", p.pid)
				break
			}
			if err := health.probe(ctx, s.cfg.Address); err != nil {
				if ctx.Err() != nil {
					return
				}
				failures++
				logrus.Warnf("containerd: not answering on %s (%d/%d): %v", s.cfg.Address, failures, probeFailures, err)
				if failures >= probeFailures {
					dead = true
					if p != nil && p.pid > 0 {
						logrus.Warnf("containerd: killing unresponsive pid %d", p.pid)
						_ = terminate(p, 0)
					}
				}
			} else {
				failures = 0
			}
		}
		if !dead {
			continue
		}
		failures = 0
		health.close()
		// Did someone stop it deliberately (PID file removed by Stop)?
		if p != nil && p.pid > 0 && s.readPID() == 0 {
			logrus.Infof("containerd: pid file removed; containerd was stopped, not restarting")
			return
		}
		if p != nil && time.Since(p.started) >= stableAfter {
			restarts = 0
		}
		for {
			delay := backoffMin << restarts
			if delay > backoffMax || delay <= 0 {
				delay = backoffMax
			}
			restarts++
			logrus.Infof("containerd: restarting in %s", delay)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			np, adopted, err := s.ensure(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				logrus.Errorf("containerd: restart failed: %v", err)
				continue
			}
			s.mu.Lock()
			if s.stopped {
				s.mu.Unlock()
				return
			}
			s.proc = np
			s.mu.Unlock()
			if adopted {
				logrus.Infof("containerd: adopted containerd (pid %d)", np.pid)
			} else {
				logrus.Infof("containerd: restarted containerd (pid %d)", np.pid)
			}
			break
		}
	}
}

// healthClient probes containerd over one connection, kept between
// probes: dialling a new client every probe cost both kelp and containerd
// a gRPC connection set-up and teardown each time. A failed probe drops
// the connection, so the next one dials afresh (a restarted containerd).
type healthClient struct{ c *client.Client }

func (h *healthClient) probe(ctx context.Context, address string) error {
	if h.c == nil {
		if _, err := os.Stat(address); err != nil {
			return err
		}
		c, err := client.New(address, client.WithTimeout(probeTimeout))
		if err != nil {
			return err
		}
		h.c = c
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if _, err := h.c.Version(ctx); err != nil {
		h.close()
		return err
	}
	return nil
}

func (h *healthClient) close() {
	if h.c != nil {
		_ = h.c.Close()
		h.c = nil
	}
}

// probe asks containerd for its version, on a connection of its own.
func probe(ctx context.Context, address string) error {
	if _, err := os.Stat(address); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c, err := client.New(address, client.WithTimeout(probeTimeout))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Version(ctx)
	return err
}

// waitReady polls the socket until it answers, the timeout passes or gone
// reports that the process has died.
func waitReady(ctx context.Context, address string, timeout time.Duration, gone func() bool) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = probe(ctx, address); last == nil {
			return nil
		}
		if gone() {
			return errors.New("containerd exited")
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s: %w", timeout, last)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// terminate sends SIGTERM, then SIGKILL after grace (at once when grace is
// 0), and waits for the process to be gone.
func terminate(p *proc, grace time.Duration) error {
	exited := func() bool {
		if p.done != nil {
			select {
			case <-p.done:
				return true
			default:
				return false
			}
		}
		return !alive(p.pid)
	}
	waitGone := func(d time.Duration) bool {
		deadline := time.Now().Add(d)
		for {
			if exited() {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if grace > 0 {
		if err := unix.Kill(p.pid, unix.SIGTERM); err != nil && err != unix.ESRCH {
			return err
		}
		if waitGone(grace) {
			return nil
		}
		logrus.Warnf("containerd: pid %d ignored SIGTERM for %s; killing", p.pid, grace)
	}
	if err := unix.Kill(p.pid, unix.SIGKILL); err != nil && err != unix.ESRCH {
		return err
	}
	if !waitGone(10 * time.Second) {
		return fmt.Errorf("containerd: pid %d did not exit", p.pid)
	}
	return nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	st := b[i+2]
	return st != 'Z' && st != 'X'
}

// isOurContainerd reports whether pid is alive and runs with our config, so
// a recycled PID is never signalled.
func (s *Supervisor) isOurContainerd(pid int) bool {
	cfg, ok := containerdConfig(pid)
	return ok && cfg == s.configPath
}

// containerdConfig is the config file a live containerd process runs
// with (its --config); false if pid is no live containerd.
func containerdConfig(pid int) (string, bool) {
	if !alive(pid) {
		return "", false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(args) == 0 || filepath.Base(args[0]) != "containerd" {
		return "", false
	}
	for i, a := range args {
		if (a == "--config" || a == "-c") && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v, true
		}
	}
	return "", true
}

// findPID looks for a containerd running with our config (adoption without a
// PID file).
func (s *Supervisor) findPID() int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s.isOurContainerd(pid) {
			return pid
		}
	}
	return 0
}

func (s *Supervisor) readPID() int {
	b, err := os.ReadFile(s.pidFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

func (s *Supervisor) writePID(pid int) error {
	return writeFileAtomic(s.pidFile, []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// removePID removes the PID file if it still names pid.
func (s *Supervisor) removePID(pid int) {
	if s.readPID() == pid {
		_ = os.Remove(s.pidFile)
	}
}

// logTail returns the end of containerd's log for error messages.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "\n--- containerd log tail ---\n" + string(b)
}

// Serving names the containerd behind the socket at address, from the PID
// file kelp keeps next to it: its pid and the config file it runs with
// (which lies in the agent directory of the agent that started it). Zero
// values when no live containerd is recorded there.
func Serving(address string) (pid int, configPath string) {
	s := &Supervisor{pidFile: pidFileFor(address)}
	pid = s.readPID()
	if pid <= 0 {
		return 0, ""
	}
	cfg, ok := containerdConfig(pid)
	if !ok {
		return 0, ""
	}
	return pid, cfg
}

// pidFileFor is where kelp keeps the pid of the containerd serving
// address: next to the socket.
func pidFileFor(address string) string { return filepath.Join(filepath.Dir(address), "containerd.pid") }

// ConfigPath is the config file of the containerd supervised for the
// agent directory dir.
func ConfigPath(dir string) string { return filepath.Join(dir, "etc", "containerd", "config.toml") }
