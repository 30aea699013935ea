package localrunner_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/mockopenai"
	"github.com/agentharness/harness/infra/natsserver"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/natsturns"
)

// The deployment's own secrets (its model and Tavily keys, its NATS credentials and signing
// seed, the admin secret, the sealing key, the function role's AWS credentials) authenticate the
// harness's own calls and never become data: no value an account configures or sends may name
// an environment variable and get its value back. TestEnvironmentCanaries sets a canary in each
// and looks for it everywhere data goes; TestEveryEnvironmentVariableIsClassified makes a
// variable the code starts reading join one of the lists below, and
// TestNoNameFromAConfigReadsTheEnvironment refuses code that reads the environment by a name it
// is given.

// secretVars are the secret-bearing variables the functions read (the AWS SDK reads the
// role's credentials), each given a canary.
var secretVars = []string{
	"ADMIN_SECRET", "ANTHROPIC_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
	"GEMINI_API_KEY", "GOOGLE_API_KEY", "NATS_ACCOUNT_SIGNING_SEED", "NATS_CREDS", "NATS_NKEY_SEED",
	"OPENAI_API_KEY", "SECRETS_LOCAL_KEY", "TAVILY_API_KEY",
}

// unreadVars are secrets of the process the functions never read (another program's), given
// canaries too: a name an account chooses reaches them as easily.
var unreadVars = []string{"DATABASE_PASSWORD", "GITHUB_TOKEN", "STRIPE_SECRET_KEY"}

// notSecretVars are the variables the functions read that hold no secret: resource names and
// addresses, switches, limits, and the names of secrets kept elsewhere.
var notSecretVars = []string{
	"ACCOUNTS_TABLE", "ACCOUNT_SIGNUP", "AGENTS_TABLE", "AGENT_SERVICE_URL", "APPROVALS_TABLE", "APPROVAL_TIMEOUT",
	"ASYNC_RESULTS_BUCKET", "ASYNC_RESULTS_TABLE", "ASYNC_TOOL_TIMEOUT", "ASYNC_WORK_QUEUE_URL",
	"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_SQS",
	"ANTHROPIC_API_KEY_SECRET", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "AWS_PROFILE", "CHANNELS_TABLE", "CONNECTIONS_TABLE", "CONVERSATIONS_TABLE", "EVENTS_TABLE",
	"EXTERNAL_JOBS_QUEUE_URL", "GOGC", "GOOGLE_API_KEY_SECRET", "GOMAXPROCS", "GOMEMLIMIT", "HARNESS_BWRAP", "HARNESS_CPUPROFILE", "LOG_LEVEL",
	"MCP_PRIVATE_ENDPOINTS", "MODEL_PRIVATE_ENDPOINTS", "NATS_ACCOUNT", "NATS_ACCOUNT_SIGNING_SEED_SECRET",
	"NATS_CLIENT_URLS", "NATS_CREDENTIALS_TTL", "NATS_CREDS_SECRET", "NATS_REPLICAS", "NATS_STREAM", "NATS_URL",
	"OPENAI_API_KEY_SECRET", "OPENAI_BASE_URL", "SANDBOX_BACKEND", "SANDBOX_FUNCTION", "SECRETS_KMS_KEY_ID", "SKILLS_BUCKET", "SKILLS_TABLE", "SLACK_API_URL", "STREAMS_TABLE",
	"STREAM_RETENTION", "TAVILY_API_KEY_SECRET", "TAVILY_BASE_URL", "TELEGRAM_API_URL", "TURN_TREE_MAX_DEPTH", "TURN_TREE_MAX_TURNS",
	"WEBSOCKET_ENDPOINT", "WORKSPACES_BUCKET", "WORKSPACES_TABLE",
}

// TestEveryEnvironmentVariableIsClassified fails on a variable the functions read that is
// neither a secret (secretVars, which TestEnvironmentCanaries gives a canary) nor known to hold
// none (notSecretVars): a secret added later extends the canary test.
func TestEveryEnvironmentVariableIsClassified(t *testing.T) {
	known := map[string]bool{}
	for _, v := range slices.Concat(secretVars, notSecretVars) {
		known[v] = true
	}
	read, _ := envNamesRead(t)
	if len(read) < 30 || read["OPENAI_API_KEY"] == "" || read["ACCOUNTS_TABLE"] == "" {
		t.Fatalf("found %d variables the functions read, among them no OPENAI_API_KEY or ACCOUNTS_TABLE: the scan looked in the wrong place", len(read))
	}
	for _, name := range slices.Sorted(maps.Keys(read)) {
		if !known[name] {
			t.Errorf("%s reads %s, which is in neither secretVars nor notSecretVars: a secret goes in secretVars, which gives it a canary", read[name], name)
		}
	}
}

// fixedNameReaders are the functions that read the environment by a name they are given, each
// given only names the code spells (which envNamesRead collects from their callers, or from
// lambdadeps.Config's tags).
var fixedNameReaders = []string{
	"shared/lambda/lambdadeps/config.go ConfigFrom", // lambdadeps.Config's variables, its fields' tags
	"shared/wire/awsclient/awsclient.go isSet",
	"shared/tool/builtintools/tools.go context", // a builtin tool's own variables, Spec.Variables
	"shared/model/modeltest/calls.go APIKey",    // the provider tests' keys, when fixtures are recorded
}

// TestNoNameFromAConfigReadsTheEnvironment fails on a function that reads the environment by a
// name it is given, unless it is one of fixedNameReaders: a name an account configures or sends
// must never reach the environment (a thread's variables are read through threadvars.Thread).
func TestNoNameFromAConfigReadsTheEnvironment(t *testing.T) {
	_, byName := envNamesRead(t)
	if !slices.Contains(byName, "shared/lambda/lambdadeps/config.go ConfigFrom") {
		t.Fatalf("found %v reading the environment by a name they are given, not lambdadeps' ConfigFrom: the scan looked in the wrong place", byName)
	}
	for _, f := range byName {
		if !slices.Contains(fixedNameReaders, f) {
			t.Errorf("%s reads the environment by a name it is given: no name an account configures or sends may reach the environment; read the thread's variables (threadvars.Thread), or, if every name it gets is spelled in the code, add it to fixedNameReaders", f)
		}
	}
}

// envName is the grammar of an environment variable's name as the code spells them.
var envName = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)

// envNamesRead are the variables the functions read, each with where it is read: those
// template.yaml sets for any function, those of lambdadeps.Config (the functions' config, read
// once at start), and those the Go code under shared/ and functions/ reads by name: a name (a
// string constant, or a constant's name) passed to a call that reads the environment (Getenv,
// getenv, LookupEnv, or a function that calls one), or passed along with such a reader, and the
// names of the builtin tools' variables (builtintools.Variable), which resolve from the
// environment last. byName are the functions ("file func") that read a variable by a name they
// are given, not one the code spells.
func envNamesRead(t *testing.T) (read map[string]string, byName []string) {
	t.Helper()
	read = map[string]string{}
	tpl := testenv.Template(t)
	for _, fn := range tpl.Functions() {
		env, err := tpl.FunctionEnv(fn, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		for name := range env {
			read[name] = "template.yaml (" + fn.LogicalID + ")"
		}
	}
	for _, name := range lambdadeps.Variables() {
		read[name] = "lambdadeps.Config"
	}
	root := testenv.Root(t)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, dir := range []string{"shared", "functions"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err == nil {
				files = append(files, f)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	consts := map[string]string{} // string constants by name
	baseReaders := map[string]bool{"Getenv": true, "getenv": true, "LookupEnv": true}
	readers := maps.Clone(baseReaders)
	var funcs []*ast.FuncDecl
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := stringLit(vs.Values[i]); ok {
								consts[name.Name] = s
							}
						}
					}
				}
			case *ast.FuncDecl:
				funcs = append(funcs, d)
			}
		}
	}
	name := func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.Ident:
			return e.Name
		case *ast.SelectorExpr:
			return e.Sel.Name
		}
		return ""
	}
	// A function that reads a variable whose name it is given reads the environment too
	// (isSet, duration, serviceKey): its callers' names count, and it is one of the readers by
	// a name not in the code.
	for _, fd := range funcs {
		if fd.Body == nil {
			continue
		}
		where, _ := filepath.Rel(root, fset.Position(fd.Pos()).Filename)
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok || !baseReaders[name(c.Fun)] || len(c.Args) == 0 {
				return true
			}
			if _, lit := stringLit(c.Args[0]); !lit && consts[name(c.Args[0])] == "" && !slices.Contains(byName, where+" "+fd.Name.Name) {
				readers[fd.Name.Name] = true
				byName = append(byName, where+" "+fd.Name.Name)
			}
			return true
		})
	}
	for _, f := range files {
		where := fset.Position(f.Pos()).Filename
		where, _ = filepath.Rel(root, where)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				reads := readers[name(n.Fun)]
				for _, a := range n.Args {
					reads = reads || readers[name(a)]
				}
				if !reads {
					return true
				}
				for _, a := range n.Args {
					s, ok := stringLit(a)
					if !ok {
						s, ok = consts[name(a)]
					}
					if ok && envName.MatchString(s) {
						read[s] = where
					}
				}
			case *ast.CompositeLit:
				if name(n.Type) != "Variable" {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok && name(kv.Key) == "Name" {
						if s, ok := stringLit(kv.Value); ok && envName.MatchString(s) {
							read[s] = where
						}
					}
				}
			}
			return true
		})
	}
	return read, byName
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// canaryFlag is set to "true" in the functions' environment: a subagent whose optional flag
// names it must not be offered, the environment being no thread's.
const canaryFlag = "CANARY_FLAG"

// canary is a variable set for the functions and the texts of it that must appear nowhere.
type canary struct {
	name, value string
	// needles are the value and, when the value holds its secret among public parts (a creds
	// file), that secret alone.
	needles []string
}

// canaries gives every variable of secretVars and unreadVars a value of its own, valid where
// the code parses it: real NATS credentials and signing seed from ns, a 32-byte sealing key.
func canaries(t *testing.T, ns *natsserver.Server) []canary {
	t.Helper()
	random := func() string {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	var out []canary
	for _, name := range slices.Concat(secretVars, unreadVars) {
		c := canary{name: name, value: "canary-" + name + "-" + random()}
		switch name {
		case "NATS_CREDS":
			kp, err := jwt.ParseDecoratedUserNKey([]byte(ns.HarnessCreds))
			if err != nil {
				t.Fatal(err)
			}
			seed, _ := kp.Seed()
			c.value, c.needles = ns.HarnessCreds, []string{string(seed)}
		case "NATS_ACCOUNT_SIGNING_SEED":
			c.value = ns.ClientSigningSeed
		case "NATS_NKEY_SEED":
			kp, err := nkeys.CreateUser()
			if err != nil {
				t.Fatal(err)
			}
			seed, _ := kp.Seed()
			c.value = string(seed)
		case "SECRETS_LOCAL_KEY":
			// 32 bytes that read as a canary, standard base64 without + or / so the text is the
			// same in JSON and in URLs.
			for {
				key := base64.StdEncoding.EncodeToString([]byte(("canary-SECRETS_LOCAL_KEY-" + random())[:32]))
				if !strings.ContainsAny(key, "+/") {
					c.value, c.needles = key, []string{strings.TrimRight(key, "=")}
					break
				}
			}
		}
		if c.needles == nil {
			c.needles = []string{c.value}
		}
		out = append(out, c)
	}
	return out
}

// fake is a local stand-in of an outside service (a model API, Tavily, an MCP server) that
// records every request it gets whole: method, URL, headers and body.
type fake struct {
	*httptest.Server
	name string
	// authHeader is where the deployment's own key, the value of authVar, may go: the one place
	// an operator's key belongs. Empty: the service gets no key of the deployment's.
	authHeader, authVar string

	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func newFake(t *testing.T, name string, h http.Handler, authHeader, authVar string) *fake {
	t.Helper()
	f := &fake{name: name, authHeader: authHeader, authVar: authVar}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.mu.Lock()
		f.reqs, f.body = append(f.reqs, r.Clone(context.Background())), append(f.body, body)
		f.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// requests returns what the fake received, one text per request, and the values of authHeader.
func (f *fake) requests() (texts, auth []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.reqs {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL)
		for k, vs := range r.Header {
			if http.CanonicalHeaderKey(k) == http.CanonicalHeaderKey(f.authHeader) {
				auth = append(auth, vs...)
				continue
			}
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(vs, ", "))
		}
		b.Write(f.body[i])
		texts = append(texts, b.String())
	}
	return texts, auth
}

// replay answers every request with the first response of a recorded wire fixture.
func replay(t *testing.T, fixture string) http.Handler {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Root(t), fixture))
	if err != nil {
		t.Fatal(err)
	}
	var exchanges []wirefixture.Exchange
	if err := json.Unmarshal(b, &exchanges); err != nil || len(exchanges) == 0 {
		t.Fatalf("fixture %s: %v", fixture, err)
	}
	res := exchanges[0].Response
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range res.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(res.Status)
		_, _ = io.WriteString(w, res.Body)
	})
}

// echoMCP is an MCP server with one tool, echo, that returns its text.
func echoMCP() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Text string }
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + args.Text}}}, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

// echoScript answers with the last message's text, whatever tools are offered.
func echoScript(r *mockopenai.Request) mockopenai.Reply {
	return mockopenai.Reply{Text: "You said: " + r.Messages[len(r.Messages)-1].Text()}
}

// answers records the body of every answer the runner gives a client, as the client reads it.
type answers struct {
	base http.RoundTripper
	mu   sync.Mutex
	all  []*bytes.Buffer
	what []string
}

func (a *answers) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := a.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	buf := &bytes.Buffer{}
	for k, vs := range res.Header {
		fmt.Fprintf(buf, "%s: %s\n", k, strings.Join(vs, ", "))
	}
	a.mu.Lock()
	a.all, a.what = append(a.all, buf), append(a.what, r.Method+" "+r.URL.Path)
	a.mu.Unlock()
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(res.Body, lockedWriter{&a.mu, buf}), res.Body}
	return res, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestEnvironmentCanaries runs every function of the template, agents of every tool family and
// every config key that names a variable, with a canary in every secret-bearing variable of the
// functions' environment (and in some they never read), then looks for the canaries in every
// answer and stream a client got, WebSocket frames, table items, S3 objects, NATS messages, log
// lines and request to a model, Tavily or an MCP server. A deployment's key may be only in the
// auth header of its own service's requests.
func TestEnvironmentCanaries(t *testing.T) {
	ns, err := natsserver.Start(natsserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	cs := canaries(t, ns)
	env := map[string]string{canaryFlag: "true"}
	for _, c := range cs {
		env[c.name] = c.value
	}

	operator := newFake(t, "the operator's OpenAI-compatible endpoint", mockopenai.New(&mockopenai.Options{Script: echoScript}), "Authorization", "OPENAI_API_KEY")
	own := newFake(t, "an account's OpenAI-compatible endpoint", mockopenai.New(&mockopenai.Options{Script: echoScript}), "", "")
	anthropic := newFake(t, "an account's Anthropic base URL", replay(t, "shared/model/anthropicmodel/testdata/text.json"), "", "")
	google := newFake(t, "an account's Gemini base URL", replay(t, "shared/model/googlemodel/testdata/text.json"), "", "")
	tavily := newFake(t, "Tavily", faketavily.New(&faketavily.Options{APIKey: env["TAVILY_API_KEY"], Documents: []faketavily.Document{
		{URL: "https://example.com/harness", Title: "Harness", Content: "A harness for agents."},
	}}), "Authorization", "TAVILY_API_KEY")
	notes := newFake(t, "an MCP server", echoMCP(), "", "")
	fakes := []*fake{operator, own, anthropic, google, tavily, notes}
	settings := map[string]string{
		"OPENAI_BASE_URL": operator.URL + "/v1", "TAVILY_BASE_URL": tavily.URL,
		"MODEL_PRIVATE_ENDPOINTS": "allow", "MCP_PRIVATE_ENDPOINTS": "allow",
		"NATS_URL": ns.URL, "NATS_ACCOUNT": ns.ClientAccount,
	}
	for k, v := range settings {
		env[k] = v
	}

	var logs bytes.Buffer
	var logMu sync.Mutex
	stack := testenv.Stack(t)
	opts := stack.Options(func(k string) string { return env[k] })
	opts.Logger = slog.New(slog.NewJSONHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r, srv := testenv.Serve(t, opts)
	heard := &answers{base: srv.Client().Transport}
	srv.Client().Transport = heard
	e := &asyncEnv{stack: stack, runner: r, srv: srv, logs: &logRecorder{}, store: store.New(stack.DB, stack.Tables)}
	e.accountID, e.secret = canaryAccount(t, srv, env["ADMIN_SECRET"], "canary")

	// The agents: one of each provider pointed at a local fake (the operator's endpoint takes
	// the operator's key; an account's endpoints get the account's key or none), one that uses
	// every builtin tool family, a prompt tool, a skill and an MCP server, and callers of
	// subagents, blocking, not, immediate with every canary named by nameEnv, descriptionEnv and
	// scopedEnv, and optional ones.
	operatorBlock := `{"provider": "openai", "model": "mock", "baseURL": "` + env["OPENAI_BASE_URL"] + `"}`
	echoer := e.agent(t, `{"agentId": "echoer", "name": "echoer", "model": `+operatorBlock+`}`)
	ownAgent := e.agent(t, `{"name": "own", "model": {"provider": "openai", "model": "mock", "baseURL": "`+own.URL+`/v1"}}`)
	claude := e.agent(t, `{"name": "claude", "model": {"provider": "anthropic", "model": "claude-haiku-4-5", "apiKey": "sk-ant-the-accounts-own", "baseURL": "`+anthropic.URL+`"}}`)
	gemini := e.agent(t, `{"name": "gemini", "model": {"provider": "google", "model": "gemini-2.5-flash", "apiKey": "the-accounts-own-google-key", "baseURL": "`+google.URL+`"}}`)
	if res := call(t, srv, http.MethodPost, "/accounts/me/skills", e.secret, string(filesJSON(t, "SKILL.md", "---\nname: canary-check\ndescription: Checks canaries.\n---\nLook everywhere.\n"))); res.status != http.StatusCreated {
		t.Fatalf("uploading a skill = %d %s", res.status, res.body)
	}
	worker := e.agent(t, `{"name": "worker", "model": {"provider": "scripted", "script": [
		{"toolCalls": [{"name": "current_time", "input": {}}, {"name": "tavilySearch", "input": {"query": "harness"}},
			{"name": "test_async", "input": {"echo": "async", "delayMs": 10}}, {"name": "summarize", "input": {"message": "sum it up"}},
			{"name": "notes__echo", "input": {"text": "a note"}}, {"name": "load_skill", "input": {"name": "canary-check"}}]},
		{"text": "Worker heard: {{toolResults}}"}]},
		"tools": {"current_time": {}, "tavilySearch": {}, "test_async": {"async": true}},
		"prompts": {"summarize": {"system": "Summarize.", "model": `+operatorBlock+`}},
		"skills": ["canary-check"],
		"mcpServers": {"notes": {"url": "`+notes.URL+`"}}}`)
	dispatcher := e.agent(t, `{"name": "dispatcher", "model": {"provider": "scripted", "script": [
		{"toolCalls": [{"name": "test_external_async", "input": {"echo": "job"}}]}, {"text": "Dispatched: {{toolResults}}"}]},
		"tools": {"test_external_async": {"async": true, "execution": "external-dispatch"}}}`)
	plannerID := e.agent(t, planner(`{"agents": [{"name": "own", "agentId": "`+ownAgent+`"}, {"name": "claude", "agentId": "`+claude+`", "blocking": false}]}`,
		ask("own", "hi own"), ask("claude", "hi claude")))
	names := slices.Concat(secretVars, unreadVars)
	var entries []string
	for i := 0; i < len(names); i += 2 {
		entries = append(entries, fmt.Sprintf(`{"name": "brief_%d", "agentId": "%s", "immediate": {"nameEnv": %q, "descriptionEnv": %q, "scopedEnv": %s}}`,
			i/2, echoer, names[i], names[(i+1)%len(names)], mustJSON(t, names)))
	}
	entries = append(entries,
		`{"name": "env_flagged", "agentId": "`+gemini+`", "optional": "`+canaryFlag+`", "immediate": true}`,
		`{"name": "thread_flagged", "agentId": "`+gemini+`", "optional": "THREAD_FLAG", "immediate": true}`)
	e.agent(t, `{"agentId": "briefed", "name": "briefed", "model": {"provider": "scripted", "script": [{"text": "Briefed: {{toolResults}}"}]},
		"subagent": {"maxChildrenPerTurn": 20, "agents": [`+strings.Join(entries, ",")+`]}}`)

	// Turns over SSE (harness-processing).
	briefed := e.stream(t, `{"agentId": "briefed", "id": "canary-briefed", "message": "brief me", "variables": {"THREAD_FLAG": "yes", "TOPIC": "canaries"}}`)
	called := map[string]bool{}
	for _, c := range chunksOf(briefed, "tool-input-available") {
		called[c["toolName"].(string)] = true
	}
	if !called["brief_0"] || !called["thread_flagged"] || called["env_flagged"] {
		t.Errorf("the immediate calls were %v: want brief_0 and thread_flagged (its flag is a thread variable), not env_flagged (its flag is only in the environment)", called)
	}
	var children []string
	for _, c := range chunksOf(briefed, "data-subagent") {
		data, _ := c["data"].(map[string]any)
		if id, _ := data["threadId"].(string); id != "" && !slices.Contains(children, id) {
			children = append(children, id)
			if ev, _ := data["eventId"].(string); ev != "" {
				e.status(t, ev)
			}
		}
	}
	if len(children) != len(entries)-1 {
		t.Errorf("the immediate calls ran %d children, want %d", len(children), len(entries)-1)
	}
	// scopedEnv copies the caller's variables: a child's thread holds no name its caller's lacks.
	for _, child := range children {
		head, err := e.store.ConversationHead(context.Background(), e.accountID, child)
		if err != nil {
			t.Fatal(err)
		}
		var extra []string
		for name := range head.Vars {
			if name != "THREAD_FLAG" && name != "TOPIC" {
				extra = append(extra, name)
			}
		}
		if len(extra) > 0 {
			slices.Sort(extra)
			t.Errorf("the child thread %s holds variables its caller's thread does not: %v", child, extra)
		}
	}
	if text := streamText(e.stream(t, `{"agentId": "`+worker+`", "id": "canary-worker", "message": "work"}`)); !strings.Contains(text, "A harness for agents.") || !strings.Contains(text, "echo: a note") {
		t.Errorf("the worker answered %q, want its search's and its MCP call's results", text)
	}
	// The environment satisfies no variable an agent declares: those are the thread's.
	needy := e.agent(t, `{"name": "needy", "model": {"provider": "scripted", "script": [{"text": "ran"}]}, "variables": [{"name": "AWS_SECRET_ACCESS_KEY", "required": true}]}`)
	if res := call(t, srv, http.MethodPost, "/", e.secret, `{"agentId": "`+needy+`", "message": "go"}`); res.status != http.StatusBadRequest || res.json(t)["field"] != "variables.AWS_SECRET_ACCESS_KEY" {
		t.Errorf("a turn of an agent requiring AWS_SECRET_ACCESS_KEY, which the thread lacks = %d %s, want 400 naming the variable", res.status, res.body)
	}

	// /async turns (async-worker): subagents blocking and not; an external-dispatch call
	// completed through async-tool-complete.
	plan := e.async(t, `{"agentId": "`+plannerID+`", "message": "plan it"}`)
	dispatch := e.async(t, `{"agentId": "`+dispatcher+`", "message": "dispatch it"}`)
	for _, j := range e.jobs(t, 1) {
		if res := e.complete(t, j); res.status/100 != 2 {
			t.Fatalf("completing the job = %d %s", res.status, res.body)
		}
	}
	for _, ev := range []started{plan, dispatch} {
		e.waitStatus(t, ev.EventID, store.EventCompleted)
		call(t, srv, http.MethodGet, "/chat/"+ev.ConversationID+"/stream", e.secret, "")
	}
	asyncBriefed := e.async(t, `{"agentId": "briefed", "message": "brief me again"}`)
	final, _ := e.waitStatus(t, asyncBriefed.EventID, store.EventCompleted)
	for _, c := range final.Children {
		e.status(t, c.EventID)
	}
	call(t, srv, http.MethodGet, "/chat/canary-briefed/stream", e.secret, "")
	call(t, srv, http.MethodGet, "/chat/canary-briefed/subagents", e.secret, "")

	// The App Server WebSocket (ws-gateway, and async-worker's part of its turns).
	ws, _, err := dialWS(t, srv, e.secret, "")
	if err != nil {
		t.Fatal(err)
	}
	ws.send(map[string]any{"type": "runtime_start", "request_id": "rs-1", "agent_id": "briefed", "create_conversation": map[string]any{"body": map[string]any{}}})
	rs, frames := ws.await("runtime_start_response", asyncWait, typeIs("runtime_start_response"))
	ws.send(map[string]any{"type": "input", "request_id": "in-1", "runtime": rs["runtime"], "payload": map[string]any{
		"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": "brief me over the socket"}},
	}})
	_, rest := ws.await("stop_reason", asyncWait, deltaIs("stop_reason"))
	frames = append(frames, rest...)

	// The harness as an MCP server (POST /mcp).
	host := e.mcpHostSession(t, e.secret)
	ctx, cancel := context.WithTimeout(context.Background(), asyncWait)
	defer cancel()
	if _, err := host.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "run_agent_briefed", Arguments: map[string]any{"message": "brief the host"}}); err != nil {
		t.Fatal(err)
	}

	// account-manage: the account and its agents as configured, NATS credentials signed with
	// the signing seed; then a second account is deleted, and the sweeper and async-worker
	// purge it.
	for _, path := range []string{"/accounts/me", "/accounts/me/agents", "/accounts/me/agents/briefed", "/accounts/me/skills"} {
		call(t, srv, http.MethodGet, path, e.secret, "")
	}
	if res := call(t, srv, http.MethodPost, "/accounts/me/nats-credentials", e.secret, ""); res.status/100 != 2 {
		t.Errorf("POST /accounts/me/nats-credentials = %d %s", res.status, res.body)
	}
	otherID, other := canaryAccount(t, srv, env["ADMIN_SECRET"], "canary-deleted")
	if res := call(t, srv, http.MethodPost, "/accounts/me/agents", other, `{"agentId": "echoer", "name": "echoer", "model": `+operatorBlock+`}`); res.status != http.StatusCreated {
		t.Fatalf("creating the other account's agent = %d %s", res.status, res.body)
	}
	if res := call(t, srv, http.MethodPost, "/", other, `{"agentId": "echoer", "id": "doomed", "message": "hi"}`); res.status != http.StatusOK {
		t.Fatalf("the other account's turn = %d %s", res.status, res.body)
	}
	if res := call(t, srv, http.MethodDelete, "/accounts/me", other, ""); res.status != http.StatusNoContent {
		t.Fatalf("DELETE /accounts/me = %d %s", res.status, res.body)
	}
	for deadline := time.Now().Add(asyncWait); len(testenv.ConversationItems(t, stack.DB, stack.Tables.Conversations, otherID)) > 0; time.Sleep(pollEvery) {
		if time.Now().After(deadline) {
			t.Fatalf("the deleted account's conversations are still there after %s", asyncWait)
		}
	}

	// Every fake was reached, and the operator's keys went where they belong.
	for _, f := range fakes {
		texts, auth := f.requests()
		if len(texts) == 0 {
			t.Errorf("%s got no request: the test does not reach it", f.name)
		}
		if f.authVar != "" && !slices.Contains(auth, "Bearer "+env[f.authVar]) {
			t.Errorf("%s never got the deployment's %s: the test does not use the operator's key", f.name, f.authVar)
		}
	}

	// Nowhere a canary: what the client got, what is stored, logged, published or sent out.
	look := newLookout(cs)
	heard.mu.Lock()
	for i, b := range heard.all {
		look.in("the answer to "+anID.ReplaceAllString(heard.what[i], "{id}"), b.String())
	}
	heard.mu.Unlock()
	for _, f := range frames {
		look.in("a WebSocket frame", string(mustJSON(t, f)))
	}
	logMu.Lock()
	for _, line := range strings.Split(logs.String(), "\n") {
		look.in("a log line", line)
	}
	logMu.Unlock()
	for _, tbl := range stack.Template.Tables() {
		name := stack.Name(tbl.LogicalID)
		p := dynamodb.NewScanPaginator(stack.DB, &dynamodb.ScanInput{TableName: &name})
		for p.HasMorePages() {
			page, err := p.NextPage(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, item := range page.Items {
				look.in("an item of "+tbl.LogicalID, itemText(item))
			}
		}
	}
	for _, b := range stack.Template.Buckets() {
		bucket := stack.Name(b.LogicalID)
		p := s3.NewListObjectsV2Paginator(stack.S3, &s3.ListObjectsV2Input{Bucket: &bucket})
		for p.HasMorePages() {
			page, err := p.NextPage(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Contents {
				obj, err := stack.S3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &bucket, Key: o.Key})
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(obj.Body)
				obj.Body.Close()
				look.in("the object "+*o.Key+" of "+b.LogicalID, *o.Key+"\n"+string(body))
			}
		}
	}
	for _, m := range natsMessages(t, ns) {
		look.in("a NATS message of "+natsturns.DefaultStream, m)
	}
	for _, f := range fakes {
		texts, auth := f.requests()
		for _, text := range texts {
			look.in("a request to "+f.name, text)
		}
		for _, a := range auth {
			look.in("the "+f.authHeader+" header of a request to "+f.name, strings.ReplaceAll(a, env[f.authVar], "[its own key]"))
		}
	}
	look.report(t)
}

// anID is an id in a route, which the places a canary was found are told without.
var anID = regexp.MustCompile(`(evt|conv)_[A-Za-z0-9_.:-]+`)

// canaryAccount creates an account with the admin secret and returns its id and secret.
func canaryAccount(t *testing.T, srv *httptest.Server, admin, username string) (id, secret string) {
	t.Helper()
	res := call(t, srv, http.MethodPost, "/accounts", admin, `{"username":"`+username+`"}`)
	id, _ = res.json(t)["accountId"].(string)
	secret, _ = res.json(t)["secret"].(string)
	if res.status != http.StatusCreated || id == "" || secret == "" {
		t.Fatalf("POST /accounts = %d %s, want 201 with an account", res.status, res.body)
	}
	return id, secret
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// itemText is a table item as text: every attribute's name and value, binary values as bytes.
func itemText(item map[string]types.AttributeValue) string {
	var b strings.Builder
	var write func(types.AttributeValue)
	write = func(v types.AttributeValue) {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			b.WriteString(v.Value)
		case *types.AttributeValueMemberN:
			b.WriteString(v.Value)
		case *types.AttributeValueMemberB:
			b.Write(v.Value)
		case *types.AttributeValueMemberSS:
			b.WriteString(strings.Join(v.Value, " "))
		case *types.AttributeValueMemberNS:
			b.WriteString(strings.Join(v.Value, " "))
		case *types.AttributeValueMemberBS:
			b.Write(bytes.Join(v.Value, []byte(" ")))
		case *types.AttributeValueMemberL:
			for _, x := range v.Value {
				write(x)
				b.WriteString(" ")
			}
		case *types.AttributeValueMemberM:
			for _, k := range slices.Sorted(maps.Keys(v.Value)) {
				b.WriteString(k + "=")
				write(v.Value[k])
				b.WriteString(" ")
			}
		}
	}
	write(&types.AttributeValueMemberM{Value: item})
	return b.String()
}

// natsMessages are every message of the turns' JetStream stream, subject, headers and data.
func natsMessages(t *testing.T, ns *natsserver.Server) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), asyncWait)
	defer cancel()
	s, err := jetStream(t, ns).Stream(ctx, natsturns.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs == 0 {
		t.Fatal("the turns' stream holds no message: the NATS copy is not on")
	}
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %v %s", m.Subject, m.Header, m.Data))
	}
	return out
}

// lookout looks for canaries in texts and keeps where it found them.
type lookout struct {
	canaries []canary
	looked   int
	// places are where each canary was found, in order, and first the first text around it.
	places map[string][]string
	first  map[string]string
}

func newLookout(cs []canary) *lookout {
	return &lookout{canaries: cs, places: map[string][]string{}, first: map[string]string{}}
}

func (l *lookout) in(where, text string) {
	l.looked++
	for _, c := range l.canaries {
		for _, n := range c.needles {
			i := strings.Index(text, n)
			if i < 0 {
				continue
			}
			if l.first[c.name] == "" {
				l.first[c.name] = fmt.Sprintf("%s: …%s…", where, text[max(i-100, 0):min(i+len(n)+100, len(text))])
			}
			l.places[c.name] = append(l.places[c.name], where)
			break
		}
	}
}

// report fails the test once per canary found, naming the places (the first ten kinds, with
// how often) and showing the first.
func (l *lookout) report(t *testing.T) {
	t.Helper()
	if l.looked < 100 {
		t.Errorf("looked in only %d places: the test collects too little", l.looked)
	}
	for _, name := range slices.Sorted(maps.Keys(l.places)) {
		count := map[string]int{}
		var kinds []string
		for _, p := range l.places[name] {
			if count[p] == 0 {
				kinds = append(kinds, p)
			}
			count[p]++
		}
		var lines []string
		for _, k := range kinds[:min(len(kinds), 10)] {
			lines = append(lines, fmt.Sprintf("%s (%d)", k, count[k]))
		}
		if len(kinds) > 10 {
			lines = append(lines, fmt.Sprintf("and %d more", len(kinds)-10))
		}
		t.Errorf("the value of %s is in %d place(s):\n  %s\nthe first: %s", name, len(l.places[name]), strings.Join(lines, "\n  "), l.first[name])
	}
}
