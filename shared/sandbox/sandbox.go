// Package sandbox runs model-authored shell commands away from the harness: in a fresh root
// holding a workspace's files, with no network, no harness environment and bounded time, memory
// and output, and hands back what the command printed and which files it created, changed or
// deleted.
//
// Request and Result are wire types: every backend takes and returns these shapes, the local
// one (Local, on bubblewrap) as the AWS one (Lambda, which sends them to the sandbox function,
// where Direct runs them), so their JSON is the contract. A zero limit
// means its default; Check refuses what no backend may run.
package sandbox

import (
	"context"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/agentharness/harness/shared/wire/relpath"
)

// Runner runs one command in a sandbox. A command that fails or is killed is a Result (its
// ExitCode, TimedOut); an error means the sandbox itself could not run it.
type Runner interface {
	Run(ctx context.Context, req Request) (Result, error)
}

// Request is one command and the files it starts with.
type Request struct {
	// Command is run by /bin/sh -c in the root, which is its working directory.
	Command string `json:"command"`
	// Files are put in the root before the run; none is an empty root.
	Files  []File `json:"files,omitempty"`
	Limits Limits `json:"limits,omitzero"`
	// Env is added to the command's environment: the thread variables the agent declared for
	// its sandbox (config.sandbox.variables), and nothing else of the harness's.
	Env map[string]string `json:"env,omitempty"`
	// Network is "none", the only mode there is; "" means "none".
	Network string `json:"network,omitempty"`
}

// File is a file of the root: its path under it (see CheckPath), its bytes and its permission
// bits (0 means 0644; only 0777 bits are kept).
type File struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Mode    uint32 `json:"mode,omitempty"`
}

// Limits bound one run. Each zero field is its default; see the Default and Max constants.
type Limits struct {
	// CPUSeconds is the CPU time of each process of the command.
	CPUSeconds int `json:"cpuSeconds,omitempty"`
	// MemoryBytes is the address space of each process of the command.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// WallSeconds is the whole run's time; past it every process of the command is killed.
	WallSeconds int `json:"wallSeconds,omitempty"`
	// OutputBytes is how much of stdout, and as much of stderr, is kept; the rest is dropped.
	OutputBytes int `json:"outputBytes,omitempty"`
	// MaxFiles and MaxBytes bound the files handed back (Result.Changed); MaxBytes is also the
	// largest file the command may write.
	MaxFiles int   `json:"maxFiles,omitempty"`
	MaxBytes int64 `json:"maxBytes,omitempty"`
}

// Defaults and bounds of Limits, and of a request's files.
const (
	DefaultCPUSeconds  = 30
	MaxCPUSeconds      = 900
	DefaultMemoryBytes = 512 << 20
	MinMemoryBytes     = 32 << 20 // less and the shell itself cannot start
	MaxMemoryBytes     = 4 << 30
	DefaultWallSeconds = 30
	MaxWallSeconds     = 900 // 15 minutes, a Lambda function's longest run
	DefaultOutputBytes = 64 << 10
	MaxOutputBytes     = 1 << 20
	DefaultMaxFiles    = 1000
	MaxMaxFiles        = 10000
	DefaultMaxBytes    = 8 << 20
	MaxMaxBytes        = 64 << 20

	// MaxCommandBytes bounds Request.Command.
	MaxCommandBytes = 64 << 10
	// MaxEnv bounds Request.Env's variables, and MaxEnvBytes their names and values together.
	MaxEnv      = 50
	MaxEnvBytes = 32 << 10
)

// EnvName is the grammar of a name of Request.Env: an environment variable's.
var EnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ReservedEnv are the variables every sandbox sets itself, which Request.Env may not.
var ReservedEnv = []string{"HOME", "LANG", "PATH", "TMPDIR"}

// EnvProblem says what is wrong with name as a variable of Request.Env; "" when nothing is.
func EnvProblem(name string) string {
	switch {
	case !EnvName.MatchString(name):
		return "is not an environment variable's name (a letter or _, then up to 63 letters, digits or _)"
	case slices.Contains(ReservedEnv, name):
		return "is set by the sandbox itself (" + strings.Join(ReservedEnv, ", ") + ")"
	}
	return ""
}

// WithDefaults returns l with each zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.CPUSeconds == 0 {
		l.CPUSeconds = DefaultCPUSeconds
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.WallSeconds == 0 {
		l.WallSeconds = DefaultWallSeconds
	}
	if l.OutputBytes == 0 {
		l.OutputBytes = DefaultOutputBytes
	}
	if l.MaxFiles == 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Check refuses a request no backend runs, naming the field: an empty or oversized command, a
// network other than "none", a limit below zero or above its bound, and files whose paths fail
// CheckPath, repeat, or put a file where another's directory goes ("a" and "a/b"), or that are
// more or bigger than the limits hand back.
func (r *Request) Check() error {
	if strings.TrimSpace(r.Command) == "" {
		return fmt.Errorf("command is empty")
	}
	if len(r.Command) > MaxCommandBytes {
		return fmt.Errorf("command is %d bytes, more than %d", len(r.Command), MaxCommandBytes)
	}
	if strings.IndexByte(r.Command, 0) >= 0 {
		return fmt.Errorf("command holds a NUL byte")
	}
	if r.Network != "" && r.Network != "none" {
		return fmt.Errorf("network %q: the only mode is \"none\"", r.Network)
	}
	if err := r.Limits.Check(); err != nil {
		return err
	}
	if len(r.Env) > MaxEnv {
		return fmt.Errorf("env: %d variables, more than %d", len(r.Env), MaxEnv)
	}
	envBytes := 0
	for name, value := range r.Env {
		if p := EnvProblem(name); p != "" {
			return fmt.Errorf("env: %q %s", name, p)
		}
		if strings.IndexByte(value, 0) >= 0 {
			return fmt.Errorf("env: %s holds a NUL byte", name)
		}
		envBytes += len(name) + len(value)
	}
	if envBytes > MaxEnvBytes {
		return fmt.Errorf("env: %d bytes of names and values, more than %d", envBytes, MaxEnvBytes)
	}
	lim := r.Limits.WithDefaults()
	if len(r.Files) > lim.MaxFiles {
		return fmt.Errorf("files: %d files, more than limits.maxFiles (%d)", len(r.Files), lim.MaxFiles)
	}
	var total int64
	seen := make(map[string]bool, len(r.Files))
	for i, f := range r.Files {
		if err := CheckPath(f.Path); err != nil {
			return fmt.Errorf("files[%d].path: %w", i, err)
		}
		if seen[f.Path] {
			return fmt.Errorf("files[%d].path: %q is there twice", i, f.Path)
		}
		seen[f.Path] = true
		if f.Mode&^0o777 != 0 {
			return fmt.Errorf("files[%d].mode: %#o has bits beyond 0777", i, f.Mode)
		}
		total += int64(len(f.Content))
	}
	for i, f := range r.Files {
		for dir := path.Dir(f.Path); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				return fmt.Errorf("files[%d].path: %q is under %q, which is a file", i, f.Path, dir)
			}
		}
	}
	if total > lim.MaxBytes {
		return fmt.Errorf("files: %d bytes, more than limits.maxBytes (%d)", total, lim.MaxBytes)
	}
	return nil
}

// Check refuses a limit below zero or above its bound, naming it.
func (l Limits) Check() error {
	for _, c := range []struct {
		name      string
		v, lo, hi int64
	}{
		{"cpuSeconds", int64(l.CPUSeconds), 0, MaxCPUSeconds},
		{"memoryBytes", l.MemoryBytes, 0, MaxMemoryBytes},
		{"wallSeconds", int64(l.WallSeconds), 0, MaxWallSeconds},
		{"outputBytes", int64(l.OutputBytes), 0, MaxOutputBytes},
		{"maxFiles", int64(l.MaxFiles), 0, MaxMaxFiles},
		{"maxBytes", l.MaxBytes, 0, MaxMaxBytes},
	} {
		if c.v < c.lo || c.v > c.hi {
			return fmt.Errorf("limits.%s: %d is out of range (0 for the default, at most %d)", c.name, c.v, c.hi)
		}
	}
	if l.MemoryBytes != 0 && l.MemoryBytes < MinMemoryBytes {
		return fmt.Errorf("limits.memoryBytes: %d is below %d, too little for a shell", l.MemoryBytes, MinMemoryBytes)
	}
	return nil
}

// CheckPath refuses a path that is not a clean relative one (package relpath's grammar, the
// workspaces'): a path that passes names a place under a root, and only there.
func CheckPath(p string) error {
	if problem := relpath.Problem(p); problem != "" {
		return fmt.Errorf("%q %s", p, problem)
	}
	return nil
}

// Result is what a run did.
type Result struct {
	ExitCode int `json:"exitCode"`
	// Stdout and Stderr are the first Limits.OutputBytes of each.
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdoutTruncated,omitempty"`
	StderrTruncated bool   `json:"stderrTruncated,omitempty"`
	// TimedOut is set when the command was killed for its wall or CPU time; Killed says which.
	TimedOut bool   `json:"timedOut,omitempty"`
	Killed   string `json:"killed,omitempty"`
	// Changed are the regular files under the root that the command created or modified, by
	// path; Deleted are the paths of Request.Files that are no longer regular files.
	Changed []File   `json:"changed,omitempty"`
	Deleted []string `json:"deleted,omitempty"`
	// Skipped are entries under the root not handed back, and why (a symlink, a path
	// CheckPath refuses, past a limit); ChangedTruncated is set when the limits left files out.
	Skipped          []Skipped `json:"skipped,omitempty"`
	ChangedTruncated bool      `json:"changedTruncated,omitempty"`
	DurationMs       int64     `json:"durationMs"`
}

// Skipped is an entry under the root that Result.Changed leaves out.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// MaxSkipped bounds Result.Skipped: a command that makes a million symlinks gets the first ones
// named, and ChangedTruncated.
const MaxSkipped = 100

// environ is env as NAME=value entries, sorted by name.
func environ(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, name := range slices.Sorted(maps.Keys(env)) {
		out = append(out, name+"="+env[name])
	}
	return out
}
