package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Direct runs commands as child processes of this one, in a fresh directory and a session of
// their own, with the limits, an environment of four variables and a seccomp filter that keeps
// them off the network (seccomp_linux.go), and no isolation else: it is for a machine that is
// itself the sandbox, the sandbox function's Lambda execution environment (a microVM with no
// network path out and a role that grants nothing). After each run every process of the run's
// session is killed, and the directory removed.
type Direct struct {
	// TempDir holds each run's directory; "" is os.TempDir.
	TempDir string
	// Sweep also kills, after each run, every process of the machine but this one and its
	// ancestors, and empties TempDir. Lambda reuses an execution environment from one run to
	// the next: a command's daemon that left its session (setsid) would see the next run's files
	// and output, and a file it left in /tmp, outside its directory, would be read by the next
	// command. Set it only where nothing else runs (on Lambda), never in a process that shares
	// its machine.
	Sweep bool
}

var _ Runner = (*Direct)(nil)

// Run runs req, refusing it first when req.Check does.
func (d *Direct) Run(ctx context.Context, req Request) (Result, error) {
	if err := req.Check(); err != nil {
		return Result{}, err
	}
	lim := req.Limits.WithDefaults()
	if d.Sweep {
		// Last, once the walk of the root is done.
		defer empty(cmp.Or(d.TempDir, os.TempDir()))
	}
	dir, err := os.MkdirTemp(d.TempDir, "sandbox-")
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	defer removeAll(dir)
	root, tmp := filepath.Join(dir, "root"), filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	if err := writeRoot(root, req.Files); err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}

	runCtx, cancel := context.WithTimeout(ctx, time.Duration(lim.WallSeconds)*time.Second)
	defer cancel()
	args := shellArgs(req.Command, lim)
	cmd := exec.CommandContext(runCtx, args[0], args[1:]...)
	cmd.Dir = root
	// Never this process's environment: on Lambda it holds the role's credentials.
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + tmp, "TMPDIR=" + tmp, "LANG=C.UTF-8"}, environ(req.Env)...)
	// Pipes of our own rather than exec's: exec's Wait waits for every holder of the pipes to
	// exit, and a command's background process holds them until the session is killed.
	stdout, stderr := &capped{max: lim.OutputBytes}, &capped{max: lim.OutputBytes}
	var copies sync.WaitGroup
	var readers []*os.File
	for _, out := range []struct {
		set *io.Writer
		to  *capped
	}{{&cmd.Stdout, stdout}, {&cmd.Stderr, stderr}} {
		r, w, err := os.Pipe()
		if err != nil {
			return Result{}, fmt.Errorf("sandbox: %w", err)
		}
		defer w.Close()
		readers = append(readers, r)
		*out.set = w
		copies.Go(func() { io.Copy(out.to, r) })
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { killSession(cmd.Process.Pid); return nil }

	start := time.Now()
	err = startFiltered(cmd)
	for _, out := range []io.Writer{cmd.Stdout, cmd.Stderr} {
		out.(*os.File).Close()
	}
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: start /bin/sh: %w", err)
	}
	waitErr := cmd.Wait()
	killSession(cmd.Process.Pid)
	if d.Sweep {
		sweep()
	}
	// The pipes close once their last holders are dead; one that left the session and was not
	// swept keeps them open, and its output is not waited for.
	done := make(chan struct{})
	go func() { copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		for _, r := range readers {
			r.Close()
		}
		<-done
	}
	for _, r := range readers {
		r.Close()
	}
	res := Result{
		Stdout: stdout.String(), Stderr: stderr.String(),
		StdoutTruncated: stdout.truncated, StderrTruncated: stderr.truncated,
		DurationMs: time.Since(start).Milliseconds(),
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	var exit *exec.ExitError
	switch {
	case runCtx.Err() != nil:
		res.ExitCode = 128 + int(syscall.SIGKILL)
		res.TimedOut, res.Killed = true, fmt.Sprintf("wall time limit (%d s)", lim.WallSeconds)
	case waitErr != nil && !errors.As(waitErr, &exit):
		return Result{}, fmt.Errorf("sandbox: /bin/sh: %w", waitErr)
	default:
		res.ExitCode = exitCode(cmd.ProcessState)
	}
	if res.ExitCode == 128+int(syscall.SIGXCPU) && !res.TimedOut {
		res.TimedOut, res.Killed = true, fmt.Sprintf("cpu time limit (%d s)", lim.CPUSeconds)
	}
	if err := collect(&res, root, req.Files, lim); err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	return res, nil
}

// exitCode is the shell's exit status, or 128 plus the signal that killed it, as a shell says.
func exitCode(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// killSession kills every process of session sid, again until none is left: a process may fork
// between a scan and its kill.
func killSession(sid int) {
	for range 100 {
		killed := false
		for _, p := range processes() {
			if p.sid == sid && p.pid != os.Getpid() {
				syscall.Kill(p.pid, syscall.SIGKILL)
				killed = true
			}
		}
		if !killed {
			return
		}
	}
}

// sweep kills every process but this one and its ancestors, again until none is left (those it
// may not signal aside).
func sweep() {
	keep := map[int]bool{}
	for pid := os.Getpid(); pid > 0 && !keep[pid]; {
		keep[pid] = true
		pid = parent(pid)
	}
	for range 100 {
		killed := false
		for _, p := range processes() {
			if !keep[p.pid] && syscall.Kill(p.pid, syscall.SIGKILL) == nil {
				killed = true
			}
		}
		if !killed {
			return
		}
	}
}

// empty removes everything in dir.
func empty(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		removeAll(filepath.Join(dir, e.Name()))
	}
}

type process struct{ pid, ppid, sid int }

// processes lists the live processes of /proc, zombies (already dead) left out.
func processes() []process {
	entries, _ := os.ReadDir("/proc")
	var out []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := stat(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

func parent(pid int) int {
	p, _ := stat(pid)
	return p.ppid
}

// stat reads a process's parent and session from /proc/<pid>/stat: "pid (comm) state ppid pgrp
// session ...", where comm may hold spaces and parentheses, so the fields start after its last ')'.
func stat(pid int) (process, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return process{}, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 4 || f[0] == "Z" || f[0] == "X" {
		return process{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	sid, _ := strconv.Atoi(f[3])
	return process{pid: pid, ppid: ppid, sid: sid}, true
}
