package playground_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/playground"
	"github.com/agentharness/harness/infra/testenv"
)

var updateDocsScreenshots = flag.Bool("update-docs-screenshots", false,
	"copy the sign-in, demo-turn and approve screenshots of TestPlaygroundInChromium to docs/images/playground-*.png")

// browserSteps are the steps infra/node/playground-browser.mjs runs, in order.
var browserSteps = []string{"sign-in", "demo-turn", "approve", "reload-restore", "rename", "deny", "async-card", "resume",
	"nothing-to-resume", "validation", "async-status", "other-user", "credentials", "renewal", "delete"}

// docsSteps are the steps whose screenshots -update-docs-screenshots copies.
var docsSteps = []string{"sign-in", "demo-turn", "approve"}

// browserAgents are the agents the browser script expects beside the example account's.
var browserAgents = []string{
	// async-card's test_async runs async in the same invocation for 1.5 s, so its result comes
	// back as a data-async-result part.
	`{"agentId":"async-card","name":"Async card","model":{"provider":"scripted","script":[
		{"text":"Starting a slow job. ","toolCalls":[{"name":"test_async","input":{"echo":"card-echo","delayMs":1500}}]},
		{"text":"The job said {{toolResults}}"}]},
		"tools":{"test_async":{"async":true,"execution":"same-invocation"}}}`,
	// slow-steps thinks before each of its three steps, so that a page reload lands mid-turn
	// and the reloaded page has most of the turn still to resume.
	`{"agentId":"slow-steps","name":"Slow steps","model":{"provider":"scripted","script":[
		{"text":"First step. ","toolCalls":[{"name":"current_time","input":{}}],"delayMs":1500},
		{"text":"Second step. ","toolCalls":[{"name":"current_time","input":{}}],"delayMs":2000},
		{"text":"Third step: finished.","delayMs":3000}]},
		"tools":{"current_time":{"enabled":true}}}`,
}

// TestPlaygroundInChromium drives the playground page in headless Chromium against a full local
// runner, the page served on the API's origin as a deployment serves it: sign-in as an end
// user, a tool turn, an approval approved, a reload that signs in again and reads the
// conversation back identical to what useChat held, a rename, an approval denied, an async
// result card, a reload mid-turn that resumes the stream (and one with nothing to resume), a
// refused agent config, an /async turn followed in its panel, a second end user who sees none
// of the first one's conversations, the secret kept off the chat routes and out of storage,
// token renewal, and a deletion (infra/node/playground-browser.mjs says what each step
// checks). The screenshots of every step go to $HARNESS_ARTIFACTS/playground, else
// .cache/artifacts/playground.
func TestPlaygroundInChromium(t *testing.T) {
	chromium := os.Getenv("HARNESS_CHROMIUM")
	if chromium == "" {
		t.Fatal("HARNESS_CHROMIUM is not set: run the tests with `make test`, whose stack finds or installs Chromium")
	}
	root := testenv.Root(t)
	node := testenv.Node(t)
	shots := screenshotDir(t, root)

	stack := testenv.Stack(t)
	opts := stack.Options(nil)
	logs := &lockedBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runner warnings and errors:\n%s", logs.String())
		}
	})
	srv := httptest.NewUnstartedServer(nil)
	opts.BaseURL = "http://" + srv.Listener.Addr().String()
	runner, err := localrunner.New(opts)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/playground", playground.Handler())
	mux.Handle(playground.Prefix, playground.Handler())
	mux.Handle("/", runner)
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	ctx := context.Background()
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runner.Stop) // before srv.Close: cleanups run last first

	seed, err := localrunner.ReadSeed(filepath.Join(root, "examples", "account.config.example.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := runner.Seed(ctx, seed, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, config := range browserAgents {
		createAgent(t, srv.URL, secret, config)
	}

	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "infra", "node", "playground-browser.mjs"), srv.URL+"/playground/", secret, shots)
	cmd.Env = append(os.Environ(), "HARNESS_CHROMIUM="+chromium)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	passed := readSteps(t, stdout)
	err = cmd.Wait()
	t.Logf("the browser ran for %s; screenshots in %s", time.Since(start).Round(time.Millisecond), shots)
	if err != nil || stderr.Len() > 0 {
		t.Logf("playground-browser.mjs stderr:\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("playground-browser.mjs: %v (screenshot of the failure: %s)", err, filepath.Join(shots, "failure.png"))
	}
	if !slices.Equal(passed, browserSteps) {
		t.Fatalf("steps passed %v, want %v", passed, browserSteps)
	}
	if *updateDocsScreenshots {
		copyDocsScreenshots(t, root, shots)
	}
}

// screenshotDir returns the directory for the screenshots, emptied of earlier ones.
func screenshotDir(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(root, ".cache", "artifacts", "playground")
	if a := os.Getenv("HARNESS_ARTIFACTS"); a != "" {
		dir = filepath.Join(a, "playground")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.png"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// createAgent creates an agent from a config (with its agentId) through the account API.
func createAgent(t *testing.T, base, secret, config string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/accounts/me/agents", strings.NewReader(config))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("creating the agent %s = %d %s, want 201", config, res.StatusCode, body)
	}
}

// readSteps reads the script's JSON lines as they come, logs them, and returns the steps that
// passed, failing the test for a failed step or a line that is not one.
func readSteps(t *testing.T, r io.Reader) []string {
	t.Helper()
	var passed []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var s struct {
			Step   string `json:"step"`
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil || s.Step == "" {
			t.Errorf("playground-browser.mjs printed %q, want a JSON step", sc.Text())
			continue
		}
		if !s.OK {
			t.Errorf("step %s failed: %s", s.Step, s.Detail)
			continue
		}
		t.Logf("step %s: %s", s.Step, s.Detail)
		passed = append(passed, s.Step)
	}
	return passed
}

// copyDocsScreenshots copies the screenshots the docs show to docs/images.
func copyDocsScreenshots(t *testing.T, root, shots string) {
	t.Helper()
	dir := filepath.Join(root, "docs", "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, step := range docsSteps {
		// The script numbers its screenshots from 01 in step order.
		b, err := os.ReadFile(filepath.Join(shots, fmt.Sprintf("%02d-%s.png", slices.Index(browserSteps, step)+1, step)))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "playground-"+step+".png")
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", dst)
	}
}

// lockedBuffer is a buffer the runner's goroutines may log to while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
