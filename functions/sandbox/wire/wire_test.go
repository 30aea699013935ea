package wire_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/google/go-cmp/cmp"

	"github.com/agentharness/harness/functions/sandbox/wire"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/sandbox"
	"github.com/agentharness/harness/shared/sandbox/sandboxtest"
)

// handler is the function's handler as it runs off Lambda: no sweep of the machine, whose
// other processes are the tests'.
func handler() func(context.Context, sandbox.Request) (sandbox.Result, error) {
	return wire.Handler(lambdadeps.Deps{})
}

func run(t *testing.T, req sandbox.Request) sandbox.Result {
	t.Helper()
	res, err := handler()(context.Background(), req)
	if err != nil {
		t.Fatalf("handler(%q): %v", req.Command, err)
	}
	return res
}

func TestHandlerFiles(t *testing.T) {
	res := run(t, sandbox.Request{
		Command: "cat a.txt; echo more >> a.txt; mkdir sub; echo new > sub/new.txt; rm gone.txt; exit 3",
		Files:   []sandbox.File{{Path: "a.txt", Content: []byte("hello\n")}, {Path: "gone.txt", Content: []byte("x")}},
	})
	if res.ExitCode != 3 || res.Stdout != "hello\n" || res.Stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 3, the input's content and nothing", res.ExitCode, res.Stdout, res.Stderr)
	}
	want := []sandbox.File{
		{Path: "a.txt", Content: []byte("hello\nmore\n"), Mode: 0o644},
		{Path: "sub/new.txt", Content: []byte("new\n"), Mode: 0o644},
	}
	if diff := cmp.Diff(want, res.Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gone.txt"}, res.Deleted); diff != "" {
		t.Errorf("Deleted (-want +got):\n%s", diff)
	}
}

func TestHandlerOutputCap(t *testing.T) {
	res := run(t, sandbox.Request{Command: "head -c 5000 /dev/zero | tr '\\0' a; echo err >&2", Limits: sandbox.Limits{OutputBytes: 100}})
	if len(res.Stdout) != 100 || !res.StdoutTruncated || res.Stderr != "err\n" || res.StderrTruncated {
		t.Errorf("stdout %d bytes (truncated %v), stderr %q (truncated %v); want 100 bytes cut, and err", len(res.Stdout), res.StdoutTruncated, res.Stderr, res.StderrTruncated)
	}
}

func TestHandlerEmptyEnvironment(t *testing.T) {
	t.Setenv("SANDBOX_CANARY", "canary-4471")
	res := run(t, sandbox.Request{Command: "env; cat /proc/self/environ"})
	if strings.Contains(res.Stdout, "canary-4471") || strings.Contains(res.Stdout, "SANDBOX_CANARY") {
		t.Errorf("the command saw the function's environment:\n%s", res.Stdout)
	}
	if !strings.Contains(res.Stdout, "PATH=/usr/local/bin:/usr/bin:/bin") {
		t.Errorf("the command has no PATH:\n%s", res.Stdout)
	}
}

func TestHandlerWallTimeKillsChildren(t *testing.T) {
	start := time.Now()
	res := run(t, sandbox.Request{Command: "(sleep 6011; echo late) & sleep 6011", Limits: sandbox.Limits{WallSeconds: 1}})
	if !res.TimedOut || !strings.Contains(res.Killed, "wall") || res.ExitCode == 0 || res.Stdout != "" {
		t.Errorf("TimedOut %v, Killed %q, exit %d, stdout %q; want killed for the wall time", res.TimedOut, res.Killed, res.ExitCode, res.Stdout)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the run took %v, past its wall time of 1 s", d)
	}
	if pids := sandboxtest.ProcessesWith(t, "6011"); len(pids) > 0 {
		t.Errorf("processes %v of the command outlived it", pids)
	}
}

func TestHandlerKillsLeftovers(t *testing.T) {
	start := time.Now()
	res := run(t, sandbox.Request{Command: "sleep 6013 & sleep 6013 >/dev/null 2>&1 & (set -m; sleep 6013 &) ; echo started"})
	if res.ExitCode != 0 || res.Stdout != "started\n" || res.TimedOut {
		t.Errorf("exit %d, stdout %q, TimedOut %v; want 0 and started", res.ExitCode, res.Stdout, res.TimedOut)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the run took %v: it waited for its background processes", d)
	}
	if pids := sandboxtest.ProcessesWith(t, "6013"); len(pids) > 0 {
		t.Errorf("background processes %v outlived the run", pids)
	}
}

func TestHandlerRefusesBadRequests(t *testing.T) {
	if _, err := handler()(context.Background(), sandbox.Request{Command: " "}); err == nil || !strings.Contains(err.Error(), "command is empty") {
		t.Errorf("an empty command: err %v, want it refused", err)
	}
}

func TestHandlerFitsLambdasResponse(t *testing.T) {
	// 5 MB of changed files is 6.7 MB of JSON: the last files are left out, and named.
	res := run(t, sandbox.Request{
		Command: "for i in 1 2 3 4 5; do head -c 1048576 /dev/urandom > f$i; done",
		Limits:  sandbox.Limits{MaxBytes: 8 << 20},
	})
	b, _ := json.Marshal(res)
	if len(b) > sandbox.MaxLambdaPayload || !res.ChangedTruncated || len(res.Changed) != 4 || len(res.Skipped) != 1 || res.Skipped[0].Path != "f5" {
		t.Errorf("%d bytes of JSON, %d changed, truncated %v, skipped %v; want 4 files within %d", len(b), len(res.Changed), res.ChangedTruncated, res.Skipped, sandbox.MaxLambdaPayload)
	}
}

// fakeLambda answers Lambda's Invoke API for the function fn as answer says, after checking
// the request's shape; answer nil runs the handler in this process on the request's body, so
// the runner and the function meet on the wire.
func fakeLambda(t *testing.T, fn string, answer func(w http.ResponseWriter)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if want := "/2015-03-31/functions/" + fn + "/invocations"; r.Method != http.MethodPost || r.URL.Path != want {
			t.Errorf("%s %s, want POST %s", r.Method, r.URL.Path, want)
		}
		if it := r.Header.Get("X-Amz-Invocation-Type"); it != "" && it != "RequestResponse" {
			t.Errorf("X-Amz-Invocation-Type %q, want RequestResponse", it)
		}
		if auth := r.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") {
			t.Errorf("Authorization %q, want a SigV4 signature", auth)
		}
		body, _ := io.ReadAll(r.Body)
		var req sandbox.Request
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			t.Errorf("the body is not a sandbox.Request: %v", err)
		}
		if answer != nil {
			answer(w)
			return
		}
		res, err := handler()(r.Context(), req)
		if err != nil {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			json.NewEncoder(w).Encode(map[string]string{"errorMessage": err.Error(), "errorType": "errorString"})
			return
		}
		json.NewEncoder(w).Encode(res)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func client(url string) *lambda.Client {
	return lambda.New(lambda.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
}

func TestLambdaRunner(t *testing.T) {
	srv := fakeLambda(t, "test-SandboxFunction", nil)
	runner := &sandbox.Lambda{Client: client(srv.URL), Function: "test-SandboxFunction"}
	res, err := runner.Run(context.Background(), sandbox.Request{
		Command: "cat in.txt; echo out > out.txt; chmod 600 out.txt",
		Files:   []sandbox.File{{Path: "in.txt", Content: []byte("in\n"), Mode: 0o600}},
		Limits:  sandbox.Limits{WallSeconds: 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Stdout != "in\n" {
		t.Errorf("exit %d, stdout %q; want 0 and the input", res.ExitCode, res.Stdout)
	}
	if diff := cmp.Diff([]sandbox.File{{Path: "out.txt", Content: []byte("out\n"), Mode: 0o600}}, res.Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}

	// The function refuses what Check refuses; the runner refuses it before invoking.
	if _, err := runner.Run(context.Background(), sandbox.Request{Command: ""}); err == nil || !strings.Contains(err.Error(), "command is empty") {
		t.Errorf("an empty command: %v, want it refused", err)
	}
}

func TestLambdaRunnerRefusesLargeRequests(t *testing.T) {
	srv := fakeLambda(t, "fn", func(w http.ResponseWriter) { t.Error("a request too large for Lambda was sent") })
	runner := &sandbox.Lambda{Client: client(srv.URL), Function: "fn"}
	_, err := runner.Run(context.Background(), sandbox.Request{
		Command: "true",
		Files:   []sandbox.File{{Path: "big", Content: make([]byte, 5<<20)}},
	})
	if err == nil || !strings.Contains(err.Error(), "more than the 6291456 the sandbox function takes") {
		t.Errorf("a 5 MB file (6.7 MB of JSON): %v, want it refused", err)
	}
}

func TestLambdaRunnerErrors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		want   string
	}{
		{"function error", func(w http.ResponseWriter) {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			io.WriteString(w, `{"errorMessage":"Runtime exited with error: signal: killed","errorType":"Runtime.ExitError"}`)
		}, "the sandbox function failed (Unhandled Runtime.ExitError): Runtime exited with error: signal: killed"},
		{"oversized result", func(w http.ResponseWriter) {
			io.WriteString(w, `{"exitCode":0,"stdout":"`+strings.Repeat("a", sandbox.MaxLambdaPayload)+`"}`)
		}, "more than Lambda's limit"},
		{"not a result", func(w http.ResponseWriter) { io.WriteString(w, `[1]`) }, "the sandbox function's result"},
		{"a path no run hands back", func(w http.ResponseWriter) {
			io.WriteString(w, `{"exitCode":0,"changed":[{"path":"../etc/passwd","content":""}]}`)
		}, "changed[0].path"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeLambda(t, "fn", tt.answer)
			runner := &sandbox.Lambda{Client: client(srv.URL), Function: "fn"}
			_, err := runner.Run(context.Background(), sandbox.Request{Command: "true"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// On Lambda the handler sweeps the machine after each run: every process but its own and its
// ancestors', and the temporary directory. The test runs itself again as the handler on Lambda
// in a PID namespace of its own (bubblewrap), where the machine's processes are its own.
func TestHandlerSweepsOnLambda(t *testing.T) {
	if tmp := os.Getenv("SANDBOX_SWEEP_TMP"); tmp != "" {
		sweepHelper(t, tmp)
		return
	}
	bwrap := os.Getenv("HARNESS_BWRAP")
	if bwrap == "" {
		t.Fatal("HARNESS_BWRAP is not set: run the tests with `make test`, whose stack finds or installs bubblewrap")
	}
	tmp := t.TempDir()
	cmd := exec.Command(bwrap, "--unshare-user", "--unshare-pid", "--die-with-parent", "--dev-bind", "/", "/", "--proc", "/proc",
		"--", os.Args[0], "-test.run=^TestHandlerSweepsOnLambda$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SANDBOX_SWEEP_TMP="+tmp, "TMPDIR="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the handler on Lambda: %v\n%s", err, out)
	}
	if pids := sandboxtest.ProcessesWith(t, "6019"); len(pids) > 0 {
		t.Errorf("processes %v outlived the run", pids)
	}
}

func sweepHelper(t *testing.T, tmp string) {
	h := wire.Handler(lambdadeps.Deps{Config: lambdadeps.Config{Runtime: lambdadeps.Runtime{MemoryMB: "2048"}}})
	res, err := h(context.Background(), sandbox.Request{
		// The daemon has left the session before the command ends.
		Command: "setsid sh -c 'touch ready; exec sleep 6019' </dev/null >/dev/null 2>&1 & sleep 6019 & echo left > " + tmp + "/left; " +
			"until [ -e ready ]; do sleep 0.01; done; echo started",
	})
	if err != nil || res.Stdout != "started\n" {
		t.Fatalf("handler: %+v, %v; want started", res, err)
	}
	// Before or after its exec.
	if pids := append(sandboxtest.ProcessesWith(t, "6019"), sandboxtest.ProcessesWith(t, "touch ready; exec sleep 6019")...); len(pids) > 0 {
		t.Errorf("processes %v outlived the run", pids)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		t.Errorf("the run left %v in the temporary directory", entries)
	}
}

// The command reaches no network, not even the machine's loopback, where the Lambda runtime API
// listens on Lambda (a listener of the test's stands in for it): the seccomp filter refuses
// every socket but AF_UNIX, io_uring and ptrace. A probe built from testdata/probe tries each.
func TestHandlerReachesNoNetwork(t *testing.T) {
	ln := sandboxtest.Listen(t)
	probe := filepath.Join(t.TempDir(), "probe")
	if out, err := exec.Command("go", "build", "-o", probe, "./testdata/probe").CombinedOutput(); err != nil {
		t.Fatalf("go build the probe: %v\n%s", err, out)
	}
	res := run(t, sandbox.Request{
		Command: probe + " " + ln.Addr() + "; bash -c 'echo hi > /dev/tcp/" + strings.Replace(ln.Addr(), ":", "/", 1) + "' && echo bash-reached",
		// A Go program reserves more address space at start than the default limit.
		Limits: sandbox.Limits{MemoryBytes: sandbox.MaxMemoryBytes},
	})
	want := "tcp-loopback refused\nsocket-inet-udp refused\nsocket-inet6 refused\nsocket-packet refused\n" +
		"socket-netlink refused\nsocket-vsock refused\nsocket-unix allowed\nio_uring_setup refused\nptrace-parent refused\n"
	if res.Stdout != want {
		t.Errorf("the probe printed:\n%s\nwant:\n%s\nstderr: %s", res.Stdout, want, res.Stderr)
	}
	if !strings.Contains(res.Stderr, "Permission denied") {
		t.Errorf("bash's /dev/tcp: stderr %q, want Permission denied", res.Stderr)
	}
	if n := ln.Accepted(); n != 0 {
		t.Errorf("the loopback listener accepted %d connections from the command", n)
	}
}

// Request.Env reaches the command, and nothing else of the caller's environment does.
func TestHandlerEnv(t *testing.T) { sandboxtest.CheckEnv(t, run) }
