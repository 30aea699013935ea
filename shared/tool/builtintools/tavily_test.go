package builtintools_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/google/go-cmp/cmp"
)

const tavilyKey = "tvly-secret-0123456789"

var tavilyDocs = []faketavily.Document{
	{URL: "https://go.dev/doc/", Title: "Go documentation", Content: "Go is an open source programming language. It is simple."},
	{URL: "https://news.example.com/gophers", Title: "Gophers in the news", Content: "A gopher was seen near the Go team.", PublishedDate: "2025-01-02"},
}

// startTavily runs a faketavily server that accepts tavilyKey.
func startTavily(t *testing.T) (*faketavily.Server, string) {
	t.Helper()
	fake := faketavily.New(&faketavily.Options{APIKey: tavilyKey, Documents: tavilyDocs})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv.URL
}

// envWith is a harness environment pointing Tavily at base, plus the given variables.
func envWith(base string, vars map[string]string) func(string) string {
	return func(name string) string {
		if name == "TAVILY_BASE_URL" {
			return base
		}
		return vars[name]
	}
}

// runTool builds config, prepares one call of name with input and runs it.
func runTool(t *testing.T, cfg string, getenv func(string) string, name, input string) (json.RawMessage, error) {
	t.Helper()
	set, err := builtintools.Build(config(t, cfg), tool.Env{Getenv: getenv})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	call, err := set.Prepare(name, json.RawMessage(input))
	if err != nil {
		t.Fatalf("Prepare(%s, %s): %v", name, input, err)
	}
	return call.Run(context.Background())
}

func decodeJSON(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s is not JSON: %v", raw, err)
	}
	return v
}

func TestTavilyRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		config   string
		env      map[string]string
		tool     string
		input    string
		wantPath string
		wantKey  string // the bearer key on the wire
		wantWire string // the request body on the wire
		want     string // the result the model sees
	}{
		{
			name:     "search with the options as defaults",
			config:   `{"tavilySearch":{"apiKey":"` + tavilyKey + `","maxResults":1,"searchDepth":"advanced","includeAnswer":true,"excludeDomains":["example.org"]}}`,
			tool:     "tavilySearch",
			input:    `{"query":"Go language"}`,
			wantPath: "/search",
			wantKey:  tavilyKey,
			wantWire: `{"query":"Go language","max_results":1,"search_depth":"advanced","include_answer":true,"exclude_domains":["example.org"]}`,
			want: `{"query":"Go language","answer":"Go is an open source programming language.","response_time":0.01,"results":[
				{"title":"Go documentation","url":"https://go.dev/doc/","content":"Go is an open source programming language. It is simple.","score":0.75}]}`,
		},
		{
			name:     "search where the model picks topic and time range over the defaults",
			config:   `{"tavilySearch":{"apiKey":"` + tavilyKey + `","topic":"finance","timeRange":"year","includeDomains":["example.com"]}}`,
			tool:     "tavilySearch",
			input:    `{"query":"gopher","topic":"news","time_range":"week"}`,
			wantPath: "/search",
			wantKey:  tavilyKey,
			wantWire: `{"query":"gopher","topic":"news","time_range":"week","include_domains":["example.com"]}`,
			want: `{"query":"gopher","response_time":0.01,"results":[
				{"title":"Gophers in the news","url":"https://news.example.com/gophers","content":"A gopher was seen near the Go team.","score":0.5,"published_date":"2025-01-02"}]}`,
		},
		{
			name:     "search with the key from the environment",
			config:   `{"tavilySearch":{}}`,
			env:      map[string]string{"TAVILY_API_KEY": tavilyKey},
			tool:     "tavilySearch",
			input:    `{"query":"quantum"}`,
			wantPath: "/search",
			wantKey:  tavilyKey,
			wantWire: `{"query":"quantum"}`,
			want:     `{"query":"quantum","response_time":0.01,"results":[]}`,
		},
		{
			name:     "the config's key wins over the environment's",
			config:   `{"tavilySearch":{"apiKey":"` + tavilyKey + `"}}`,
			env:      map[string]string{"TAVILY_API_KEY": "tvly-service-wide"},
			tool:     "tavilySearch",
			input:    `{"query":"quantum"}`,
			wantPath: "/search",
			wantKey:  tavilyKey,
			wantWire: `{"query":"quantum"}`,
			want:     `{"query":"quantum","response_time":0.01,"results":[]}`,
		},
		{
			name:     "extract with one failed url",
			config:   `{"tavilyExtract":{"apiKey":"` + tavilyKey + `","extractDepth":"advanced","format":"text"}}`,
			tool:     "tavilyExtract",
			input:    `{"urls":["https://go.dev/doc/","https://example.com/gone"]}`,
			wantPath: "/extract",
			wantKey:  tavilyKey,
			wantWire: `{"urls":["https://go.dev/doc/","https://example.com/gone"],"extract_depth":"advanced","format":"text"}`,
			want: `{"response_time":0.01,
				"results":[{"url":"https://go.dev/doc/","raw_content":"Go documentation\n\nGo is an open source programming language. It is simple."}],
				"failed_results":[{"url":"https://example.com/gone","error":"Failed to fetch url"}]}`,
		},
		{
			name:     "extract with the key from the environment and Tavily's defaults",
			config:   `{"tavilyExtract":null}`,
			env:      map[string]string{"TAVILY_API_KEY": tavilyKey},
			tool:     "tavilyExtract",
			input:    `{"urls":["https://go.dev/doc/"]}`,
			wantPath: "/extract",
			wantKey:  tavilyKey,
			wantWire: `{"urls":["https://go.dev/doc/"]}`,
			want: `{"response_time":0.01,"failed_results":[],
				"results":[{"url":"https://go.dev/doc/","raw_content":"# Go documentation\n\nGo is an open source programming language. It is simple."}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, base := startTavily(t)
			out, err := runTool(t, tt.config, envWith(base, tt.env), tt.tool, tt.input)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff(decodeJSON(t, []byte(tt.want)), decodeJSON(t, out)); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}

			reqs := fake.Requests()
			if len(reqs) != 1 {
				t.Fatalf("Tavily got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != http.MethodPost || r.Path != tt.wantPath {
				t.Errorf("request = %s %s, want POST %s", r.Method, r.Path, tt.wantPath)
			}
			if r.APIKey != tt.wantKey {
				t.Errorf("bearer key = %q, want %q", r.APIKey, tt.wantKey)
			}
			if diff := cmp.Diff(decodeJSON(t, []byte(tt.wantWire)), decodeJSON(t, r.Body)); diff != "" {
				t.Errorf("request body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTavilyFailures(t *testing.T) {
	_, fakeBase := startTavily(t)
	serve := func(h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	tests := []struct {
		name    string
		base    string
		config  string
		tool    string
		input   string
		timeout time.Duration // 0: none beyond the tool's own
		want    []string      // substrings of the error result
		notWant []string
	}{
		{
			name:    "bad key",
			base:    fakeBase,
			config:  `{"tavilySearch":{"apiKey":"tvly-wrong-key"}}`,
			tool:    "tavilySearch",
			input:   `{"query":"go"}`,
			want:    []string{"tavily search", "401", "Unauthorized: missing or invalid API key."},
			notWant: []string{"tvly-wrong-key"},
		},
		{
			name:    "bad key on extract",
			base:    fakeBase,
			config:  `{"tavilyExtract":{"apiKey":"tvly-wrong-key"}}`,
			tool:    "tavilyExtract",
			input:   `{"urls":["https://go.dev/doc/"]}`,
			want:    []string{"tavily extract", "401"},
			notWant: []string{"tvly-wrong-key"},
		},
		{
			name: "an error message that quotes the key",
			base: serve(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusForbidden)
				w.Write([]byte(`{"detail":{"error":"key ` + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + ` is blocked"}}`))
			}),
			config:  `{"tavilySearch":{"apiKey":"` + tavilyKey + `"}}`,
			tool:    "tavilySearch",
			input:   `{"query":"go"}`,
			want:    []string{"403 Forbidden", "key [redacted] is blocked"},
			notWant: []string{tavilyKey},
		},
		{
			name: "a failure without Tavily's error body",
			base: serve(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "upstream down", http.StatusBadGateway)
			}),
			config: `{"tavilySearch":{"apiKey":"` + tavilyKey + `"}}`,
			tool:   "tavilySearch",
			input:  `{"query":"go"}`,
			want:   []string{"tavily search: 502 Bad Gateway"},
		},
		{
			name: "a 2xx body that is not JSON",
			base: serve(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte("<html>"))
			}),
			config: `{"tavilyExtract":{"apiKey":"` + tavilyKey + `"}}`,
			tool:   "tavilyExtract",
			input:  `{"urls":["https://go.dev/doc/"]}`,
			want:   []string{"tavily extract: decoding the response"},
		},
		{
			name: "the caller's deadline",
			base: serve(func(w http.ResponseWriter, r *http.Request) {
				// The server notices the client leaving only once the body is read; the
				// bound keeps a missed notice from holding the server's Close forever.
				io.Copy(io.Discard, r.Body)
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
			}),
			config:  `{"tavilySearch":{"apiKey":"` + tavilyKey + `"}}`,
			tool:    "tavilySearch",
			input:   `{"query":"go"}`,
			timeout: 50 * time.Millisecond,
			want:    []string{"context deadline exceeded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := builtintools.Build(config(t, tt.config), tool.Env{Getenv: envWith(tt.base, nil)})
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			call, err := set.Prepare(tt.tool, json.RawMessage(tt.input))
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			out, err := call.Run(ctx)
			var execErr *tool.ExecError
			if !errors.As(err, &execErr) {
				t.Fatalf("Run() = %s, %v; want a *tool.ExecError (an error result for the model)", out, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q, want it to contain %q", err, w)
				}
			}
			for _, nw := range tt.notWant {
				if strings.Contains(err.Error(), nw) {
					t.Errorf("error = %q, want it not to contain %q", err, nw)
				}
			}
		})
	}
}

func TestTavilyMissingKey(t *testing.T) {
	tests := []struct {
		tool   string
		config string
	}{
		{tool: "tavilySearch", config: `{"tavilySearch":{"maxResults":3}}`},
		{tool: "tavilyExtract", config: `{"tavilyExtract":{"format":"text"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			set, err := builtintools.Build(config(t, tt.config), tool.Env{Getenv: noEnv})
			var missing *builtintools.MissingVariableError
			if !errors.As(err, &missing) {
				t.Fatalf("Build() = %v, %v; want a *builtintools.MissingVariableError", set, err)
			}
			if missing.Tool != tt.tool || missing.Variable.Name != "TAVILY_API_KEY" {
				t.Errorf("missing = %s's %s, want %s's TAVILY_API_KEY", missing.Tool, missing.Variable.Name, tt.tool)
			}
			for _, w := range []string{"TAVILY_API_KEY", "config.tools." + tt.tool + ".apiKey"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestTavilyBaseURL(t *testing.T) {
	for _, base := range []string{"ftp://tavily.internal", "api.tavily.com", "http://"} {
		t.Run(base, func(t *testing.T) {
			env := envWith(base, map[string]string{"TAVILY_API_KEY": tavilyKey})
			set, err := builtintools.Build(config(t, `{"tavilySearch":{}}`), tool.Env{Getenv: env})
			if err == nil || !strings.Contains(err.Error(), "TAVILY_BASE_URL") {
				t.Errorf("Build() = %v, %v; want an error naming TAVILY_BASE_URL", set, err)
			}
		})
	}
}

func TestTavilyInputSchema(t *testing.T) {
	set, err := builtintools.Build(config(t, `{"tavilySearch":{"apiKey":"k"},"tavilyExtract":{"apiKey":"k"}}`), tool.Env{Getenv: noEnv})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	tests := []struct {
		name  string
		tool  string
		input string
	}{
		{name: "empty query", tool: "tavilySearch", input: `{"query":""}`},
		{name: "no query", tool: "tavilySearch", input: `{}`},
		{name: "query not a string", tool: "tavilySearch", input: `{"query":5}`},
		{name: "unknown topic", tool: "tavilySearch", input: `{"query":"go","topic":"sports"}`},
		{name: "max results are not the model's", tool: "tavilySearch", input: `{"query":"go","max_results":20}`},
		{name: "no urls", tool: "tavilyExtract", input: `{}`},
		{name: "empty urls", tool: "tavilyExtract", input: `{"urls":[]}`},
		{name: "url without a scheme", tool: "tavilyExtract", input: `{"urls":["go.dev/doc"]}`},
		{name: "url that is not http", tool: "tavilyExtract", input: `{"urls":["ftp://go.dev/doc"]}`},
		{name: "urls as a string", tool: "tavilyExtract", input: `{"urls":"https://go.dev/doc/"}`},
		{name: "more than 20 urls", tool: "tavilyExtract", input: `{"urls":[` + strings.Repeat(`"https://go.dev/",`, 20) + `"https://go.dev/"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call, err := set.Prepare(tt.tool, json.RawMessage(tt.input))
			var inputErr *tool.InputError
			if !errors.As(err, &inputErr) {
				t.Errorf("Prepare(%s, %s) = %v, %v; want a *tool.InputError", tt.tool, tt.input, call, err)
			}
		})
	}
}

func TestTavilyCheck(t *testing.T) {
	tests := []struct {
		name        string
		tool        string
		raw         string
		wantField   string // the *builtintools.FieldError's field; empty when the entry is valid
		wantProblem string // a substring of its problem
		wantSecrets []string
	}{
		{name: "every search option", tool: "tavilySearch", raw: `{"apiKey":"k","maxResults":20,"searchDepth":"basic","topic":"finance","includeAnswer":false,"includeDomains":["a.com"],"excludeDomains":["b.com"],"timeRange":"day"}`, wantSecrets: []string{"apiKey"}},
		{name: "every extract option", tool: "tavilyExtract", raw: `{"apiKey":"k","extractDepth":"advanced","format":"markdown"}`, wantSecrets: []string{"apiKey"}},
		{name: "key left to the environment", tool: "tavilySearch", raw: `{"maxResults":5}`},
		{name: "async in the same invocation", tool: "tavilyExtract", raw: `{"async":true,"execution":"same-invocation","needsApproval":true}`},
		{name: "unknown option", tool: "tavilySearch", raw: `{"maxResultz":5}`, wantField: "tools.tavilySearch.maxResultz", wantProblem: "is not an option of tavilySearch"},
		{name: "option of the other tool", tool: "tavilyExtract", raw: `{"maxResults":5}`, wantField: "tools.tavilyExtract.maxResults"},
		{name: "maxResults not a number", tool: "tavilySearch", raw: `{"maxResults":"five"}`, wantField: "tools.tavilySearch.maxResults", wantProblem: "Invalid type"},
		{name: "maxResults above 20", tool: "tavilySearch", raw: `{"maxResults":21}`, wantField: "tools.tavilySearch.maxResults"},
		{name: "maxResults not whole", tool: "tavilySearch", raw: `{"maxResults":2.5}`, wantField: "tools.tavilySearch.maxResults"},
		{name: "unknown search depth", tool: "tavilySearch", raw: `{"searchDepth":"deep"}`, wantField: "tools.tavilySearch.searchDepth"},
		{name: "unknown time range", tool: "tavilySearch", raw: `{"timeRange":"decade"}`, wantField: "tools.tavilySearch.timeRange"},
		{name: "domains not a list", tool: "tavilySearch", raw: `{"includeDomains":"a.com"}`, wantField: "tools.tavilySearch.includeDomains"},
		{name: "empty key", tool: "tavilySearch", raw: `{"apiKey":""}`, wantField: "tools.tavilySearch.apiKey"},
		{name: "unknown format", tool: "tavilyExtract", raw: `{"format":"html"}`, wantField: "tools.tavilyExtract.format"},
		{name: "base URL is not an account option", tool: "tavilyExtract", raw: `{"baseUrl":"http://evil.example"}`, wantField: "tools.tavilyExtract.baseUrl"},
		{name: "external dispatch", tool: "tavilySearch", raw: `{"async":true,"execution":"external-dispatch"}`, wantField: "tools.tavilySearch.execution", wantProblem: `cannot use "external-dispatch"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := builtintools.Check(tt.tool, json.RawMessage(tt.raw), agentconfig.Model{})
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Check() error = %v, want none", err)
				}
				if diff := cmp.Diff(tt.wantSecrets, got.Secrets); diff != "" {
					t.Errorf("Secrets (-want +got):\n%s", diff)
				}
				return
			}
			var fe *builtintools.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Check() error = %v, want a *builtintools.FieldError at %s", err, tt.wantField)
			}
			if fe.Field != tt.wantField {
				t.Errorf("field = %q (%v), want %q", fe.Field, fe, tt.wantField)
			}
			if !strings.Contains(fe.Problem, tt.wantProblem) {
				t.Errorf("problem = %q, want it to contain %q", fe.Problem, tt.wantProblem)
			}
		})
	}
}
