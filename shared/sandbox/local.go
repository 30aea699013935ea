package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RootDir is where the root is inside the sandbox: the command's working directory.
const RootDir = "/workspace"

// BwrapHelp says how to install bubblewrap.
const BwrapHelp = "install bubblewrap: `sudo apt-get install bubblewrap` (Debian, Ubuntu), " +
	"`sudo dnf install bubblewrap` (Fedora); it runs on Linux only"

// nobody is the user and group the command runs as, inside the sandbox and, when the harness
// is root, outside it too.
const nobody = 65534

// Local runs commands with bubblewrap (bwrap) on this machine: in new user, mount, PID,
// network, IPC and UTS namespaces, as nobody, with the system's /usr read-only, a fresh /tmp,
// the root bound read-write at RootDir, and no other file of the machine's.
type Local struct {
	// Bwrap is bwrap's path; "" looks it up on PATH.
	Bwrap string
	// TempDir holds each run's directory; "" is os.TempDir. When the harness is root, the
	// command's user (nobody) must be able to reach it.
	TempDir string
}

var _ Runner = (*Local)(nil)

// Run runs req, refusing it first when req.Check does.
func (l *Local) Run(ctx context.Context, req Request) (Result, error) {
	if err := req.Check(); err != nil {
		return Result{}, err
	}
	bwrap := l.Bwrap
	if bwrap == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return Result{}, errors.New("sandbox: bwrap is not installed: " + BwrapHelp)
		}
		bwrap = p
	}
	lim := req.Limits.WithDefaults()
	closeInherited()

	dir, err := os.MkdirTemp(l.TempDir, "sandbox-")
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	defer removeAll(dir)
	root := filepath.Join(dir, "root")
	if err := writeUsers(dir); err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	if err := writeRoot(root, req.Files); err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	// As root, the user namespace would map the command's user to root outside, the owner of
	// every system file (readable then, whatever its mode, through any directory bound in).
	// bwrap is started as nobody instead, who owns the run's directory and nothing else.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		if err := chownAll(dir); err != nil {
			return Result{}, fmt.Errorf("sandbox: %w", err)
		}
		cred = &syscall.Credential{Uid: nobody, Gid: nobody}
	}

	wall := time.Duration(lim.WallSeconds) * time.Second
	runCtx, cancel := context.WithTimeout(ctx, wall)
	defer cancel()
	status, statusW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	defer status.Close()
	stdout, stderr := &capped{max: lim.OutputBytes}, &capped{max: lim.OutputBytes}
	cmd := exec.CommandContext(runCtx, bwrap, bwrapArgs(dir, root, req.Command, lim, len(req.Env) > 0)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Not even bwrap gets the harness's environment: --clearenv clears the command's, and bwrap
	// stays in the sandbox as its PID 1, whose environ the command can read.
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{statusW} // fd 3, --json-status-fd
	if len(req.Env) > 0 {
		// The variables reach bwrap through a pipe (fd 4, --args), not its command line, which
		// every user of the machine can read.
		envR, err := setenvArgs(req.Env)
		if err != nil {
			return Result{}, fmt.Errorf("sandbox: %w", err)
		}
		defer envR.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, envR)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	// Killing bwrap kills the sandbox's PID namespace, every process of the command with it;
	// the group is killed too in case bwrap is between fork and namespace.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	err = cmd.Start()
	statusW.Close()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: start bwrap: %w", err)
	}
	st := make(chan bool, 1)
	go func() { st <- started(status) }()
	waitErr := cmd.Wait()
	ran := <-st
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
		return Result{}, fmt.Errorf("sandbox: bwrap: %w", waitErr)
	case !ran:
		// bwrap failed before the command ran; what it said is on stderr.
		return Result{}, fmt.Errorf("sandbox: bwrap could not set up the sandbox: %s (it needs user namespaces open to unprivileged users, and %s reachable by uid %d)",
			bytes.TrimSpace(stderr.buf.Bytes()), filepath.Dir(dir), nobody)
	default:
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if res.ExitCode == 128+int(syscall.SIGXCPU) && !res.TimedOut {
		res.TimedOut, res.Killed = true, fmt.Sprintf("cpu time limit (%d s)", lim.CPUSeconds)
	}
	if err := collect(&res, root, req.Files, lim); err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	return res, nil
}

// setenvArgs is a pipe holding bwrap's --setenv arguments for env, NUL-separated as --args reads
// them, written as bwrap reads.
func setenvArgs(env map[string]string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, kv := range environ(env) {
		name, value, _ := strings.Cut(kv, "=")
		b.WriteString("--setenv\x00" + name + "\x00" + value + "\x00")
	}
	go func() {
		w.Write(b.Bytes())
		w.Close()
	}()
	return r, nil
}

// closeInherited marks every descriptor of the process above stderr close-on-exec. Go opens its
// own so, but not those the process inherited or that C code opened: exec passes those on, and
// bwrap would hand them to the command.
func closeInherited() {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range fds {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// bwrapArgs are bwrap's arguments for a run of command in dir, whose root is root; env: fd 4
// holds more (setenvArgs), read after --clearenv, which bwrap applies where it comes.
func bwrapArgs(dir, root, command string, lim Limits, env bool) []string {
	args := []string{
		// --unshare-all only tries for a user namespace; --uid needs one.
		"--unshare-all", "--unshare-user",
		"--uid", strconv.Itoa(nobody), "--gid", strconv.Itoa(nobody),
		"--hostname", "sandbox",
		"--die-with-parent",
		// No controlling terminal to push input into (TIOCSTI).
		"--new-session",
		"--clearenv",
		"--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
		"--setenv", "HOME", "/tmp",
		"--setenv", "LANG", "C.UTF-8",
		"--ro-bind", "/usr", "/usr",
	}
	if env {
		args = append(args, "--args", "4")
	}
	// /bin, /lib... are links into /usr on a merged-/usr system, directories elsewhere.
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	// Only what programs need of /etc: the rest (credentials, the machine's configuration) stays
	// out.
	for _, f := range []string{"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"} {
		args = append(args, "--ro-bind-try", f, f)
	}
	args = append(args,
		"--ro-bind", filepath.Join(dir, "passwd"), "/etc/passwd",
		"--ro-bind", filepath.Join(dir, "group"), "/etc/group",
		"--proc", "/proc",
		"--dev", "/dev",
		"--tmpfs", "/tmp",
		"--bind", root, RootDir,
		// The sandbox's own / (a tmpfs holding the mount points) is read-only too.
		"--remount-ro", "/",
		"--chdir", RootDir,
		"--json-status-fd", "3",
		"--",
	)
	return append(args, shellArgs(command, lim)...)
}

// writeUsers writes dir's passwd and group files, naming nobody, which bwrap binds in /etc.
func writeUsers(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "passwd"), []byte("nobody:x:65534:65534:nobody:/tmp:/usr/sbin/nologin\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "group"), []byte("nogroup:x:65534:\n"), 0o644)
}

func chownAll(dir string) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	})
}

// started reports whether bwrap's --json-status-fd said the command started: bwrap reports
// its PID once the sandbox is set up, and nothing when setting it up failed.
func started(r io.Reader) bool {
	var first struct {
		ChildPID *int `json:"child-pid"`
	}
	ok := json.NewDecoder(r).Decode(&first) == nil && first.ChildPID != nil
	io.Copy(io.Discard, r)
	return ok
}
