package lambdaruntime

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stderrTail is how much of a runtime's standard error an ExitError keeps.
const stderrTail = 4 << 10

// Process is a runtime process Server.Start started.
type Process struct {
	Cmd *exec.Cmd
	// Started is when it was started, taken just before the exec: a cold start's zero.
	Started time.Time

	stderr   *tail
	done     chan struct{} // closed once Wait returned; err then holds what it returned
	err      error
	stopping atomic.Bool
}

// ExitError is the failure of invocations whose runtime process exited on its own.
type ExitError struct {
	// Err is what exec.Cmd.Wait returned: nil for exit status 0.
	Err error
	// Stderr is the end of the process's standard error.
	Stderr string
}

func (e *ExitError) Error() string {
	status := "exit status 0"
	if e.Err != nil {
		status = e.Err.Error()
	}
	msg := "lambdaruntime: the runtime process exited (" + status + ")"
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += "; its stderr ends with:\n" + s
	}
	return msg
}

func (e *ExitError) Unwrap() error { return e.Err }

// Start starts cmd as the server's runtime. AWS_LAMBDA_RUNTIME_API is added to its environment
// (to os.Environ when cmd.Env is nil); its standard error still goes where cmd.Stderr says, and
// its end is kept for the ExitError that fails every unanswered and later invocation when the
// process exits on its own. A server runs one process.
func (s *Server) Start(cmd *exec.Cmd) (*Process, error) {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	if s.proc != nil {
		return nil, errors.New("lambdaruntime: the server already runs a process")
	}
	select {
	case <-s.failed:
		return nil, s.failErr
	default:
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "AWS_LAMBDA_RUNTIME_API="+s.Addr())
	p := &Process{Cmd: cmd, stderr: &tail{}, done: make(chan struct{})}
	if cmd.Stderr != nil {
		cmd.Stderr = io.MultiWriter(cmd.Stderr, p.stderr)
	} else {
		cmd.Stderr = p.stderr
	}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lambdaruntime: starting %s: %w", cmd.Path, err)
	}
	s.proc = p
	go func() {
		p.err = cmd.Wait()
		close(p.done)
		if p.stopping.Load() {
			s.fail(errors.New("lambdaruntime: the runtime process was stopped"))
			return
		}
		s.fail(&ExitError{Err: p.err, Stderr: p.stderr.String()})
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop kills the process, if it still runs, and waits for it to exit.
func (p *Process) Stop() {
	p.stopping.Store(true)
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// tail keeps the last stderrTail bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
