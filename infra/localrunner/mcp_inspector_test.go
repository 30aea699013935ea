package localrunner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
)

// inspector runs the official MCP Inspector's CLI (pinned in infra/node) against the runner's
// /mcp as the account of secret, with args after the server's URL and header, and returns the
// result it printed as JSON. Its home is a temporary folder, so it reads and writes no catalog
// or stored login of the machine's, and --stored-auth-only keeps it from starting a login in a
// browser.
func (e *asyncEnv) inspector(t *testing.T, secret string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	launcher := filepath.Join(testenv.Root(t), "infra", "node", "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	cmd := exec.CommandContext(ctx, testenv.Node(t), append([]string{launcher, "--cli", e.srv.URL + "/mcp",
		"--header", "Authorization: Bearer " + secret, "--stored-auth-only", "--format", "json"}, args...)...)
	cmd.Env = append(cmd.Environ(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Inspector %v failed: %v\nstderr:\n%s\nstdout:\n%s", args, err, stderr.String(), stdout.String())
	}
	var out struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Result == nil {
		t.Fatalf("the Inspector %v printed %s, want its result as JSON (%v)\nstderr:\n%s", args, stdout.String(), err, stderr.String())
	}
	return out.Result
}

// TestMCPInspector lists and calls the account's agents with the MCP Inspector's CLI, the
// official MCP client that opens the optional GET stream after initialize: the runner must
// answer it as the Streamable HTTP transport says (405) for the Inspector to go on.
func TestMCPInspector(t *testing.T) {
	e := newAsyncEnv(t)
	for _, config := range mcpServerAgents[:2] {
		e.agent(t, config)
	}

	listed := e.inspector(t, e.secret, "--method", "tools/list")
	tools, _ := listed["tools"].([]any)
	var names []string
	for _, tool := range tools {
		m, _ := tool.(map[string]any)
		name, _ := m["name"].(string)
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"run_agent_greeter", "run_agent_team_lead_1"}; !slices.Equal(names, want) {
		t.Fatalf("the Inspector listed tools %q (%v), want %q", names, listed, want)
	}

	called := e.inspector(t, e.secret, "--method", "tools/call", "--tool-name", "run_agent_greeter", "--tool-args-json", `{"message":"hi"}`)
	content, _ := called["content"].([]any)
	var text string
	for _, c := range content {
		if m, _ := c.(map[string]any); m["type"] == "text" {
			s, _ := m["text"].(string)
			text += s
		}
	}
	if called["isError"] == true || text != "Hello from the greeter." {
		t.Errorf("the Inspector's call of run_agent_greeter printed %v, want the greeter's answer", called)
	}
}
