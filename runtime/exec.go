package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
)

// ioDrainTimeout bounds how long Exec waits for output still in flight
// after the process exited (a background child may hold the pipes open).
const ioDrainTimeout = 2 * time.Second

// Exec runs cmd in the running container id with the container's env,
// user and working directory, streaming to the given (possibly nil)
// streams, and returns its exit code. Cancelling ctx kills the process.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) (int, error) {
	ctx = r.ctx(ctx)
	if len(cmd) == 0 {
		return -1, errors.New("exec: empty command")
	}
	c, err := r.load(ctx, id)
	if err != nil {
		return -1, err
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, err)
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return -1, err
	}
	pspec := *spec.Process
	pspec.Args = cmd
	pspec.Terminal = tty

	var stdinEOF chan struct{}
	if stdin != nil {
		n := &eofNotifier{r: stdin, done: make(chan struct{})}
		stdin, stdinEOF = n, n.done
	}
	execID := "exec-" + randomHex(8)
	p, err := task.Exec(ctx, execID, &pspec, r.execIO(stdin, stdout, stderr, tty))
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, err)
	}
	// Delete with a fresh context: ctx may be cancelled by now.
	defer func() { _, _ = p.Delete(r.ctx(context.Background()), containerd.WithProcessKill) }()
	return r.runProcess(ctx, p, stdinEOF)
}

// runProcess starts p, closes its stdin when the caller's reader ends,
// and waits for the exit and for the output to drain.
func (r *Runtime) runProcess(ctx context.Context, p containerd.Process, stdinEOF <-chan struct{}) (int, error) {
	exited, err := p.Wait(r.ctx(context.Background()))
	if err != nil {
		return -1, err
	}
	if err := p.Start(ctx); err != nil {
		return -1, err
	}
	finished := make(chan struct{})
	defer close(finished)
	if stdinEOF != nil {
		// cio copies stdin into the FIFO; this tells the shim to close
		// the process's end once our copy is done (EOF for the process).
		go func() {
			select {
			case <-stdinEOF:
				_ = p.CloseIO(r.ctx(context.Background()), containerd.WithStdinCloser)
			case <-finished:
			}
		}()
	}
	var st containerd.ExitStatus
	select {
	case st = <-exited:
	case <-ctx.Done():
		_ = p.Kill(r.ctx(context.Background()), syscall.SIGKILL)
		<-exited
		return -1, ctx.Err()
	}
	drained := make(chan struct{})
	go func() { p.IO().Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(ioDrainTimeout):
	}
	code, _, err := st.Result()
	return int(code), err
}

// execIO wires the caller's streams through FIFOs in this node's FIFO dir
// (never the shared /run/containerd/fifo).
func (r *Runtime) execIO(stdin io.Reader, stdout, stderr io.Writer, tty bool) cio.Creator {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	opts := []cio.Opt{cio.WithFIFODir(filepath.Join(r.opts.StateDir, "fifo"))}
	opts = append(opts, cio.WithStreams(stdin, stdout, stderr))
	if tty {
		opts = append(opts, cio.WithTerminal)
	}
	return cio.NewCreator(opts...)
}

// eofNotifier closes done once its reader returns an error (EOF included).
type eofNotifier struct {
	r    io.Reader
	done chan struct{}
	shut bool
}

func (e *eofNotifier) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if err != nil && !e.shut {
		e.shut = true
		close(e.done)
	}
	return n, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
