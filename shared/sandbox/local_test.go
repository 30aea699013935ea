package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentharness/harness/shared/sandbox"
	"github.com/agentharness/harness/shared/sandbox/sandboxtest"
)

// local is the runner on the bwrap the stack found or installed.
func local(t *testing.T) *sandbox.Local {
	t.Helper()
	bwrap := os.Getenv("HARNESS_BWRAP")
	if bwrap == "" {
		t.Fatal("HARNESS_BWRAP is not set: run the tests with `make test`, whose stack finds or installs bubblewrap")
	}
	return &sandbox.Local{Bwrap: bwrap}
}

func run(t *testing.T, req sandbox.Request) sandbox.Result {
	t.Helper()
	res, err := local(t).Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run(%q): %v", req.Command, err)
	}
	return res
}

func TestRunFiles(t *testing.T) {
	res := run(t, sandbox.Request{
		Command: "cat a.txt; echo more >> a.txt; echo new > sub/new.txt; rm sub/gone.txt; chmod +x run.sh; " +
			"mkdir -p d/e && printf x > d/e/f; mkdir empty",
		Files: []sandbox.File{
			{Path: "a.txt", Content: []byte("hello\n")},
			{Path: "sub/gone.txt", Content: []byte("bye")},
			{Path: "sub/kept.txt", Content: []byte("same")},
			{Path: "run.sh", Content: []byte("echo hi\n")},
			{Path: "ro.txt", Content: []byte("ro"), Mode: 0o400},
		},
	})
	if res.ExitCode != 0 || res.Stdout != "hello\n" || res.Stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, the input's content and nothing", res.ExitCode, res.Stdout, res.Stderr)
	}
	want := []sandbox.File{
		{Path: "a.txt", Content: []byte("hello\nmore\n"), Mode: 0o644},
		{Path: "d/e/f", Content: []byte("x"), Mode: 0o644},
		{Path: "run.sh", Content: []byte("echo hi\n"), Mode: 0o755},
		{Path: "sub/new.txt", Content: []byte("new\n"), Mode: 0o644},
	}
	if diff := cmp.Diff(want, res.Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"sub/gone.txt"}, res.Deleted); diff != "" {
		t.Errorf("Deleted (-want +got):\n%s", diff)
	}
	if len(res.Skipped) != 0 || res.ChangedTruncated || res.TimedOut {
		t.Errorf("Skipped %v, ChangedTruncated %v, TimedOut %v; want none", res.Skipped, res.ChangedTruncated, res.TimedOut)
	}
}

func TestRunEmptyRoot(t *testing.T) {
	res := run(t, sandbox.Request{Command: "pwd; ls -A | wc -l; id -u; id -g"})
	if want := sandbox.RootDir + "\n0\n65534\n65534\n"; res.Stdout != want {
		t.Errorf("stdout %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
	}
}

func TestRunExitAndOutput(t *testing.T) {
	res := run(t, sandbox.Request{Command: "echo out; echo err >&2; exit 3"})
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.StdoutTruncated || res.StderrTruncated {
		t.Errorf("got %+v, want exit 3, out and err whole", res)
	}
	res = run(t, sandbox.Request{
		Command: "head -c 100000 /dev/zero | tr '\\0' a; head -c 10 /dev/zero | tr '\\0' b >&2",
		Limits:  sandbox.Limits{OutputBytes: 1000},
	})
	if res.ExitCode != 0 || res.Stdout != strings.Repeat("a", 1000) || !res.StdoutTruncated {
		t.Errorf("exit %d, %d bytes of stdout, truncated %v; want 0, the first 1000, true", res.ExitCode, len(res.Stdout), res.StdoutTruncated)
	}
	if res.Stderr != strings.Repeat("b", 10) || res.StderrTruncated {
		t.Errorf("stderr %q, truncated %v; want it whole", res.Stderr, res.StderrTruncated)
	}
}

// The wall time limit kills the command and what it started in the background.
func TestRunWallTime(t *testing.T) {
	done := make(chan sandbox.Result, 1)
	go func() {
		res, err := local(t).Run(context.Background(), sandbox.Request{
			Command: "(sleep 6007; echo late) & sleep 6007",
			Limits:  sandbox.Limits{WallSeconds: 1},
		})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- res
	}()
	var res sandbox.Result
	select {
	case res = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the run went on long past its wall time")
	}
	if !res.TimedOut || !strings.Contains(res.Killed, "wall") || res.ExitCode == 0 {
		t.Errorf("TimedOut %v, Killed %q, exit %d; want killed for the wall time", res.TimedOut, res.Killed, res.ExitCode)
	}
	if pids := sandboxtest.ProcessesWith(t, "6007"); len(pids) > 0 {
		t.Errorf("processes %v of the command outlived it", pids)
	}
}

func TestRunCPUTime(t *testing.T) {
	res := run(t, sandbox.Request{Command: "while :; do :; done", Limits: sandbox.Limits{CPUSeconds: 1, WallSeconds: 120}})
	if !res.TimedOut || !strings.Contains(res.Killed, "cpu") {
		t.Errorf("TimedOut %v, Killed %q, exit %d; want killed for its CPU time", res.TimedOut, res.Killed, res.ExitCode)
	}
}

func TestRunMemory(t *testing.T) {
	// bash holds the 128 MB string in memory; the limit is 64 MiB, and the command cannot raise it.
	res := run(t, sandbox.Request{
		Command: "ulimit -v unlimited && echo raised; x=$(head -c 128000000 /dev/zero | tr '\\0' a); echo allocated ${#x}",
		Limits:  sandbox.Limits{MemoryBytes: 64 << 20},
	})
	if strings.Contains(res.Stdout, "raised") || strings.Contains(res.Stdout, "allocated") {
		t.Errorf("stdout %q: the command raised its memory limit or allocated past it (stderr %q)", res.Stdout, res.Stderr)
	}
	// The same command runs under the default limit, so it was the limit that stopped it.
	res = run(t, sandbox.Request{Command: "x=$(head -c 128000000 /dev/zero | tr '\\0' a); echo allocated ${#x}"})
	if res.Stdout != "allocated 128000000\n" {
		t.Errorf("under the default limit: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
}

// The command reaches neither a listener of the machine's loopback nor a public address: it is
// in a network namespace of its own, with a loopback of its own and nothing else.
func TestRunNetwork(t *testing.T) {
	ln := sandboxtest.Listen(t)
	port := ln.Port()
	res := run(t, sandbox.Request{Command: fmt.Sprintf(
		"bash -c 'echo hi > /dev/tcp/127.0.0.1/%d' && echo reached-loopback; "+
			"bash -c 'echo hi > /dev/tcp/1.1.1.1/80' && echo reached-public; "+
			"tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", port)})
	if strings.Contains(res.Stdout, "reached") {
		t.Errorf("stdout %q: the command reached the network", res.Stdout)
	}
	if n := ln.Accepted(); n != 0 {
		t.Errorf("the loopback listener accepted %d connections from the sandbox", n)
	}
	if ifaces := strings.Fields(strings.ReplaceAll(res.Stdout, "reached", "")); !cmp.Equal(ifaces, []string{"lo"}) {
		t.Errorf("interfaces in the sandbox %q, want lo alone (stderr %q)", ifaces, res.Stderr)
	}
}

// Neither the harness's environment nor its files reach the command: only the system's
// directories, read-only.
func TestRunIsolation(t *testing.T) {
	t.Setenv("HARNESS_SANDBOX_CANARY", "canary-7c1e")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "canary-aws")
	repo, err := filepath.Abs("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	// A descriptor open across exec, as one the harness inherited would be.
	var leak [2]int
	if err := syscall.Pipe(leak[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leak[0])
	defer syscall.Close(leak[1])
	res := run(t, sandbox.Request{Command: fmt.Sprintf(`env; cat /proc/1/environ;
for f in /proc/$$/fd/*; do case ${f##*/} in %d|%d) echo "canary fd ${f##*/}";; esac; done
for p in %s /root /home /etc/shadow /etc/hostname /opt /var /srv /mnt; do test -e "$p" && echo "visible: $p"; done
for d in /usr /etc /bin /; do touch "$d/x" 2>/dev/null && echo "writable: $d"; done
ls /etc; ls /; true`, leak[0], leak[1], repo)})
	for _, leak := range []string{"canary", "visible:", "writable:"} {
		if strings.Contains(res.Stdout, leak) {
			t.Errorf("stdout holds %q:\n%s", leak, res.Stdout)
		}
	}
	env := strings.Fields(res.Stdout)
	for _, want := range []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("the environment lacks %s: %q", want, env)
		}
	}
}

// Links in the root are neither followed nor handed back: each is skipped and said why, and an
// input replaced by one is deleted.
func TestRunSymlinks(t *testing.T) {
	res := run(t, sandbox.Request{
		Command: "ln -s /etc/passwd out; ln -s .. up; ln -s a.txt a-link; rm a.txt && ln -s /etc/group a.txt; mkfifo pipe; mkdir d; ln -s / d/root",
		Files:   []sandbox.File{{Path: "a.txt", Content: []byte("a")}},
	})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if len(res.Changed) != 0 {
		t.Errorf("Changed %v, want none", res.Changed)
	}
	if diff := cmp.Diff([]string{"a.txt"}, res.Deleted); diff != "" {
		t.Errorf("Deleted (-want +got):\n%s", diff)
	}
	var skipped []string
	for _, s := range res.Skipped {
		skipped = append(skipped, s.Path)
		if s.Reason == "" {
			t.Errorf("%s skipped without a reason", s.Path)
		}
	}
	if diff := cmp.Diff([]string{"a-link", "a.txt", "d/root", "out", "pipe", "up"}, skipped); diff != "" {
		t.Errorf("Skipped (-want +got):\n%s", diff)
	}
}

func TestRunWriteBackLimits(t *testing.T) {
	res := run(t, sandbox.Request{
		Command: "echo 1 > a; echo 2 > b; echo 3 > c",
		Limits:  sandbox.Limits{MaxFiles: 2},
	})
	if len(res.Changed) != 2 || !res.ChangedTruncated || len(res.Skipped) != 1 || res.Skipped[0].Path != "c" {
		t.Errorf("Changed %v, ChangedTruncated %v, Skipped %v; want a and b, c skipped", res.Changed, res.ChangedTruncated, res.Skipped)
	}
	// The files handed back hold 1000 bytes in all; no one file can be written past that.
	res = run(t, sandbox.Request{
		Command: "head -c 600 /dev/zero > a; head -c 600 /dev/zero > b; head -c 5000 /dev/zero > big; echo $? >&2",
		Limits:  sandbox.Limits{MaxBytes: 1000},
	})
	if len(res.Changed) != 1 || res.Changed[0].Path != "a" || !res.ChangedTruncated {
		t.Errorf("Changed %v, ChangedTruncated %v; want a alone", res.Changed, res.ChangedTruncated)
	}
	for _, s := range res.Skipped {
		if s.Path == "big" && !strings.Contains(s.Reason, "maxBytes") {
			t.Errorf("big skipped for %q", s.Reason)
		}
	}
	if res.Stderr == "0\n" {
		t.Errorf("writing 5000 bytes past a 1000-byte limit succeeded")
	}
}

func TestRunRefusesBadRequests(t *testing.T) {
	_, err := local(t).Run(context.Background(), sandbox.Request{Command: "cat x", Files: []sandbox.File{{Path: "../x"}}})
	if err == nil || !strings.Contains(err.Error(), "files[0].path") {
		t.Errorf("Run = %v, want the path refused", err)
	}
}

func TestRunWithoutBwrap(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := (&sandbox.Local{}).Run(context.Background(), sandbox.Request{Command: "true"})
	if err == nil || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
		t.Errorf("Run = %v, want how to install bubblewrap", err)
	}
}

// asUserVar runs TestRunAsUser's body in a copy of the test binary started as an unprivileged
// user.
const asUserVar = "SANDBOX_TEST_AS_USER"

// The runner works for a harness that is not root, as for one that is (every other test here,
// when the suite runs as root).
func TestRunAsUser(t *testing.T) {
	if os.Getenv(asUserVar) != "" || os.Geteuid() != 0 {
		// A directory and file the command locks are read back all the same.
		res := run(t, sandbox.Request{Command: "echo out > f; mkdir d && echo x > d/g && chmod 0 d/g d; id -u", Files: []sandbox.File{{Path: "in", Content: []byte("x")}}})
		want := []sandbox.File{{Path: "d/g", Content: []byte("x\n"), Mode: 0}, {Path: "f", Content: []byte("out\n"), Mode: 0o644}}
		if res.Stdout != "65534\n" || !cmp.Equal(want, res.Changed) {
			t.Errorf("stdout %q, Changed %v (stderr %q)", res.Stdout, res.Changed, res.Stderr)
		}
		return
	}
	// The test binary's directory is root's alone: the copy goes where nobody can run it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if out, err := exec.Command("cp", self, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	cmd := exec.Command(bin, "-test.run", "^TestRunAsUser$", "-test.count", "1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), asUserVar+"=1", "HOME="+dir, "TMPDIR=/tmp")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRunAsUser") {
		t.Errorf("as nobody: %v\n%s", err, out)
	}
}

// A bwrap that fails before the command runs is an error, not a result with its exit code.
func TestRunSetupFails(t *testing.T) {
	_, err := (&sandbox.Local{Bwrap: "/bin/false"}).Run(context.Background(), sandbox.Request{Command: "true"})
	if err == nil || !strings.Contains(err.Error(), "could not set up the sandbox") {
		t.Errorf("Run = %v, want the sandbox's setup failed", err)
	}
}

// A caller that gives up stops the command and gets its context's error.
func TestRunCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err := local(t).Run(ctx, sandbox.Request{Command: "sleep 6011"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if pids := sandboxtest.ProcessesWith(t, "6011"); len(pids) > 0 {
		t.Errorf("processes %v of the command outlived it", pids)
	}
}

// Request.Env reaches the command, and nothing else of the caller's environment does.
func TestRunEnv(t *testing.T) { sandboxtest.CheckEnv(t, run) }
