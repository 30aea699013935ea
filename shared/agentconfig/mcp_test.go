package agentconfig_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/tool/builtintools"
)

// An MCP server's problems are refused at the exact field, with no call to the server, and its
// bearer token and headers are found for sealing.
func TestMCPServersAreCheckedAtTheirField(t *testing.T) {
	model := `"model":{"provider":"scripted","script":[{"text":"ok"}]}`
	for _, tt := range []struct {
		servers, field, problem string
	}{
		{`{"docs":{"url":"https://mcp.example.com/mcp","transport":"sse"}}`, "mcpServers.docs.transport", "is not an MCP server field"},
		{`{"docs":{}}`, "mcpServers.docs.url", "is required"},
		{`{"docs":{"url":"ftp://mcp.example.com"}}`, "mcpServers.docs.url", "absolute http or https URL"},
		{`{"docs":{"url":"https://user:pw@mcp.example.com"}}`, "mcpServers.docs.url", "without user info"},
		{`{"docs":{"url":"/mcp"}}`, "mcpServers.docs.url", "absolute"},
		{`{"docs":{"url":"https://mcp.example.com","timeoutMs":"5"}}`, "mcpServers.docs.timeoutMs", "must be an integer"},
		{`{"docs":{"url":"https://mcp.example.com","timeoutMs":900001}}`, "mcpServers.docs.timeoutMs", "between 1 and 900000"},
		{`{"a__b":{"url":"https://mcp.example.com"}}`, "mcpServers.a__b", "must be a server name"},
		{`{"docs.v2":{"url":"https://mcp.example.com"}}`, "mcpServers.docs.v2", "must be a server name"},
		{`{"docs":{"url":"https://mcp.example.com","execution":"same-invocation"}}`, "mcpServers.docs.execution", "set async: true"},
		{`{"docs":{"url":"https://mcp.example.com","async":true,"execution":"external-dispatch"}}`, "mcpServers.docs.execution", "answers the call itself"},
		{`{"docs":{"url":"https://mcp.example.com","needsApproval":"sometimes"}}`, "mcpServers.docs.needsApproval", ""},
		{`{"docs":{"url":"https://mcp.example.com","needsApproval":{"search":"sometimes"}}}`, "mcpServers.docs.needsApproval.search", ""},
		{`{"docs":{"url":"https://mcp.example.com","headers":{"X.Key":"v"}}}`, "mcpServers.docs.headers", "is not a header name"},
		{`{"docs":{"url":"https://mcp.example.com","headers":{"X-Key":"a\r\nb"}}}`, "mcpServers.docs.headers.X-Key", "line break"},
		{`{"docs":{"url":"https://mcp.example.com","bearerToken":"t","headers":{"authorization":"x"}}}`, "mcpServers.docs.headers.authorization", "keep one"},
		{`{"docs":{"url":"https://mcp.example.com","allowedTools":[""]}}`, "mcpServers.docs.allowedTools[0]", "must be a tool name"},
		{`{"current":{"url":"https://mcp.example.com"}}`, "mcpServers.current", ""}, // no clash: current_time has no "current__" prefix
	} {
		raw := `{"name":"a",` + model + `,"tools":{"current_time":{}},"mcpServers":` + tt.servers + `}`
		_, err := agentconfig.Validate([]byte(raw), builtintools.ConfigChecks())
		if tt.field == "mcpServers.current" {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", tt.servers, err)
			}
			continue
		}
		var fe *agentconfig.FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Problem, tt.problem) {
			t.Errorf("%s: err = %v, want a FieldError at %s saying %q", tt.servers, err, tt.field, tt.problem)
		}
	}
}

// Another tool of the agent named like the server's tools (<server>__…) is refused, naming both.
func TestAnMCPServerClashingWithAToolIsRefused(t *testing.T) {
	raw := `{"name":"a","model":{"provider":"scripted","script":[{"text":"ok"}]},
		"prompts":{"docs__search":{"system":"s"}},"mcpServers":{"docs":{"url":"https://mcp.example.com"}}}`
	_, err := agentconfig.Validate([]byte(raw), builtintools.ConfigChecks())
	var fe *agentconfig.FieldError
	if !errors.As(err, &fe) || fe.Field != "mcpServers.docs" || !strings.Contains(fe.Problem, "docs__search") || !strings.Contains(fe.Problem, "docs__<tool>") {
		t.Errorf("err = %v, want a FieldError at mcpServers.docs naming docs__search and the server's tool names", err)
	}
}

// The bearer token and every header are secrets; a valid server's keys decode.
func TestMCPServerSecretsAndDefaults(t *testing.T) {
	raw := `{"name":"a","model":{"provider":"scripted","script":[{"text":"ok"}]},"mcpServers":{"docs":{"url":"https://mcp.example.com/mcp",
		"bearerToken":"tok","headers":{"X-Api-Key":"k"},"allowedTools":["search"],"needsApproval":{"search":true},"async":true}}}`
	v, err := agentconfig.Validate([]byte(raw), builtintools.ConfigChecks())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"mcpServers.docs.bearerToken", "mcpServers.docs.headers.X-Api-Key"}
	for _, s := range want {
		if !slices.Contains(v.Secrets, s) {
			t.Errorf("secrets %v lack %s", v.Secrets, s)
		}
	}
	redacted, secrets, err := agentconfig.Split([]byte(raw), v.Secrets)
	if err != nil || strings.Contains(string(redacted), "tok") || strings.Contains(string(redacted), `"k"`) || secrets["mcpServers.docs.bearerToken"] != "tok" {
		t.Errorf("Split = %s, %v, %v; want both secrets out of the config", redacted, secrets, err)
	}
	s := v.Config.MCPServers["docs"]
	if s.Timeout() != agentconfig.DefaultMCPTimeoutMs || !s.Allows("search") || s.Allows("delete") {
		t.Errorf("server %+v: timeout %d, allows search %v, delete %v", s, s.Timeout(), s.Allows("search"), s.Allows("delete"))
	}
	if p, err := s.Approval("search"); p == nil || err != nil {
		t.Errorf("Approval(search) = %v, %v; want a policy", p, err)
	}
	if p, err := s.Approval("other"); p != nil || err != nil {
		t.Errorf("Approval(other) = %v, %v; want none", p, err)
	}
	if got := agentconfig.MCPToolName("docs", "search"); got != "docs__search" {
		t.Errorf("MCPToolName = %s", got)
	}
}
