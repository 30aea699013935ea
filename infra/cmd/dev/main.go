// Command dev is `make dev`: it starts the local AWS stand-ins, creates the tables, queues and
// bucket of template.yaml, serves every HTTP function on one local HTTP server, polls the queues
// of the SQS functions and runs the scheduled ones every few seconds, seeds a demo account and
// agent, and prints the account's one-time secret with a ready-to-paste curl. It serves local
// stand-ins of the Slack and Telegram APIs too, binds a channel on each to the approver agent,
// and prints a command that chats with it there. It also writes .dev.env, the variables a
// second shell sources to reach the same stack (an outside worker of external-dispatch tools,
// say). Ctrl-C stops everything it started and removes the file.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentharness/harness/infra/devstack"
	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/playground"
	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/shared/lambda/logging"
	"github.com/agentharness/harness/shared/wire/awsclient"
	"github.com/agentharness/harness/shared/wire/egress"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

func run() error {
	port := flag.Int("port", envInt("HARNESS_PORT", 3000), "port of the local runner on 127.0.0.1 (0 picks a free one); or set HARNESS_PORT")
	seedPath := flag.String("seed", "examples/account.config.example.json", "account and agents to seed")
	envPath := flag.String("env-file", ".dev.env", "file of export lines for a second shell, removed on exit")
	sweepEvery := flag.Duration("schedule-every", 5*time.Second, "period of the scheduled functions (the sweeper) instead of their template rate")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := os.Getwd()
	if err != nil {
		return err
	}
	tpl, err := template.Load(filepath.Join(root, "template.yaml"))
	if err != nil {
		return fmt.Errorf("%w (run make dev from the repository root)", err)
	}
	seed, err := localrunner.ReadSeed(*seedPath)
	if err != nil {
		return err
	}
	modelNote := useRealModel(seed)

	// Bind first, so a busy port fails before anything starts.
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("listening on 127.0.0.1:%d: %w (set HARNESS_PORT or -port to use another port)", *port, err)
	}
	defer ln.Close()

	logDir := filepath.Join(root, ".cache")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	standIns, err := os.Create(filepath.Join(logDir, "stand-ins.log"))
	if err != nil {
		return err
	}
	defer standIns.Close()
	// Agents' bash runs in bubblewrap: found, or installed as make test installs it.
	bwrap, err := devstack.Ensure(ctx, devstack.Bubblewrap, standIns, func() {
		fmt.Printf("installing %s (apt-get install %s)...\n", devstack.Bubblewrap.Name, devstack.Bubblewrap.Pkg)
	})
	if err != nil {
		return err
	}
	os.Setenv(devstack.Bubblewrap.EnvVar, bwrap)
	fmt.Println("starting DynamoDB Local and fauxqs (their output goes to .cache/stand-ins.log)...")
	stack, err := devstack.Start(ctx, root, standIns)
	if err != nil {
		return err
	}
	defer stack.Stop()
	for _, kv := range stack.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}

	cfg, err := awsclient.Config(ctx)
	if err != nil {
		return err
	}
	clients := localrunner.Clients{DB: awsclient.DynamoDB(cfg), SQS: awsclient.SQS(cfg), S3: awsclient.S3(cfg)}
	res, err := localrunner.Provision(ctx, clients, tpl, "harness-")
	if err != nil {
		return err
	}
	tavilyNote, stopTavily, err := localTavily()
	if err != nil {
		return err
	}
	defer stopTavily()
	chats, chatNotes, stopChats, err := localChats()
	if err != nil {
		return err
	}
	defer stopChats()
	mcpNote, stopMCP, err := localMCP(stack.Node, root, standIns, seed)
	if err != nil {
		return err
	}
	defer stopMCP()
	natsNote, stopNATS, err := localNATS()
	if err != nil {
		return err
	}
	defer stopNATS()
	logger := logging.New(os.Stderr, os.Getenv("LOG_LEVEL"))
	adminSecret := os.Getenv("ADMIN_SECRET")
	if adminSecret == "" {
		adminSecret = "hadm_" + rand.Text()
		os.Setenv("ADMIN_SECRET", adminSecret)
	}
	// Local model servers on 127.0.0.1 are the point of make dev; set the variable (even empty)
	// to try the guard that keeps agents' base URLs off private addresses.
	if _, ok := os.LookupEnv(egress.AllowVar); !ok {
		os.Setenv(egress.AllowVar, "allow")
	}
	url := "http://" + ln.Addr().String()
	h, err := localrunner.New(localrunner.Options{
		Template: tpl, DB: clients.DB, SQS: clients.SQS, S3: clients.S3, Name: res.Name,
		Getenv: os.Getenv, Logger: logger, BaseURL: url, ScheduleEvery: *sweepEvery,
	})
	if err != nil {
		return err
	}
	acc, secret, err := h.Seed(ctx, seed, time.Now())
	if err != nil {
		return err
	}

	// The playground is make dev's own page, served beside the API on its origin.
	mux := http.NewServeMux()
	mux.Handle("/playground", playground.Handler())
	mux.Handle("/playground/", playground.Handler())
	mux.Handle("/", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if err := h.Start(ctx); err != nil {
		return err
	}
	defer h.Stop()
	if !slices.ContainsFunc(seed.Agents, func(a localrunner.SeedAgent) bool { return a.AgentID == chatAgent }) {
		chats = nil
	}
	chatCommands, err := bindChats(ctx, url, secret, chats)
	if err != nil {
		return err
	}

	env := append(stack.Env(),
		"HARNESS_URL="+url,
		"HARNESS_SECRET="+secret,
		"EXTERNAL_JOBS_QUEUE_URL="+res.QueueURLs["ExternalJobsQueue"],
		"ASYNC_WORK_QUEUE_URL="+res.QueueURLs["AsyncWorkQueue"],
	)
	if err := writeEnvFile(*envPath, env); err != nil {
		return err
	}
	defer os.Remove(*envPath)

	agentID := seed.Agents[0].AgentID
	searchCurl := ""
	for _, a := range seed.Agents {
		if a.AgentID == searchAgent {
			searchCurl = fmt.Sprintf(`
Run a web search through tavilySearch (%s):

  curl -N %s/ -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{"agentId":"%s","message":"How do async tools work?"}'
`, tavilyNote, url, secret, searchAgent)
		}
	}
	for _, sc := range showcases {
		for _, a := range seed.Agents {
			if a.AgentID == sc.agentID {
				searchCurl += fmt.Sprintf(`
Run an agent with %s:

  curl -N %s/ -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{"agentId":"%s","message":"%s"}'
`, sc.about, url, secret, sc.agentID, sc.message)
				if sc.afterwards != "" {
					searchCurl += fmt.Sprintf(`
and then %s:

  curl %s%s -H 'Authorization: Bearer %s'
`, sc.afterwards, url, sc.path, secret)
				}
			}
		}
	}
	fmt.Printf("wrote %s: `source %s` in another shell for HARNESS_URL, HARNESS_SECRET, the AWS endpoints and the queue URLs\n", *envPath, *envPath)
	fmt.Printf(`
Harness is running at %s
  stand-ins: DynamoDB Local at %s, fauxqs (SQS, S3) at %s, %s
  account %s (%s), agent %q, model: %s
  account secret (shown once): %s
  admin secret (for POST /accounts): %s

Open the playground, a chat page built on the AI SDK's useChat, and sign in with the account secret
and an end-user name (any, such as alice), whose token the page chats with:

  %s/playground/

Run a turn of the demo agent:

  curl -N %s/ -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{"agentId":"%s","message":"What time is it?"}'
%s%s%s%s
Create an account of your own (the answer holds its secret), then agents with POST /accounts/me/agents:

  curl %s/accounts -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{"username":"me"}'

Ctrl-C stops everything.
`, url, stack.DynamoDB, stack.SQS, mcpNote, acc.ID, acc.Username, agentID, modelNote, secret, adminSecret, url, url, secret, agentID, searchCurl, chatCommands, chatNotes, fmt.Sprintf(natsNote, url, secret), url, adminSecret)

	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("local runner stopped: %w", err)
	}
	fmt.Println("\nstopping...")
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// searchAgent is the seeded agent whose curl shows a tavilySearch round trip.
const searchAgent = "search-demo"

// showcases are seeded agents whose curls make dev prints too, with what each shows, and what
// to read afterwards (a GET of path), if anything.
var showcases = []struct{ agentID, about, message, afterwards, path string }{
	{"prompt-demo", "a prompt tool (its nested loop streams as data-prompt-tool parts)", "Headline the latest change.", "", ""},
	{"skills-demo", "two skills (listed in its system prompt, loaded with load_skill)", "Draft the release notes for this week.", "", ""},
	{"mcp-demo", "an MCP server's tool (the reference server's get-sum, called as everything__get-sum)", "What is 2 + 3?", "", ""},
	{"workspace-demo", "a workspace and the sandbox (bash writes hello.txt in bubblewrap, read reads it back)", "Write a greeting to a file.",
		"read the file from the workspace, a new version of it", "/accounts/me/workspaces/notes/files/hello.txt"},
}

// localTavily serves a local fake of Tavily's API for tavilySearch and tavilyExtract unless the
// environment names the real service (TAVILY_API_KEY) or another one (TAVILY_BASE_URL), so the
// Tavily tools work with no account. It says where the tools go and returns how to stop it.
func localTavily() (note string, stop func(), err error) {
	if os.Getenv("TAVILY_API_KEY") != "" || os.Getenv("TAVILY_BASE_URL") != "" {
		return "Tavily at " + cmp.Or(os.Getenv("TAVILY_BASE_URL"), "https://api.tavily.com"), func() {}, nil
	}
	base, stop, err := serveLocal(faketavily.New(&faketavily.Options{Documents: faketavily.DemoDocuments}))
	if err != nil {
		return "", nil, fmt.Errorf("starting the local fake Tavily: %w", err)
	}
	// Any non-empty key passes the fake; agents need not name one.
	os.Setenv("TAVILY_BASE_URL", base)
	os.Setenv("TAVILY_API_KEY", "tvly-local-fake")
	return "a local fake Tavily at " + base + "; set TAVILY_API_KEY for the real one", stop, nil
}

// serveLocal serves h on a free port of 127.0.0.1 and returns its URL and how to stop it.
func serveLocal(h http.Handler) (base string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// envKeys are the variables .dev.env exports, in order.
var envKeys = []string{
	"HARNESS_URL", "HARNESS_SECRET",
	"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3",
	"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
	"EXTERNAL_JOBS_QUEUE_URL", "ASYNC_WORK_QUEUE_URL",
}

// writeEnvFile writes the envKeys of env (KEY=value lines) as export lines a shell can source.
// The file holds the account secret, so only its owner may read it.
func writeEnvFile(path string, env []string) error {
	values := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		values[k] = v
	}
	var b strings.Builder
	b.WriteString("# Written by make dev for a second shell: source this file. Removed when make dev stops.\n")
	for _, k := range envKeys {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(values[k]))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// shellQuote single-quotes s for the shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// useRealModel points the seeded scripted agents (the demo) at an OpenAI-compatible model when
// OPENAI_API_KEY or OPENAI_BASE_URL is set; the key itself stays in the environment, never in
// the table. Agents that already name a real provider keep it.
func useRealModel(seed *localrunner.SeedFile) string {
	key, base := os.Getenv("OPENAI_API_KEY"), os.Getenv("OPENAI_BASE_URL")
	if key == "" && base == "" {
		return "scripted (set OPENAI_API_KEY or OPENAI_BASE_URL for a real model)"
	}
	modelName := os.Getenv("OPENAI_MODEL")
	if modelName == "" {
		modelName = "gpt-4o-mini"
	}
	block, _ := json.Marshal(map[string]string{"provider": "openai", "model": modelName, "baseURL": base})
	if base == "" {
		block, _ = json.Marshal(map[string]string{"provider": "openai", "model": modelName})
	}
	for i, a := range seed.Agents {
		var cfg map[string]json.RawMessage
		var head struct {
			Provider string `json:"provider"`
		}
		if err := json.Unmarshal(a.Config, &cfg); err == nil && json.Unmarshal(cfg["model"], &head) == nil && head.Provider == "scripted" {
			cfg["model"] = block
			seed.Agents[i].Config, _ = json.Marshal(cfg)
		}
	}
	return "openai " + modelName
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
