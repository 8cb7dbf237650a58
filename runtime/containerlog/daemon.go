package containerlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The node's log daemon. One runs per node (per socket), started by the
// agent in a session of its own, so that like containerd it outlives kelp:
// a container's output keeps reaching its file while kelp is stopped or
// being upgraded.
//
// Protocol, one request per connection on a unix socket only root can
// open:
//   - "ping\n": the daemon answers "ok\n";
//   - "v1 <log path>\n" with two descriptors attached (SCM_RIGHTS), the
//     container's stdout and stderr: the daemon opens the file and
//     answers "ok\n", or "error <reason>\n" and closes them.
//
// A daemon holds <socket>.lock (flock) for its whole life, its pid
// written in it: a second daemon for the same socket exits at once, and
// the holder is the one `kelp killall` stops. A daemon that starts takes
// over the pipes its predecessor had from the parked writers (see
// writer.go), whose copies of them it duplicates with pidfd_getfd(2).

const (
	dialTimeout    = 2 * time.Second
	requestTimeout = 5 * time.Second
	// maxRequest bounds a request line: "v1 " and a path.
	maxRequest = 4096
)

// RunDaemon serves socket until SIGTERM or SIGINT. It returns an error
// only if it could not start; when another daemon already holds the
// socket it returns nil, as that one serves.
func RunDaemon(socket string) error {
	lock, err := lockDaemon(socket)
	if err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			fmt.Fprintf(os.Stderr, "kelp log-daemon: another daemon serves %s\n", socket)
			return nil
		}
		return err
	}
	defer lock.Close()
	signal.Ignore(syscall.SIGPIPE, syscall.SIGHUP)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return err
	}
	old := unix.Umask(0o077)
	l, err := net.Listen("unix", socket)
	unix.Umask(old)
	if err != nil {
		return fmt.Errorf("log daemon: %w", err)
	}
	n, err := adoptParked("/proc", socket)
	fmt.Fprintf(os.Stderr, "kelp log-daemon: pid %d serving %s; took over %d containers' output from parked writers (%v)\n", os.Getpid(), socket, n, err)
	go func() {
		<-stop
		// The parked writers keep the pipes open: containers block on a
		// full pipe rather than die of SIGPIPE, and the next daemon
		// picks their output up where this one left it.
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			fmt.Fprintf(os.Stderr, "kelp log-daemon: accept: %v\n", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go serve(c.(*net.UnixConn))
	}
}

func lockDaemon(socket string) (*os.File, error) {
	f, err := os.OpenFile(socket+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

func serve(c *net.UnixConn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(requestTimeout))
	buf := make([]byte, maxRequest)
	oob := make([]byte, unix.CmsgSpace(2*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return
	}
	fds := receivedFDs(oob[:oobn])
	reply := func(s string) { _, _ = c.Write([]byte(s + "\n")) }
	req := string(bytes.TrimSuffix(buf[:n], []byte("\n")))
	if req == "ping" {
		closeFDs(fds)
		reply("ok")
		return
	}
	path, ok := strings.CutPrefix(req, "v1 ")
	switch {
	case !ok:
		closeFDs(fds)
		reply("error unknown request")
		return
	case !filepath.IsAbs(path) || strings.ContainsAny(path, "\n\x00"):
		closeFDs(fds)
		reply("error log path must be absolute")
		return
	case len(fds) != 2:
		closeFDs(fds)
		reply(fmt.Sprintf("error want 2 descriptors, got %d", len(fds)))
		return
	}
	w, err := openRotating(path, logMaxSize, logMaxFiles)
	if err != nil {
		closeFDs(fds)
		reply("error " + err.Error())
		return
	}
	reply("ok")
	go follow(w, pollable(fds[0], "stdout"), pollable(fds[1], "stderr"))
}

func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if r, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// pollable wraps a pipe's read end for Go's poller, so that a thousand
// idle containers cost a thousand parked goroutines, not threads. The
// flag is on the pipe's open file description, which only the daemon and
// the parked writer (which never reads it) share.
func pollable(fd int, name string) *os.File {
	unix.CloseOnExec(fd)
	_ = unix.SetNonblock(fd, true)
	return os.NewFile(uintptr(fd), name)
}

// handoff gives the container's pipes (fds) to the daemon at socket.
func handoff(socket, path string, fds ...int) error {
	c, err := dial(socket)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, _, err := c.WriteMsgUnix([]byte("v1 "+path+"\n"), unix.UnixRights(fds...), nil); err != nil {
		return err
	}
	return readReply(c)
}

// Ping reports whether a daemon answers on socket.
func Ping(socket string) error {
	c, err := dial(socket)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	return readReply(c)
}

func dial(socket string) (*net.UnixConn, error) {
	c, err := net.DialTimeout("unix", socket, dialTimeout)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(requestTimeout))
	return c.(*net.UnixConn), nil
}

func readReply(c *net.UnixConn) error {
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("log daemon: %w", err)
	}
	line = strings.TrimSuffix(line, "\n")
	if line == "ok" {
		return nil
	}
	return fmt.Errorf("log daemon: %s", strings.TrimPrefix(line, "error "))
}

// EnsureDaemon starts binary as the log daemon for socket unless one
// answers there already, its output appended to logFile, and waits until
// it answers. The daemon runs in a session of its own: it is not stopped
// with the caller.
func EnsureDaemon(binary, socket, logFile string) error {
	if Ping(socket) == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(binary, DaemonArgs(socket)...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = out, out, "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("log daemon %s: %w", binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err = Ping(socket); err == nil {
			return nil
		}
		select {
		case werr := <-exited:
			if Ping(socket) == nil { // lost a race to another starter
				return nil
			}
			return fmt.Errorf("log daemon exited (%v); see %s", werr, logFile)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("log daemon does not answer on %s: %w", socket, err)
		}
	}
}

// StopDaemon stops the daemon serving socket, if any, and waits for it
// to go.
func StopDaemon(socket string) error {
	b, err := os.ReadFile(socket + ".lock")
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return nil
	}
	// The lock file outlives its daemon: only a live process still
	// holding the lock is ours to stop.
	if !daemonHolds(socket) {
		return nil
	}
	if err := unix.Kill(pid, unix.SIGTERM); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	for i := 0; i < 100 && daemonHolds(socket); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if daemonHolds(socket) {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	_ = os.Remove(socket)
	return nil
}

// daemonHolds reports whether a live daemon holds socket's lock.
func daemonHolds(socket string) bool {
	f, err := os.OpenFile(socket+".lock", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return true
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// adoptParked takes over the pipes of the writers parked for socket: a
// daemon that restarts picks up every running container's output.
func adoptParked(procRoot, socket string) (int, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return 0, err
	}
	adopted := 0
	var errs []error
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		path, ok := parkedFor(filepath.Join(procRoot, e.Name()), socket)
		if !ok {
			continue
		}
		if err := adopt(pid, path); err != nil {
			errs = append(errs, fmt.Errorf("pid %d (%s): %w", pid, path, err))
			continue
		}
		adopted++
	}
	return adopted, errors.Join(errs...)
}

// parkedFor reads a process's argv[0] and environment: the log path of a
// writer parked for socket.
func parkedFor(procDir, socket string) (string, bool) {
	cmdline, err := os.ReadFile(filepath.Join(procDir, "cmdline"))
	if err != nil || !bytes.HasPrefix(cmdline, []byte(parkedName+"\x00")) {
		return "", false
	}
	environ, err := os.ReadFile(filepath.Join(procDir, "environ"))
	if err != nil {
		return "", false
	}
	var path, sock string
	for _, kv := range strings.Split(string(environ), "\x00") {
		if v, ok := strings.CutPrefix(kv, parkedPathEnv+"="); ok {
			path = v
		} else if v, ok := strings.CutPrefix(kv, parkedSocketEnv+"="); ok {
			sock = v
		}
	}
	return path, sock == socket && filepath.IsAbs(path)
}

func adopt(pid int, path string) error {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return err
	}
	defer unix.Close(pidfd)
	var fds []int
	for _, target := range []int{3, 4} {
		fd, err := unix.PidfdGetfd(pidfd, target, 0)
		if err != nil {
			closeFDs(fds)
			return err
		}
		fds = append(fds, fd)
	}
	w, err := openRotating(path, logMaxSize, logMaxFiles)
	if err != nil {
		closeFDs(fds)
		return err
	}
	go follow(w, pollable(fds[0], "stdout"), pollable(fds[1], "stderr"))
	return nil
}
