// Package sandboxtest holds the checks the sandbox's backends share in their tests.
package sandboxtest

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentharness/harness/shared/sandbox"
)

// Listener is a listener on the machine's loopback that counts the connections it accepts: a
// command that reached it shows there.
type Listener struct {
	ln       net.Listener
	accepted atomic.Int32
}

// Listen starts a Listener, closed when the test ends.
func Listen(t testing.TB) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Listener{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			c.Close()
		}
	}()
	return l
}

// Addr is the listener's address, 127.0.0.1:port.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Port is the listener's port.
func (l *Listener) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }

// Accepted is how many connections it accepted.
func (l *Listener) Accepted() int32 { return l.accepted.Load() }

// CheckEnv checks that Request.Env reaches a command run, and nothing else of the test's
// environment does.
func CheckEnv(t *testing.T, run func(t *testing.T, req sandbox.Request) sandbox.Result) {
	t.Setenv("SANDBOX_CANARY", "canary-5573")
	res := run(t, sandbox.Request{
		Command: `printf '%s|%s\n' "$GREETING" "$TOKEN"; env`,
		Env:     map[string]string{"GREETING": "hello, world", "TOKEN": "tok=en with spaces"},
	})
	first, rest, _ := strings.Cut(res.Stdout, "\n")
	if first != "hello, world|tok=en with spaces" {
		t.Errorf("the command saw GREETING|TOKEN = %q; want the request's", first)
	}
	if strings.Contains(rest, "canary-5573") || !strings.Contains(rest, "PATH=/usr/local/bin:/usr/bin:/bin") {
		t.Errorf("the command's environment:\n%s\nwant PATH and no canary", rest)
	}
}

// ProcessesWith returns the PIDs of the machine's processes one of whose command-line arguments
// is arg: what a run left behind when arg is a marker only its command used.
func ProcessesWith(t *testing.T, arg string) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		for a := range strings.SplitSeq(string(b), "\x00") {
			if a == arg {
				pids = append(pids, filepath.Base(filepath.Dir(d)))
			}
		}
	}
	return pids
}
