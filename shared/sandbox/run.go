package sandbox

// The parts of a run every backend shares: the root's files, the shell that sets the limits
// before the command, the capped output, and the walk that finds what the command changed.

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"syscall"
)

// maxEntries bounds the walk of the root after a run, so a command that makes millions of
// empty files costs a bounded walk.
const maxEntries = 10 * MaxMaxFiles

// shellArgs runs command with /bin/sh under lim. The limits are set by the shell before it runs
// the command, hard and soft alike, so the command cannot raise them; the CPU limit's hard one
// is a second later, so SIGXCPU (which Run reports) comes before SIGKILL. -f (512-byte blocks)
// keeps any one file under MaxBytes; -c 0: no core files in the root.
func shellArgs(command string, lim Limits) []string {
	const prelude = `ulimit -c 0 && ulimit -S -t "$2" && ulimit -H -t "$1" && ulimit -v "$3" && ulimit -f "$4" && shift 4 && exec /bin/sh -c "$1"`
	return []string{"/bin/sh", "-c", prelude, "sh",
		strconv.Itoa(lim.CPUSeconds + 1), strconv.Itoa(lim.CPUSeconds),
		strconv.FormatInt(lim.MemoryBytes>>10, 10), strconv.FormatInt((lim.MaxBytes+511)/512, 10),
		command}
}

// writeRoot makes root holding files.
func writeRoot(root string, files []File) error {
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
