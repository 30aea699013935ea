package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Program is a system Program some tests need, which stack finds, or installs with apt-get, and
// names to the command in a variable.
type Program struct {
	Name string // in messages
	// envVar names the program's path to the tests; set by the user, it names the one to use.
	EnvVar string
	// names are looked up on PATH, in order; fallback is where Debian's package puts the
	// binary, for when its directory is not on PATH.
	names    []string
	fallback string
	Pkg      string // Debian's package
	// need says what needs the program; help, how to install it by hand.
	need, help string
}

var Chromium = Program{
	Name:     "Chromium",
	EnvVar:   "HARNESS_CHROMIUM",
	names:    []string{"chromium", "chromium-browser"},
	fallback: "/usr/bin/chromium",
	Pkg:      "chromium",
	need:     "the browser tests drive Chromium",
	help: "install Chromium and run again: `sudo apt-get install chromium` (Debian, Ubuntu), " +
		"`sudo dnf install chromium` (Fedora); on macOS set HARNESS_CHROMIUM" +
		" to Chrome's binary (\"/Applications/Google Chrome.app/Contents/MacOS/Google Chrome\")",
}

var Bubblewrap = Program{
	Name:     "bubblewrap",
	EnvVar:   "HARNESS_BWRAP",
	names:    []string{"bwrap"},
	fallback: "/usr/bin/bwrap",
	Pkg:      "bubblewrap",
	need:     "the sandbox tests run commands in bubblewrap (bwrap)",
	help: "install bubblewrap and run again: `sudo apt-get install bubblewrap` (Debian, Ubuntu), " +
		"`sudo dnf install bubblewrap` (Fedora); it runs on Linux only, so elsewhere run the tests in a Linux VM or container",
}

// finder finds a Program, installing it with apt-get when it is missing and it can. Its fields
// other than prog are the system calls it makes, so that tests can stand in for the system.
type finder struct {
	prog     Program
	getenv   func(string) string
	lookPath func(string) (string, error)
	exists   func(string) bool
	// canInstall reports whether run may install packages: root, with apt-get on PATH.
	canInstall bool
	// run runs a command with its output going to the stack's log.
	run func(ctx context.Context, env []string, name string, args ...string) error
}

// Ensure returns prog's path on this machine, installing it with apt-get (its output going to
// log) when it is missing and the process can: root, with apt-get on PATH. installing is called
// before an install starts, which may take a minute or more.
func Ensure(ctx context.Context, prog Program, log io.Writer, installing func()) (string, error) {
	return systemFinder(prog, log).ensure(ctx, installing)
}

// systemFinder is a finder of prog on this machine, writing apt-get's output to log.
func systemFinder(prog Program, log io.Writer) *finder {
	_, aptErr := exec.LookPath("apt-get")
	return &finder{
		prog:     prog,
		getenv:   os.Getenv,
		lookPath: exec.LookPath,
		exists: func(path string) bool {
			fi, err := os.Stat(path)
			return err == nil && !fi.IsDir()
		},
		canInstall: os.Geteuid() == 0 && aptErr == nil,
		run: func(ctx context.Context, env []string, name string, args ...string) error {
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.Stdout, cmd.Stderr = log, log
			return cmd.Run()
		},
	}
}

// find returns the program's path: its variable's when set (a path, or a name on PATH), else
// the first of its names on PATH, else its fallback; "" when there is none. A variable that
// names no executable is an error: the user asked for that binary.
func (f *finder) find() (string, error) {
	if v := f.getenv(f.prog.EnvVar); v != "" {
		p, err := f.lookPath(v)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", f.prog.EnvVar, v, err)
		}
		// The tests run in their package's directory, not in this one.
		return filepath.Abs(p)
	}
	for _, name := range f.prog.names {
		if p, err := f.lookPath(name); err == nil {
			return p, nil
		}
	}
	if f.exists(f.prog.fallback) {
		return f.prog.fallback, nil
	}
	return "", nil
}

// ensure returns the program's path, installing it first when it is missing and f can.
// installing is called before an install starts, which may take a minute or more.
func (f *finder) ensure(ctx context.Context, installing func()) (string, error) {
	p, err := f.find()
	if err != nil || p != "" {
		return p, err
	}
	if !f.canInstall {
		return "", errors.New(f.prog.need + ", which is not installed: " + f.prog.help)
	}
	installing()
	if err := f.run(ctx, nil, "apt-get", "update"); err != nil {
		return "", fmt.Errorf("apt-get update: %w; %s", err, f.prog.help)
	}
	// Another install running beside this one (a second run of the suite) holds dpkg's lock for
	// a while: wait for it rather than fail.
	if err := f.run(ctx, []string{"DEBIAN_FRONTEND=noninteractive"}, "apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", f.prog.Pkg); err != nil {
		return "", fmt.Errorf("apt-get install %s: %w; %s", f.prog.Pkg, err, f.prog.help)
	}
	if p, err = f.find(); err != nil || p == "" {
		return "", fmt.Errorf("apt-get installed %s, and it is still not found: %s", f.prog.Pkg, f.prog.help)
	}
	return p, nil
}
