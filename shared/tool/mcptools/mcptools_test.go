package mcptools_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentharness/harness/infra/mcpeverything"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/mcptools"
	"github.com/agentharness/harness/shared/wire/egress"
)

// everything is the reference server, started once for the package's tests.
var everything struct {
	once sync.Once
	srv  *mcpeverything.Server
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if everything.srv != nil {
		everything.srv.Stop()
	}
	os.Exit(code)
}

// everythingURL is the reference server's endpoint, starting it on first use.
func everythingURL(t *testing.T) string {
	t.Helper()
	node, root := testenv.Node(t), testenv.Root(t)
	everything.once.Do(func() { everything.srv, everything.err = mcpeverything.Start(node, root, nil) })
	if everything.err != nil {
		t.Fatalf("starting server-everything: %v", everything.err)
	}
	return everything.srv.URL
}

// newClient is a Client on an unguarded HTTP client: the test servers are on loopback.
func newClient() *mcptools.Client { return mcptools.New(mcptools.Options{HTTP: &http.Client{}}) }

// run calls a tool as the turn engine does: through a tool.Set, which compiles its schema and
// checks the arguments first.
func run(ctx context.Context, t *testing.T, tools []tool.Tool, name, args string) (json.RawMessage, error) {
	t.Helper()
	set, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatalf("tool.NewSet: %v", err)
	}
	call, err := set.Prepare(name, json.RawMessage(args))
	if err != nil {
		t.Fatalf("Prepare(%s, %s): %v", name, args, err)
	}
	return call.Run(ctx)
}

func names(tools []tool.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

func find(t *testing.T, tools []tool.Tool, name string) tool.Tool {
	t.Helper()
	for _, tl := range tools {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s among %v", name, names(tools))
	return tool.Tool{}
}

// sameJSON fails unless got and want are the same JSON value.
func sameJSON(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("result %s is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

// tinyImageBytes is the size of the PNG server-everything's get-tiny-image returns, read from
// its source.
func tinyImageBytes(t *testing.T) int {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(testenv.Root(t), "infra", "node", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "tools", "get-tiny-image.js"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`MCP_TINY_IMAGE = "([A-Za-z0-9+/=]+)"`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no MCP_TINY_IMAGE in get-tiny-image.js")
	}
	png, err := base64.StdEncoding.DecodeString(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return len(png)
}

// The reference server's tools are listed under the server's name and answer calls with each
// kind of content.
func TestEverything(t *testing.T) {
	url := everythingURL(t)
	ctx := context.Background()
	tools, warnings := newClient().Tools(ctx, agentconfig.MCPServers{"everything": {URL: url}})
	if len(warnings) != 0 {
		t.Fatalf("warnings: %v", warnings)
	}
	got := names(tools)
	for _, want := range []string{"everything__echo", "everything__get-sum", "everything__get-tiny-image",
		"everything__get-structured-content", "everything__get-resource-reference",
		"everything__get-resource-links", "everything__trigger-long-running-operation"} {
		if !slices.Contains(got, want) {
			t.Errorf("tools %v lack %s", got, want)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("tools %v are not sorted by name", got)
	}
	if d := find(t, tools, "everything__echo").Description; d != "Echoes back the input string" {
		t.Errorf("echo's description %q", d)
	}
	sameJSON(t, find(t, tools, "everything__get-sum").InputSchema, `{
		"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
		"properties":{"a":{"type":"number","description":"First number"},"b":{"type":"number","description":"Second number"}},
		"required":["a","b"]}`)

	tests := []struct {
		name, tool, args string
		want             string // the result's JSON, when exact
		check            func(t *testing.T, out json.RawMessage)
		wantErr          string
	}{
		{name: "text", tool: "echo", args: `{"message":"hi"}`, want: `"Echo: hi"`},
		{name: "sum", tool: "get-sum", args: `{"a":2,"b":3.5}`, want: `"The sum of 2 and 3.5 is 5.5."`},
		{name: "image", tool: "get-tiny-image", args: `{}`, want: fmt.Sprintf(`{"content":[
			{"type":"text","text":"Here's the image you requested:"},
			{"type":"image","mimeType":"image/png","bytes":%d},
			{"type":"text","text":"The image above is the MCP logo."}]}`, tinyImageBytes(t))},
		{name: "structured content", tool: "get-structured-content", args: `{"location":"Chicago"}`, want: `{
			"content":[{"type":"text","text":"{\"temperature\":36,\"conditions\":\"Light rain / drizzle\",\"humidity\":82}"}],
			"structuredContent":{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}}`},
		{name: "text resource", tool: "get-resource-reference", args: `{"resourceType":"Text","resourceId":1}`, check: func(t *testing.T, out json.RawMessage) {
			var r struct{ Content []map[string]any }
			_ = json.Unmarshal(out, &r)
			if len(r.Content) != 3 {
				t.Fatalf("result %s, want 3 blocks", out)
			}
			res := r.Content[1]
			text, _ := res["text"].(string)
			if res["type"] != "resource" || res["uri"] != "demo://resource/dynamic/text/1" || res["mimeType"] != "text/plain" ||
				!strings.HasPrefix(text, "Resource 1: This is a plaintext resource created at ") || res["bytes"] != nil {
				t.Errorf("resource block %v", res)
			}
		}},
		{name: "blob resource", tool: "get-resource-reference", args: `{"resourceType":"Blob","resourceId":2}`, check: func(t *testing.T, out json.RawMessage) {
			var r struct{ Content []map[string]any }
			_ = json.Unmarshal(out, &r)
			if len(r.Content) != 3 {
				t.Fatalf("result %s, want 3 blocks", out)
			}
			res := r.Content[1]
			n, _ := res["bytes"].(float64)
			if res["type"] != "resource" || res["uri"] != "demo://resource/dynamic/blob/2" || res["mimeType"] != "text/plain" ||
				int(n) <= len("Resource 2: This is a base64 blob created at ") || res["text"] != nil || res["blob"] != nil {
				t.Errorf("resource block %v", res)
			}
		}},
		{name: "resource links", tool: "get-resource-links", args: `{"count":2}`, want: `{"content":[
			{"type":"text","text":"Here are 2 resource links to resources available in this server:"},
			{"type":"resource_link","uri":"demo://resource/dynamic/blob/1","name":"Blob Resource 1"},
			{"type":"resource_link","uri":"demo://resource/dynamic/text/2","name":"Text Resource 2"}]}`},
		{name: "error result", tool: "get-resource-reference", args: `{"resourceType":"Text","resourceId":0}`,
			wantErr: "tool everything__get-resource-reference failed: Invalid resourceId: 0. Must be a finite positive integer."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(ctx, t, tools, "everything__"+tt.tool, tt.args)
			switch {
			case tt.wantErr != "":
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got %s, %v; want the error %q", out, err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("call: %v", err)
			case tt.check != nil:
				tt.check(t, out)
			default:
				sameJSON(t, out, tt.want)
			}
		})
	}
}

// A long-running call completes, and its progress reaches the function on its context.
func TestEverythingProgress(t *testing.T) {
	url := everythingURL(t)
	tools, warnings := newClient().Tools(context.Background(), agentconfig.MCPServers{"everything": {URL: url}})
	if len(warnings) != 0 {
		t.Fatalf("warnings: %v", warnings)
	}
	type step struct{ Progress, Total float64 }
	var mu sync.Mutex
	var steps []step
	ctx := mcptools.WithProgress(context.Background(), func(progress, total float64, _ string) {
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, step{progress, total})
	})
	out, err := run(ctx, t, tools, "everything__trigger-long-running-operation", `{"duration":0.6,"steps":3}`)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, out, `"Long running operation completed. Duration: 0.6 seconds, Steps: 3."`)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]step{{1, 3}, {2, 3}, {3, 3}}, steps); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

// fake is a go-sdk MCP server on httptest with the tools the reference server lacks. It pages
// its tool list two at a time and records what reaches it.
type fake struct {
	*httptest.Server
	lists atomic.Int32 // tools/list requests
	mu    sync.Mutex
	seen  []http.Header // every request's headers
}

// fakeTools are the tools fake serves.
func fakeTools(release <-chan struct{}) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	object := json.RawMessage(`{"type":"object"}`)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	srv.AddTool(&mcp.Tool{Name: "greet", Description: "Greets someone",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Name string }
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			return text("hello " + args.Name), nil
		})
	srv.AddTool(&mcp.Tool{Name: "fail", Title: "Fails", InputSchema: object},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the disk is full"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "remote-ref", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://schemas.example/x.json"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("unreachable"), nil
		})
	srv.AddTool(&mcp.Tool{Name: "hang", InputSchema: object},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
			case <-release:
			}
			return text("too late"), nil
		})
	srv.AddTool(&mcp.Tool{Name: "drop", InputSchema: object},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("never sent"), nil
		})
	return srv
}

// fakeToolNames are the model-facing names of fake's tools for a server named "fake".
var fakeToolNames = []string{"fake__drop", "fake__fail", "fake__greet", "fake__hang"}

// newFake serves fakeTools over Streamable HTTP. A call of "drop" has its connection closed
// before any answer.
func newFake(t *testing.T) *fake {
	t.Helper()
	release := make(chan struct{})
	srv := fakeTools(release)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, r.Header.Clone())
		f.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string
			Params struct{ Name string }
		}
		_ = json.Unmarshal(body, &msg)
		switch {
		case msg.Method == "tools/list":
			f.lists.Add(1)
		case msg.Method == "tools/call" && msg.Params.Name == "drop":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	t.Cleanup(func() { close(release) })
	return f
}

func (f *fake) headers() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

// A server's failures reach the model as failed tool calls with a reason, never a panic.
func TestCallFailures(t *testing.T) {
	f := newFake(t)
	tools, warnings := newClient().Tools(context.Background(), agentconfig.MCPServers{"fake": {URL: f.URL + "/mcp", TimeoutMs: 300}})
	if len(warnings) != 1 || !strings.Contains(warnings[0].Error(), `tool "remote-ref"`) {
		t.Errorf("warnings %v, want one for remote-ref", warnings)
	}
	if diff := cmp.Diff(fakeToolNames, names(tools)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	tests := []struct {
		tool    string
		args    string
		wantErr string
		within  time.Duration
	}{
		{tool: "fail", wantErr: "tool fake__fail failed: the disk is full", within: 5 * time.Second},
		{tool: "hang", wantErr: "tool fake__hang failed: MCP server fake did not answer within 300 ms", within: 3 * time.Second},
		{tool: "drop", wantErr: "tool fake__drop failed: the connection to MCP server fake dropped before it answered", within: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			start := time.Now()
			out, err := run(context.Background(), t, tools, "fake__"+tt.tool, `{}`)
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Fatalf("got %s, %v; want an error starting %q", out, err, tt.wantErr)
			}
			if d := time.Since(start); d > tt.within {
				t.Errorf("the call took %s, want under %s", d, tt.within)
			}
		})
	}
	out, err := run(context.Background(), t, tools, "fake__greet", `{"name":"Ada"}`)
	if err != nil || string(out) != `"hello Ada"` {
		t.Errorf("after the failures greet = %s, %v; want \"hello Ada\"", out, err)
	}
}

// The server config decides which tools are offered and how: allowedTools, needsApproval (for
// all tools or by tool), async.
func TestServerConfig(t *testing.T) {
	f := newFake(t)
	url := f.URL + "/mcp"
	tests := []struct {
		name         string
		server       agentconfig.MCPServer
		wantTools    []string
		wantApproval map[string]approval.Status // by tool; absent: not-applicable
		wantAsync    string
		wantWarnings []string // substrings, one per warning besides remote-ref's
	}{
		{name: "defaults", wantTools: fakeToolNames},
		{name: "allowedTools", server: agentconfig.MCPServer{AllowedTools: []string{"greet", "fail", "remote-ref", "gone"}},
			wantTools: []string{"fake__fail", "fake__greet"}, wantWarnings: []string{`allowedTools names "gone"`}},
		{name: "approval for all", server: agentconfig.MCPServer{NeedsApproval: json.RawMessage(`true`)}, wantTools: fakeToolNames,
			wantApproval: map[string]approval.Status{"fake__drop": approval.UserApproval, "fake__fail": approval.UserApproval, "fake__greet": approval.UserApproval, "fake__hang": approval.UserApproval}},
		{name: "approval by tool", server: agentconfig.MCPServer{NeedsApproval: json.RawMessage(`{"greet":true,"fail":{"rules":[],"otherwise":"denied"}}`)},
			wantTools: fakeToolNames, wantApproval: map[string]approval.Status{"fake__greet": approval.UserApproval, "fake__fail": approval.Denied}},
		{name: "a bad policy leaves its tool out", server: agentconfig.MCPServer{NeedsApproval: json.RawMessage(`{"greet":"sometimes"}`)},
			wantTools: []string{"fake__drop", "fake__fail", "fake__hang"}, wantWarnings: []string{`tool "greet" is left out: its needsApproval`}},
		{name: "async", server: agentconfig.MCPServer{Async: true, Execution: "same-invocation"}, wantTools: fakeToolNames, wantAsync: "same-invocation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.server
			s.URL = url
			tools, warnings := newClient().Tools(context.Background(), agentconfig.MCPServers{"fake": &s})
			if diff := cmp.Diff(tt.wantTools, names(tools)); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			var got []string
			for _, w := range warnings {
				if !strings.Contains(w.Error(), `"remote-ref"`) {
					got = append(got, w.Error())
				}
			}
			if len(got) != len(tt.wantWarnings) {
				t.Errorf("warnings %q, want %d like %q", got, len(tt.wantWarnings), tt.wantWarnings)
			}
			for i := range min(len(got), len(tt.wantWarnings)) {
				if !strings.Contains(got[i], tt.wantWarnings[i]) || !strings.HasPrefix(got[i], "MCP server fake: ") {
					t.Errorf("warning %q, want MCP server fake: ...%s...", got[i], tt.wantWarnings[i])
				}
			}
			for _, tl := range tools {
				want, ok := tt.wantApproval[tl.Name]
				if !ok {
					want = approval.NotApplicable
				}
				if got := tl.Approval.Decide(json.RawMessage(`{}`)).Status; got != want {
					t.Errorf("%s: approval %s, want %s", tl.Name, got, want)
				}
				if tl.Async != tt.wantAsync {
					t.Errorf("%s: Async %q, want %q", tl.Name, tl.Async, tt.wantAsync)
				}
			}
		})
	}
}

// Descriptions come from the description, else the title; schemas are the server's.
func TestToolShape(t *testing.T) {
	f := newFake(t)
	tools, _ := newClient().Tools(context.Background(), agentconfig.MCPServers{"fake": {URL: f.URL + "/mcp"}})
	greet, fail := find(t, tools, "fake__greet"), find(t, tools, "fake__fail")
	if greet.Description != "Greets someone" || fail.Description != "Fails" {
		t.Errorf("descriptions %q, %q; want the description, else the title", greet.Description, fail.Description)
	}
	sameJSON(t, greet.InputSchema, `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)
	if greet.Execute == nil || greet.ProviderTool != "" || greet.Subagent {
		t.Errorf("greet is not an inline tool: %+v", greet)
	}
}

// A server that cannot be reached costs the turn its tools only.
func TestUnreachableServer(t *testing.T) {
	f := newFake(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	tools, warnings := newClient().Tools(context.Background(), agentconfig.MCPServers{
		"down": {URL: down},
		"fake": {URL: f.URL + "/mcp"},
	})
	if diff := cmp.Diff(fakeToolNames, names(tools)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	var downWarnings []mcptools.Warning
	for _, w := range warnings {
		if w.Server == "down" {
			downWarnings = append(downWarnings, w)
		}
	}
	if len(downWarnings) != 1 || !strings.HasPrefix(downWarnings[0].Error(), "MCP server down: connecting: ") {
		t.Errorf("warnings %v, want one \"MCP server down: connecting: ...\"", warnings)
	}
}

// A list is reused within the TTL, per URL and credentials, and asked for again after it.
func TestListCache(t *testing.T) {
	f := newFake(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := mcptools.New(mcptools.Options{HTTP: &http.Client{}, TTL: time.Minute, Now: func() time.Time { return now }})
	servers := agentconfig.MCPServers{"fake": {URL: f.URL + "/mcp"}}
	list := func(servers agentconfig.MCPServers) {
		t.Helper()
		tools, _ := c.Tools(context.Background(), servers)
		if len(tools) != len(fakeToolNames) {
			t.Fatalf("tools %v, want %v", names(tools), fakeToolNames)
		}
	}
	// Five tools two to a page: three requests for a whole list.
	const pages = 3
	steps := []struct {
		name    string
		advance time.Duration
		servers agentconfig.MCPServers
		want    int32
	}{
		{name: "first list", servers: servers, want: pages},
		{name: "within the TTL", advance: 59 * time.Second, servers: servers, want: pages},
		{name: "other credentials", servers: agentconfig.MCPServers{"fake": {URL: f.URL + "/mcp", BearerToken: "t"}}, want: 2 * pages},
		{name: "under another name", servers: agentconfig.MCPServers{"other": {URL: f.URL + "/mcp"}}, want: 2 * pages},
		{name: "after the TTL", advance: time.Second, servers: servers, want: 3 * pages},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		list(s.servers)
		if got := f.lists.Load(); got != s.want {
			t.Errorf("%s: %d tools/list requests in all, want %d", s.name, got, s.want)
		}
	}
}

// The bearer token and headers go with every request, lists and calls alike.
func TestCredentials(t *testing.T) {
	f := newFake(t)
	tools, _ := newClient().Tools(context.Background(), agentconfig.MCPServers{"fake": {
		URL: f.URL + "/mcp", BearerToken: "s3cret", Headers: map[string]string{"X-Team": "blue", "x-trace": "7"},
	}})
	if _, err := run(context.Background(), t, tools, "fake__greet", `{"name":"Ada"}`); err != nil {
		t.Fatal(err)
	}
	seen := f.headers()
	if len(seen) < 4 {
		t.Fatalf("the server saw %d requests, want a list's and a call's", len(seen))
	}
	for i, h := range seen {
		if h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Team") != "blue" || h.Get("X-Trace") != "7" {
			t.Errorf("request %d: Authorization %q, X-Team %q, X-Trace %q", i, h.Get("Authorization"), h.Get("X-Team"), h.Get("X-Trace"))
		}
	}
}

// rawServer answers Streamable HTTP with JSON: initialize, and tools/list with list.
func rawServer(t *testing.T, list func(cursor string) string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage
			Method string
			Params struct{ Cursor string }
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result string
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`
		case "tools/list":
			result = list(req.Params.Cursor)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, req.ID)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A list that is not one gives a Warning; a tool that cannot be offered gives its own, and the
// server's other tools stay.
func TestInvalidLists(t *testing.T) {
	long := strings.Repeat("x", 60)
	tests := []struct {
		name         string
		list         func(cursor string) string
		wantTools    []string
		wantWarnings []string
	}{
		{name: "pages forever", list: func(string) string {
			return `{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"again"}`
		}, wantWarnings: []string{`MCP server raw: listing its tools: its tool list comes back to page "again"`}},
		{name: "not a list", list: func(string) string { return `{"tools":"none"}` },
			wantWarnings: []string{"MCP server raw: listing its tools: "}},
		{name: "bad tools", list: func(string) string {
			return `{"tools":[
				{"name":"ok","inputSchema":{"type":"object"}},
				{"name":"ok","inputSchema":{"type":"object"}},
				{"name":"bad name!","inputSchema":{"type":"object"}},
				{"name":"` + long + `","inputSchema":{"type":"object"}},
				{"name":"noschema"},
				{"name":"file-ref","inputSchema":{"type":"object","properties":{"p":{"$ref":"file:///etc/passwd"}}}}]}`
		}, wantTools: []string{"raw__ok"}, wantWarnings: []string{
			`MCP server raw: tool "ok" is listed twice`,
			`MCP server raw: tool "bad name!" is left out: as "raw__bad name!" its name is not 1 to 64`,
			`MCP server raw: tool "` + long + `" is left out`,
			`MCP server raw: tool "noschema" is left out: its inputSchema is refused`,
			`MCP server raw: tool "file-ref" is left out: its inputSchema is refused: properties.p.$ref`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := rawServer(t, tt.list)
			tools, warnings := newClient().Tools(context.Background(), agentconfig.MCPServers{"raw": {URL: url}})
			if diff := cmp.Diff(tt.wantTools, names(tools)); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			if len(warnings) != len(tt.wantWarnings) {
				t.Fatalf("warnings %v, want %d", warnings, len(tt.wantWarnings))
			}
			for i, w := range warnings {
				if !strings.HasPrefix(w.Error(), tt.wantWarnings[i]) {
					t.Errorf("warning %q, want it to start %q", w, tt.wantWarnings[i])
				}
			}
			if _, err := tool.NewSet(tools...); err != nil {
				t.Errorf("the offered tools do not make a set: %v", err)
			}
		})
	}
}

// A call the server answers with a JSON-RPC error is a failed call that says so.
func TestRefusedCall(t *testing.T) {
	url := rawServer(t, func(string) string { return `{"tools":[{"name":"ok","inputSchema":{"type":"object"}}]}` })
	tools, warnings := newClient().Tools(context.Background(), agentconfig.MCPServers{"raw": {URL: url}})
	if len(warnings) != 0 {
		t.Fatalf("warnings %v", warnings)
	}
	out, err := run(context.Background(), t, tools, "raw__ok", `{}`)
	if want := "tool raw__ok failed: MCP server raw refused the call: Method not found"; err == nil || err.Error() != want {
		t.Errorf("got %s, %v; want the error %q", out, err, want)
	}
}

// A server of the 2024-11-05 protocol, HTTP+SSE, answers a Streamable HTTP POST with 405: its
// tools come over the legacy transport.
func TestLegacySSE(t *testing.T) {
	srv := fakeTools(nil)
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var streams atomic.Int32
	legacy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet:
			streams.Add(1)
		case r.URL.Query().Get("sessionid") == "":
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		sse.ServeHTTP(w, r)
	}))
	t.Cleanup(legacy.Close)
	tools, warnings := newClient().Tools(context.Background(), agentconfig.MCPServers{"fake": {URL: legacy.URL + "/sse", AllowedTools: []string{"greet"}}})
	if len(warnings) != 0 || len(tools) != 1 {
		t.Fatalf("tools %v, warnings %v; want fake__greet", names(tools), warnings)
	}
	out, err := run(context.Background(), t, tools, "fake__greet", `{"name":"Ada"}`)
	if err != nil || string(out) != `"hello Ada"` {
		t.Errorf("greet = %s, %v; want \"hello Ada\"", out, err)
	}
	if n := streams.Load(); n != 2 {
		t.Errorf("%d SSE streams opened, want 2 (the list's and the call's)", n)
	}
}

// Nothing but the server's own origin is contacted: not where it redirects, not another
// origin a legacy server names for its messages.
func TestStaysOnOrigin(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	redirect := httptest.NewServer(http.RedirectHandler(other.URL+"/mcp", http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	sendsAway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: endpoint\ndata: %s/messages\n\n", other.URL)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(sendsAway.Close)

	tools, warnings := newClient().Tools(context.Background(), agentconfig.MCPServers{
		"redirects":  {URL: redirect.URL + "/mcp", BearerToken: "s3cret"},
		"sends-away": {URL: sendsAway.URL + "/sse", BearerToken: "s3cret", TimeoutMs: 2000},
	})
	if len(tools) != 0 {
		t.Errorf("tools %v, want none", names(tools))
	}
	want := map[string]string{
		"redirects":  "MCP server redirects: connecting: the server redirected to " + other.URL + "/mcp",
		"sends-away": "MCP server sends-away: connecting: the server sent the harness to " + other.URL,
	}
	if len(warnings) != len(want) {
		t.Fatalf("warnings %v, want %d", warnings, len(want))
	}
	for _, w := range warnings {
		if !strings.HasPrefix(w.Error(), want[w.Server]) {
			t.Errorf("warning %q, want it to start %q", w, want[w.Server])
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other origin got %d requests", n)
	}
}

// FromConfig's client calls public addresses only unless the operator allows private ones, and
// every client of a setting shares its transport.
func TestFromConfig(t *testing.T) {
	if _, err := mcptools.FromConfig("yes"); err == nil || !strings.Contains(err.Error(), mcptools.PrivateVar) {
		t.Errorf("FromConfig with %s=yes: %v, want an error naming it", mcptools.PrivateVar, err)
	}

	f := newFake(t)
	guarded, err := mcptools.FromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	tools, warnings := guarded.Tools(context.Background(), agentconfig.MCPServers{"fake": {URL: f.URL + "/mcp"}})
	var blocked *egress.BlockedError
	if len(tools) != 0 || len(warnings) != 1 || !errors.As(warnings[0], &blocked) {
		t.Fatalf("tools %v, warnings %v; want an egress refusal", names(tools), warnings)
	}
	msg := warnings[0].Error()
	for _, want := range []string{"MCP server fake: connecting: 127.0.0.1 is a loopback address", mcptools.PrivateVar + "=allow"} {
		if !strings.Contains(msg, want) {
			t.Errorf("warning %q lacks %q", msg, want)
		}
	}
	if len(f.headers()) != 0 {
		t.Errorf("the server saw %d requests, want none", len(f.headers()))
	}

	allowed, err := mcptools.FromConfig("allow")
	if err != nil {
		t.Fatal(err)
	}
	tools, warnings = allowed.Tools(context.Background(), agentconfig.MCPServers{"everything": {URL: everythingURL(t), AllowedTools: []string{"echo"}}})
	if len(warnings) != 0 || len(tools) != 1 {
		t.Fatalf("tools %v, warnings %v; want everything__echo", names(tools), warnings)
	}
	if out, err := run(context.Background(), t, tools, "everything__echo", `{"message":"hi"}`); err != nil || string(out) != `"Echo: hi"` {
		t.Errorf("echo = %s, %v", out, err)
	}

	again, _ := mcptools.FromConfig("")
	alsoAllowed, _ := mcptools.FromConfig("allow")
	if mcptools.Transport(guarded) != mcptools.Transport(again) || mcptools.Transport(guarded) != egress.Transport() {
		t.Error("guarded clients do not share egress.Transport()")
	}
	if mcptools.Transport(allowed) != mcptools.Transport(alsoAllowed) || mcptools.Transport(allowed) != http.DefaultTransport {
		t.Error("allowed clients do not share http.DefaultTransport")
	}
}

func TestWarningError(t *testing.T) {
	w := mcptools.Warning{Server: "docs", Err: errors.New("connecting: refused")}
	if got := w.Error(); got != "MCP server docs: connecting: refused" {
		t.Errorf("Error() = %q", got)
	}
}

// Against the reference server itself: a long-running call past the server's timeoutMs fails
// with the timeout, and a call whose server stops in the middle fails saying so; neither hangs.
func TestEverythingTimeoutAndStop(t *testing.T) {
	ctx := context.Background()
	tools, warnings := newClient().Tools(ctx, agentconfig.MCPServers{"everything": {URL: everythingURL(t), TimeoutMs: 300}})
	if len(warnings) != 0 {
		t.Fatalf("warnings: %v", warnings)
	}
	start := time.Now()
	_, err := run(ctx, t, tools, "everything__trigger-long-running-operation", `{"duration":5,"steps":5}`)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 300 ms") || time.Since(start) > 4*time.Second {
		t.Errorf("a call past timeoutMs: %v after %s, want the timeout within about 300 ms", err, time.Since(start))
	}

	// A server of its own, stopped while the call runs.
	srv, err := mcpeverything.Start(testenv.Node(t), testenv.Root(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	tools, warnings = newClient().Tools(ctx, agentconfig.MCPServers{"doomed": {URL: srv.URL}})
	if len(warnings) != 0 {
		t.Fatalf("warnings: %v", warnings)
	}
	time.AfterFunc(500*time.Millisecond, srv.Stop)
	start = time.Now()
	_, err = run(ctx, t, tools, "doomed__trigger-long-running-operation", `{"duration":10,"steps":10}`)
	if err == nil || time.Since(start) > 8*time.Second {
		t.Errorf("a call whose server stopped: %v after %s, want a failure as the server went", err, time.Since(start))
	}
}
