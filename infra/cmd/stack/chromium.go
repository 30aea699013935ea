package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// chromiumVar names the Chromium binary the browser tests drive; stack sets it for the command.
const chromiumVar = "HARNESS_CHROMIUM"

// chromiumFallback is where Debian's chromium package puts the binary.
const chromiumFallback = "/usr/bin/chromium"

// chromiumHelp says how to install Chromium by hand.
const chromiumHelp = "install Chromium and run again: `sudo apt-get install chromium` (Debian, Ubuntu), " +
	"`sudo dnf install chromium` (Fedora); on macOS set " + chromiumVar +
	" to Chrome's binary (\"/Applications/Google Chrome.app/Contents/MacOS/Google Chrome\")"

// chromiumFinder finds Chromium, installing it with apt-get when it is missing and it can.
// Its fields are the system calls it makes, so that tests can stand in for the system.
type chromiumFinder struct {
	getenv   func(string) string
	lookPath func(string) (string, error)
	exists   func(string) bool
	// canInstall reports whether run may install packages: root, with apt-get on PATH.
	canInstall bool
	// run runs a command with its output going to the stack's log.
	run func(ctx context.Context, env []string, name string, args ...string) error
}

// systemChromium is a chromiumFinder on this machine, writing apt-get's output to log.
func systemChromium(log io.Writer) *chromiumFinder {
	_, aptErr := exec.LookPath("apt-get")
	return &chromiumFinder{
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

// find returns Chromium's path: HARNESS_CHROMIUM when set (a path, or a name on PATH), else
// chromium or chromium-browser on PATH, else /usr/bin/chromium; "" when there is none. A
// HARNESS_CHROMIUM that names no executable is an error: the user asked for that binary.
func (f *chromiumFinder) find() (string, error) {
	if v := f.getenv(chromiumVar); v != "" {
		p, err := f.lookPath(v)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", chromiumVar, v, err)
		}
		// The tests run in their package's directory, not in this one.
		return filepath.Abs(p)
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := f.lookPath(name); err == nil {
			return p, nil
		}
	}
	if f.exists(chromiumFallback) {
		return chromiumFallback, nil
	}
	return "", nil
}

// ensure returns Chromium's path, installing it first when it is missing and f can. installing
// is called before an install starts, which takes a minute or more.
func (f *chromiumFinder) ensure(ctx context.Context, installing func()) (string, error) {
	p, err := f.find()
	if err != nil || p != "" {
		return p, err
	}
	if !f.canInstall {
		return "", errors.New("the browser tests drive Chromium, which is not installed: " + chromiumHelp)
	}
	installing()
	if err := f.run(ctx, nil, "apt-get", "update"); err != nil {
		return "", fmt.Errorf("apt-get update: %w; %s", err, chromiumHelp)
	}
	// Another install running beside this one (a second run of the suite) holds dpkg's lock for
	// a while: wait for it rather than fail.
	if err := f.run(ctx, []string{"DEBIAN_FRONTEND=noninteractive"}, "apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "chromium"); err != nil {
		return "", fmt.Errorf("apt-get install chromium: %w; %s", err, chromiumHelp)
	}
	if p, err = f.find(); err != nil || p == "" {
		return "", fmt.Errorf("apt-get installed chromium, and it is still not found: %s", chromiumHelp)
	}
	return p, nil
}
