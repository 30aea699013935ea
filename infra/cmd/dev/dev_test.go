package main

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/mockopenai"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// TestDevServesThePrintedCurl runs what `make dev` runs, as a process: it must start its own
// stand-ins, print a curl that streams a turn when pasted into a shell (and a command per chat
// channel that shows a turn and an approval there), write an env file a second shell can source
// to reach the same stack, and stop everything it started (and remove the file) on Ctrl-C.
func TestDevServesThePrintedCurl(t *testing.T) {
	root := testenv.Root(t)
	bin := filepath.Join(t.TempDir(), "dev")
	build := exec.Command("go", "build", "-o", bin, "./infra/cmd/dev")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building dev: %v\n%s", err, out)
	}
	t.Run("scripted demo agent", func(t *testing.T) {
		runDev(t, root, bin, nil, "scripted")
	})
	t.Run("OpenAI-compatible model from OPENAI_BASE_URL", func(t *testing.T) {
		mock := httptest.NewServer(mockopenai.New(nil))
		defer mock.Close()
		runDev(t, root, bin, []string{"OPENAI_BASE_URL=" + mock.URL + "/v1", "OPENAI_API_KEY="}, "openai gpt-4o-mini")
	})
}

func runDev(t *testing.T, root, bin string, env []string, model string) {
	// Not the default .dev.env at the root, which a developer's make dev may be using.
	envFile := filepath.Join(t.TempDir(), "dev.env")
	cmd := exec.Command(bin, "-port", "0", "-env-file", envFile)
	cmd.Dir = root
	// The stand-ins dev starts are its own, not the ones of `make test`.
	cmd.Env = append(withoutEndpoints(os.Environ()), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()

	var printed strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "Ctrl-C stops everything") {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
		exited <- cmd.Wait()
	}()
	out := printed.String()
	curl := regexp.MustCompile(`(?m)^\s*(curl -N .*)$`).FindStringSubmatch(out)
	if curl == nil {
		t.Fatalf("dev printed no curl command:\n%s\nstderr:\n%s", out, stderr.String())
	}
	if !strings.Contains(out, "model: "+model) {
		t.Errorf("dev did not report model %q:\n%s", model, out)
	}
	endpoints := regexp.MustCompile(`DynamoDB Local at http://(127\.0\.0\.1:\d+), fauxqs \(SQS, S3\) at http://(127\.0\.0\.1:\d+)`).FindStringSubmatch(out)
	if endpoints == nil {
		t.Fatalf("dev did not print its stand-ins:\n%s", out)
	}

	if !strings.Contains(out, "wrote "+envFile) {
		t.Errorf("dev did not say it wrote %s:\n%s", envFile, out)
	}
	checkEnvFile(t, envFile, out, endpoints[1:])

	turn, err := exec.Command("sh", "-c", curl[1]+" -sS --fail-with-body").Output()
	if err != nil {
		t.Fatalf("the printed curl failed: %v\n%s", err, turn)
	}
	body := string(turn)
	for _, want := range []string{`"type":"start"`, `"type":"text-delta"`, `"type":"tool-input-available"`, `"toolName":"current_time"`,
		`"type":"tool-output-available"`, `"type":"finish"`, "data: [DONE]"} {
		if !strings.Contains(body, want) {
			t.Errorf("the turn's stream lacks %s:\n%s", want, body)
		}
	}

	// The printed playground URL serves the page and its script.
	page := regexp.MustCompile(`(?m)^\s*(http://127\.0\.0\.1:\d+/playground/)$`).FindStringSubmatch(out)
	if page == nil {
		t.Errorf("dev printed no playground URL:\n%s", out)
	} else {
		for _, u := range []string{page[1], page[1] + "app.js"} {
			res, err := http.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("GET %s = %d, want 200", u, res.StatusCode)
			}
		}
	}

	// The search demo's curl runs tavilySearch against the local fake Tavily dev started (the
	// scripted agent calls it for sure; a real model may not).
	if model == "scripted" {
		checkSearchCurl(t, out)
		checkShowcaseCurls(t, out)
		checkChannelCommands(t, root, out)
		checkNATSCommand(t, root, out)
	}
	if nats := regexp.MustCompile(`a local NATS server at nats://(127\.0\.0\.1:\d+), WebSocket ws://(127\.0\.0\.1:\d+)`).FindStringSubmatch(out); nats != nil {
		endpoints = append(endpoints, nats[1], nats[2])
	} else {
		t.Errorf("dev printed no local NATS server:\n%s", out)
	}
	chats := regexp.MustCompile(`a local stand-in of the (?:Slack|Telegram Bot) API at http://(127\.0\.0\.1:\d+)`).FindAllStringSubmatch(out, -1)
	if len(chats) != 2 {
		t.Errorf("dev printed %d chat stand-ins, want Slack's and Telegram's:\n%s", len(chats), out)
	}
	for _, m := range chats {
		endpoints = append(endpoints, m[1])
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("dev exited with %v after Ctrl-C\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("dev did not stop within 60s of Ctrl-C")
	}
	for _, addr := range endpoints[1:] {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("a stand-in still listens on %s after dev stopped", addr)
		}
	}
	if _, err := os.Stat(envFile); !os.IsNotExist(err) {
		t.Errorf("%s is still there after dev stopped (stat: %v)", envFile, err)
	}
}

// checkSearchCurl runs the printed search-demo curl and checks the fake's page came back.
func checkSearchCurl(t *testing.T, out string) {
	t.Helper()
	search := regexp.MustCompile(`(?m)^\s*(curl -N .*"agentId":"search-demo".*)$`).FindStringSubmatch(out)
	if search == nil || !strings.Contains(out, "a local fake Tavily at http://127.0.0.1:") {
		t.Fatalf("dev printed no search-demo curl on a local fake Tavily:\n%s", out)
	}
	turn, err := exec.Command("sh", "-c", search[1]+" -sS --fail-with-body").Output()
	if err != nil {
		t.Fatalf("the printed search curl failed: %v\n%s", err, turn)
	}
	body := string(turn)
	for _, want := range []string{`"toolName":"tavilySearch"`, `"type":"tool-output-available"`, "https://example.com/harness/async-tools", `"type":"finish"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the search turn's stream lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, `"type":"error"`) || strings.Contains(body, "example.com/garden") {
		t.Errorf("the search turn failed or found the unrelated page:\n%s", body)
	}
}

// checkShowcaseCurls runs the printed prompt-demo and skills-demo curls: the prompt tool's
// nested loop streams as data-prompt-tool parts and its shaped result comes back; the skills
// agent loads a sample skill make dev seeded and reads one of its files.
func checkShowcaseCurls(t *testing.T, out string) {
	t.Helper()
	for agentID, wants := range map[string][]string{
		"prompt-demo":    {`"type":"data-prompt-tool"`, `"state":"completed"`, `"toolName":"headline"`, `Async tools land in one invocation`, `"toolCalls":[{"toolName":"current_time"`},
		"skills-demo":    {`"toolName":"load_skill"`, `"toolName":"read_skill_file"`, `"instructions":`, `"path":"template.md"`},
		"mcp-demo":       {`"toolName":"everything__get-sum"`, `"type":"tool-output-available"`, `The sum of 2 and 3 is 5`},
		"workspace-demo": {`"toolName":"bash"`, `"toolName":"read"`, `hello.txt`, `Hello from the sandbox.`},
	} {
		curl := regexp.MustCompile(`(?m)^\s*(curl -N .*"agentId":"` + agentID + `".*)$`).FindStringSubmatch(out)
		if curl == nil {
			t.Errorf("dev printed no %s curl:\n%s", agentID, out)
			continue
		}
		turn, err := exec.Command("sh", "-c", curl[1]+" -sS --fail-with-body").Output()
		if err != nil {
			t.Fatalf("the printed %s curl failed: %v\n%s", agentID, err, turn)
		}
		body := string(turn)
		for _, want := range append(wants, `"type":"finish"`) {
			if !strings.Contains(body, want) {
				t.Errorf("the %s turn's stream lacks %s:\n%s", agentID, want, body)
			}
		}
		if strings.Contains(body, `"type":"error"`) || strings.Contains(body, `"type":"tool-output-error"`) {
			t.Errorf("the %s turn had an error:\n%s", agentID, body)
		}
	}
	// The file the workspace demo's bash wrote, read back from the workspace.
	get := regexp.MustCompile(`(?m)^\s*(curl \S+/accounts/me/workspaces/notes/files/hello\.txt .*)$`).FindStringSubmatch(out)
	if get == nil {
		t.Fatalf("dev printed no curl reading the workspace demo's file:\n%s", out)
	}
	file, err := exec.Command("sh", "-c", get[1]+" -sS --fail-with-body").Output()
	if err != nil || string(file) != "Hello from the sandbox.\n" {
		t.Errorf("the printed file curl answered %q, %v; want the line bash wrote", file, err)
	}
}

// checkChannelCommands runs the printed examples/channels commands, both at once: each posts a
// message to its binding's webhook and shows, from the stand-in, the reply, the approval prompt,
// the approver's press and the final answer.
func checkChannelCommands(t *testing.T, root, out string) {
	t.Helper()
	cmds := regexp.MustCompile(`(?m)^\s*(go run \./examples/channels -platform (\w+) .*)$`).FindAllStringSubmatch(out, -1)
	if len(cmds) != 2 {
		t.Fatalf("dev printed %d channel commands, want one for Slack and one for Telegram:\n%s", len(cmds), out)
	}
	wants := map[string][]string{
		"slack":    {`chat.postMessage    "Starting`, `"Approve a call of test_async?" [Approve] [Deny]`, "U0DEVUSER presses Approve", "Approved by <@U0DEVUSER>", `Done: [{\"echo\":\"nightly build\"}]`},
		"telegram": {`sendMessage         "Starting`, `[✅ Approve] [❌ Deny]`, "1001 presses Approve", "Approved by Dev", `Done: [{\"echo\":\"nightly build\"}]`},
	}
	done := make(chan struct{})
	for _, c := range cmds {
		go func() {
			defer func() { done <- struct{}{} }()
			sh := exec.Command("sh", "-c", c[1])
			sh.Dir = root
			printed, err := sh.CombinedOutput()
			if err != nil {
				t.Errorf("the printed %s command failed: %v\n%s", c[2], err, printed)
				return
			}
			for _, want := range wants[c[2]] {
				if !strings.Contains(string(printed), want) {
					t.Errorf("the %s command's output lacks %s:\n%s", c[2], want, printed)
				}
			}
		}()
	}
	for range cmds {
		<-done
	}
}

// checkNATSCommand runs the printed examples/nats-follow command: an /async turn of the demo
// agent, read from JetStream with the credentials the harness signed, to its end.
func checkNATSCommand(t *testing.T, root, out string) {
	t.Helper()
	cmd := regexp.MustCompile(`(?m)^\s*(go run \./examples/nats-follow .*)$`).FindStringSubmatch(out)
	if cmd == nil {
		t.Fatalf("dev printed no nats-follow command:\n%s", out)
	}
	sh := exec.Command("sh", "-c", cmd[1])
	sh.Dir = root
	printed, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("the printed nats-follow command failed: %v\n%s", err, printed)
	}
	for _, want := range []string{"following harness.", "[call current_time {}]", "[result ", "[completed]"} {
		if !strings.Contains(string(printed), want) {
			t.Errorf("the nats-follow command's output lacks %s:\n%s", want, printed)
		}
	}
}

// checkEnvFile sources the env file in a shell and checks what it exports: the harness URL and
// the account secret dev printed, the stand-ins' endpoints, and the URLs of queues that exist.
func checkEnvFile(t *testing.T, path, printed string, endpoints []string) {
	t.Helper()
	sourced, err := exec.Command("sh", "-c", `set -e; . "$1"; env`, "sh", path).Output()
	if err != nil {
		t.Fatalf("sourcing %s: %v", path, err)
	}
	env := map[string]string{}
	for line := range strings.Lines(string(sourced)) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		env[k] = v
	}
	for _, k := range []string{"HARNESS_URL", "HARNESS_SECRET", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3",
		"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "EXTERNAL_JOBS_QUEUE_URL", "ASYNC_WORK_QUEUE_URL"} {
		if env[k] == "" {
			t.Errorf("%s exports no %s", path, k)
		}
	}
	if !strings.Contains(printed, "Harness is running at "+env["HARNESS_URL"]+"\n") {
		t.Errorf("HARNESS_URL is %q, not the URL dev printed:\n%s", env["HARNESS_URL"], printed)
	}
	if !strings.Contains(printed, "account secret (shown once): "+env["HARNESS_SECRET"]+"\n") {
		t.Errorf("HARNESS_SECRET is %q, not the account secret dev printed", env["HARNESS_SECRET"])
	}
	if env["AWS_ENDPOINT_URL_DYNAMODB"] != "http://"+endpoints[0] || env["AWS_ENDPOINT_URL_SQS"] != "http://"+endpoints[1] ||
		env["AWS_ENDPOINT_URL_S3"] != "http://"+endpoints[1] {
		t.Errorf("the endpoints are %q, %q and %q, want the stand-ins dev printed, %v", env["AWS_ENDPOINT_URL_DYNAMODB"],
			env["AWS_ENDPOINT_URL_SQS"], env["AWS_ENDPOINT_URL_S3"], endpoints)
	}
	// An outside worker with these variables reaches the queues.
	client := sqs.New(sqs.Options{
		Region:       env["AWS_REGION"],
		BaseEndpoint: aws.String(env["AWS_ENDPOINT_URL_SQS"]),
		Credentials:  credentials.NewStaticCredentialsProvider(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], ""),
	})
	for _, k := range []string{"EXTERNAL_JOBS_QUEUE_URL", "ASYNC_WORK_QUEUE_URL"} {
		if _, err := client.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(env[k])}); err != nil {
			t.Errorf("%s=%s: %v", k, env[k], err)
		}
	}
}

// withoutEndpoints drops the test stack's endpoints and any Tavily, Slack or Telegram settings
// of the machine, so dev starts its own stand-ins of them all.
func withoutEndpoints(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AWS_ENDPOINT_URL") && !strings.HasPrefix(kv, "TAVILY_") &&
			!strings.HasPrefix(kv, "SLACK_API_URL=") && !strings.HasPrefix(kv, "TELEGRAM_API_URL=") {
			out = append(out, kv)
		}
	}
	return out
}
