package containerlog

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// The shim's side of the logging binary, as the runc v2 shim implements
// it (pkg/process/io.go, NewBinaryIO and NewBinaryCmd):
//   - fd 3 is the container's stdout, fd 4 its stderr (read ends of
//     pipes); with a TTY only fd 3 carries output;
//   - fd 5 is a pipe the shim waits on: closing it says "ready", and the
//     shim starts the container only after that;
//   - the environment holds only CONTAINER_ID and CONTAINER_NAMESPACE;
//   - argv is built from the URI's query, each key followed by its value,
//     in Go map order: the pairs arrive in any order;
//   - at task delete the shim closes its ends of the pipes, sends the
//     logging binary SIGTERM and waits for it. It never waits for it
//     before, so the process must live until then: one that exited early
//     would be reaped by the shim, whose SIGTERM would later go to
//     whatever process had taken its pid meanwhile.
//
// So the writer hands the pipes to the daemon and then parks: it execs
// sleep(1), a process of a few hundred KiB that holds fds 3 and 4 (the
// daemon recovers them from it if the daemon itself restarts) and dies on
// the shim's SIGTERM. With no daemon answering, the writer copies the
// output itself, as a whole process per container.

// LauncherEnv names the variable through which kelp's launcher tells the
// full kelp it runs where the launcher itself is: the logging binary the
// runtime hands to containerd. Here because both link this package.
const LauncherEnv = "KELP_LAUNCHER"

const (
	cmdWriter = "container-logger"
	cmdDaemon = "log-daemon"

	// parkedName is argv[0] of a parked writer; parkedPathEnv and
	// parkedSocketEnv, in its environment, name its log file and the
	// daemon it handed its pipes to.
	parkedName      = "kelp-log-parked"
	parkedPathEnv   = "KELP_LOG_PATH"
	parkedSocketEnv = "KELP_LOG_SOCKET"
	// parkSeconds is "forever" in a form GNU and busybox sleep both take.
	parkSeconds = "2147483647"
)

// sleepPaths are where sleep(1) lives on the hosts kelp supports.
var sleepPaths = []string{"/usr/bin/sleep", "/bin/sleep"}

// WriterArgs are the arguments the shim passes to the logging binary for
// one container: key/value pairs (see above).
func WriterArgs(logPath, socket string) []string {
	return []string{"internal", cmdWriter, "--path", logPath, "--socket", socket}
}

// WriterQuery turns WriterArgs into the URI query cio.BinaryIO wants.
func WriterQuery(logPath, socket string) map[string]string {
	a := WriterArgs(logPath, socket)
	q := map[string]string{}
	for i := 0; i+1 < len(a); i += 2 {
		q[a[i]] = a[i+1]
	}
	return q
}

// DaemonArgs are the arguments that run the node's log daemon.
func DaemonArgs(socket string) []string {
	return []string{"internal", cmdDaemon, "--socket", socket}
}

// IsInvocation reports whether args (os.Args[1:]) run the writer or the
// daemon, whatever order the pairs came in. Callers check it before
// normal flag parsing, since "--path X" may come before "internal ...".
func IsInvocation(args []string) bool {
	v, ok := pairValue(args, "internal")
	return ok && (v == cmdWriter || v == cmdDaemon)
}

func pairValue(args []string, key string) (string, bool) {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == key {
			return args[i+1], true
		}
	}
	// Also accept a key anywhere (a manual invocation).
	for i := 0; i+1 < len(args); i++ {
		if args[i] == key {
			return args[i+1], true
		}
	}
	return "", false
}

// Main runs the writer or the daemon, as args say.
func Main(args []string) error {
	if v, _ := pairValue(args, "internal"); v == cmdDaemon {
		socket, ok := pairValue(args, "--socket")
		if !ok || !filepath.IsAbs(socket) {
			return fmt.Errorf("%s: --socket <absolute path> is required (got %q)", cmdDaemon, args)
		}
		return RunDaemon(socket)
	}
	path, ok := pairValue(args, "--path")
	if !ok || !filepath.IsAbs(path) {
		return fmt.Errorf("%s: --path <absolute path> is required (got %q)", cmdWriter, args)
	}
	socket, _ := pairValue(args, "--socket")
	return writerMain(path, socket)
}

func writerMain(path, socket string) error {
	if socket != "" {
		err := handoff(socket, path, 3, 4)
		if err == nil {
			closeReady()
			park(path, socket)
		}
		fmt.Fprintf(os.Stderr, "kelp container-logger: no log daemon (%v); writing %s from this process\n", err, path)
	}
	// SIGTERM from the shim: keep draining (the pipes end soon after);
	// dying early would lose the container's last lines.
	signal.Ignore(syscall.SIGTERM, syscall.SIGPIPE, syscall.SIGHUP)
	w, err := openRotating(path, logMaxSize, logMaxFiles)
	if err != nil {
		return err
	}
	stdout, stderr := os.NewFile(3, "stdout"), os.NewFile(4, "stderr")
	closeReady()
	follow(w, stdout, stderr)
	return nil
}

func closeReady() {
	if ready := os.NewFile(5, "ready"); ready != nil {
		ready.Close()
	}
}

// park replaces this process with sleep(1), keeping fds 3 and 4 open, and
// only returns if no sleep could be run; the process then waits for the
// shim's SIGTERM itself.
func park(path, socket string) {
	for _, fd := range []int{3, 4} {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0)
	}
	// The shim may die without deleting the task (killed): then the
	// parked process goes with it instead of sleeping forever.
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
	env := append(os.Environ(), parkedPathEnv+"="+path, parkedSocketEnv+"="+socket)
	var errs []error
	for _, sleep := range sleepPaths {
		errs = append(errs, unix.Exec(sleep, []string{parkedName, parkSeconds}, env))
	}
	fmt.Fprintf(os.Stderr, "kelp container-logger: cannot park in sleep(1) (%v); waiting in this process\n", errors.Join(errs...))
	signal.Reset(syscall.SIGTERM)
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	<-c
	os.Exit(0)
}
