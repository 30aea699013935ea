package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
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

// maxEntries bounds the walk of the root after a run, so a command that makes millions of
// empty files costs a bounded walk.
const maxEntries = 10 * MaxMaxFiles

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
	if err := writeFiles(dir, root, req.Files); err != nil {
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
	cmd := exec.CommandContext(runCtx, bwrap, bwrapArgs(dir, root, req.Command, lim)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Not even bwrap gets the harness's environment: --clearenv clears the command's, and bwrap
	// stays in the sandbox as its PID 1, whose environ the command can read.
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{statusW} // fd 3, --json-status-fd
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

// bwrapArgs are bwrap's arguments for a run of command in dir, whose root is root.
func bwrapArgs(dir, root, command string, lim Limits) []string {
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
	// The limits are set by the shell before it runs the command, hard and soft alike, so the
	// command cannot raise them; the CPU limit's hard one is a second later, so SIGXCPU (which
	// Run reports) comes before SIGKILL. -f (512-byte blocks) keeps any one file under MaxBytes;
	// -c 0: no core files in the root.
	const prelude = `ulimit -c 0 && ulimit -S -t "$2" && ulimit -H -t "$1" && ulimit -v "$3" && ulimit -f "$4" && shift 4 && exec /bin/sh -c "$1"`
	return append(args, "/bin/sh", "-c", prelude, "sh",
		strconv.Itoa(lim.CPUSeconds+1), strconv.Itoa(lim.CPUSeconds),
		strconv.FormatInt(lim.MemoryBytes>>10, 10), strconv.FormatInt((lim.MaxBytes+511)/512, 10),
		command)
}

// writeFiles makes dir's root holding files, and the passwd and group files naming nobody.
func writeFiles(dir, root string, files []File) error {
	if err := os.WriteFile(filepath.Join(dir, "passwd"), []byte("nobody:x:65534:65534:nobody:/tmp:/usr/sbin/nologin\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "group"), []byte("nogroup:x:65534:\n"), 0o644); err != nil {
		return err
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := fileMode(f)
		if err := os.WriteFile(p, f.Content, mode); err != nil {
			return err
		}
		// WriteFile's mode passes through the umask.
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	return nil
}

func fileMode(f File) fs.FileMode {
	if f.Mode == 0 {
		return 0o644
	}
	return fs.FileMode(f.Mode & 0o777)
}

func chownAll(dir string) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	})
}

// removeAll removes a run's directory, first giving back the permissions the command may have
// taken from its directories.
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
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

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	max       int
	buf       bytes.Buffer
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.max - c.buf.Len(); len(p) > room {
		p, c.truncated = p[:room], true
	}
	c.buf.Write(p)
	return n, nil
}

func (c *capped) String() string { return c.buf.String() }

// collect walks root after a run and fills res's Changed, Deleted and Skipped: regular files
// whose content or mode differ from inputs' (or that are new), within lim's MaxFiles and
// MaxBytes. Symlinks are never followed, nor handed back. The command has ended, so nothing
// changes under the walk.
func collect(res *Result, root string, inputs []File, lim Limits) error {
	w := &walker{res: res, lim: lim, inputs: make(map[string]input, len(inputs)), seen: make(map[string]bool)}
	for _, f := range inputs {
		w.inputs[f.Path] = input{sha256.Sum256(f.Content), int64(len(f.Content)), fileMode(f)}
	}
	if err := w.dir(root, ""); err != nil {
		return err
	}
	if w.stopped {
		// The inputs the walk did not reach may be there or not.
		return nil
	}
	for _, f := range inputs {
		if !w.seen[f.Path] {
			res.Deleted = append(res.Deleted, f.Path)
		}
	}
	return nil
}

type input struct {
	sum  [sha256.Size]byte
	size int64
	mode fs.FileMode
}

type walker struct {
	res     *Result
	lim     Limits
	inputs  map[string]input
	seen    map[string]bool // inputs found as regular files
	entries int
	bytes   int64
	stopped bool
}

func (w *walker) skip(p, reason string) {
	if len(w.res.Skipped) < MaxSkipped {
		w.res.Skipped = append(w.res.Skipped, Skipped{Path: p, Reason: reason})
	}
}

func (w *walker) dir(abs, rel string) error {
	// The command may have taken its own permissions away; its user is the harness's (or
	// nobody, when the harness is root and reads everything).
	if err := os.Chmod(abs, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if w.entries++; w.entries > maxEntries {
			w.stopped, w.res.ChangedTruncated = true, true
			w.skip(rel, fmt.Sprintf("the root holds more than %d entries; the rest were not looked at", maxEntries))
			return nil
		}
		p := path.Join(rel, e.Name())
		a := filepath.Join(abs, e.Name())
		fi, err := os.Lstat(a)
		if err != nil {
			return err
		}
		if err := CheckPath(p); err != nil {
			w.skip(p, "a path the sandbox does not hand back: "+err.Error())
			continue
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			w.skip(p, "a symbolic link: links are not handed back, nor followed")
		case fi.IsDir():
			if err := w.dir(a, p); err != nil || w.stopped {
				return err
			}
		case fi.Mode().IsRegular():
			if err := w.file(a, p, fi); err != nil {
				return err
			}
		default:
			w.skip(p, "not a regular file ("+fi.Mode().Type().String()+")")
		}
	}
	return nil
}

func (w *walker) file(abs, rel string, fi fs.FileInfo) error {
	mode := fi.Mode().Perm()
	if mode&0o400 == 0 {
		if err := os.Chmod(abs, mode|0o400); err != nil {
			return err
		}
	}
	// O_NOFOLLOW: a symlink is never read through, whatever the walk saw.
	fd, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer fd.Close()
	if in, ok := w.inputs[rel]; ok {
		w.seen[rel] = true
		if in.mode == mode && in.size == fi.Size() {
			h := sha256.New()
			if _, err := io.Copy(h, io.LimitReader(fd, in.size)); err != nil {
				return err
			}
			if [sha256.Size]byte(h.Sum(nil)) == in.sum {
				return nil
			}
			if _, err := fd.Seek(0, io.SeekStart); err != nil {
				return err
			}
		}
	}
	switch {
	case len(w.res.Changed) >= w.lim.MaxFiles:
		w.res.ChangedTruncated = true
		w.skip(rel, fmt.Sprintf("past limits.maxFiles (%d)", w.lim.MaxFiles))
	case fi.Size() > w.lim.MaxBytes-w.bytes:
		w.res.ChangedTruncated = true
		w.skip(rel, fmt.Sprintf("past limits.maxBytes (%d) of files handed back", w.lim.MaxBytes))
	default:
		content, err := io.ReadAll(io.LimitReader(fd, fi.Size()))
		if err != nil {
			return err
		}
		w.bytes += int64(len(content))
		w.res.Changed = append(w.res.Changed, File{Path: rel, Content: content, Mode: uint32(mode)})
	}
	return nil
}
