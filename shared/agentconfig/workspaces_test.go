package agentconfig_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/tool/builtintools"
)

// config.sandbox and config.workspaces are refused at the exact field.
func TestWorkspacesAreCheckedAtTheirField(t *testing.T) {
	wantRefusals(t, []refusal{
		{`"sandbox":{"limits":{"cpuSeconds":1000}}`, "sandbox.limits.cpuSeconds", "out of range"},
		{`"sandbox":{"limits":{"cpu":1}}`, "sandbox.limits", "unknown field"},
		{`"sandbox":{"network":"host"}`, "sandbox.network", `the only one is "none"`},
		{`"sandbox":{"permissionMode":"yolo"}`, "sandbox.permissionMode", "not a permission mode"},
		{`"sandbox":"yes"`, "sandbox", "must be an object"},
		{`"sandbox":{"variables":["PATH"]}`, "sandbox.variables[0]", "set by the sandbox itself"},
		{`"sandbox":{"variables":["a-b"]}`, "sandbox.variables[0]", "not an environment variable's name"},
		{`"variables":[{"name":"TOKEN"}],"sandbox":{"variables":["TOKEN","TOKEN"]}`, "sandbox.variables[1]", "named twice"},
		{`"sandbox":{"variables":["TOKEN"]}`, "sandbox.variables[0]", "not one of the agent's variables"},
		{`"workspaces":{"name":"w"}`, "workspaces", "must be an array"},
		{`"workspaces":[{}]`, "workspaces[0].name", "is required"},
		{`"workspaces":[{"name":"a/b"}]`, "workspaces[0].name", "not a workspace name"},
		{`"workspaces":[{"name":"w","permissionMode":"auto"}]`, "workspaces[0].permissionMode", "not a permission mode"},
		{`"workspaces":[{"name":"w","sandbox":{}}]`, "workspaces[0].sandbox", "may only be null"},
		{`"workspaces":[{"name":"w","path":"x"}]`, "workspaces[0]", "unknown field"},
		{`"workspaces":[{"name":"w"},{"name":"w"}]`, "workspaces[1].name", "named twice"},
		{`"workspaces":[{"name":"w"},{"name":"v.1"}]`, "workspaces[1].name", "prefixes its tools' names"},
		{`"sandbox":{},"prompts":{"bash":{"system":"s"}}`, "prompts.bash", "a tool the agent's workspaces or sandbox give it"},
		{`"workspaces":[{"name":"w"}],"prompts":{"read":{"system":"s"}}`, "prompts.read", "a tool the agent's workspaces or sandbox give it"},
	})
}

// refusal is a part of a config, and the field and problem its refusal names.
type refusal struct{ part, field, problem string }

// wantRefusals checks that a config with each part is refused naming its field and problem.
func wantRefusals(t *testing.T, cases []refusal) {
	t.Helper()
	for _, tt := range cases {
		raw := `{"name":"a","model":{"provider":"scripted","script":[{"text":"ok"}]},` + tt.part + `}`
		_, err := agentconfig.Validate([]byte(raw), builtintools.ConfigChecks())
		var fe *agentconfig.FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Problem, tt.problem) {
			t.Errorf("%s: %v, want a FieldError at %s saying %q", tt.part, err, tt.field, tt.problem)
		}
	}
}

// A workspace's "sandbox": null opts it out of the agent's sandbox, and survives a round trip;
// with several workspaces the tools are prefixed.
func TestWorkspaceSandboxAndToolNames(t *testing.T) {
	raw := `{"name":"a","model":{"provider":"scripted"},"sandbox":{"limits":{"wallSeconds":5}},
		"workspaces":[{"name":"notes","permissionMode":"memory"},{"name":"docs","sandbox":null}]}`
	c, err := agentconfig.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	notes, docs := c.Workspaces[0], c.Workspaces[1]
	if !c.HasSandbox(notes) || c.HasSandbox(docs) || c.Sandbox.Limits.WallSeconds != 5 {
		t.Fatalf("sandbox: %+v, workspaces %+v", c.Sandbox, c.Workspaces)
	}
	if got := c.ToolName(docs, agentconfig.Read); got != "docs__read" {
		t.Errorf("tool name %q, want docs__read", got)
	}
	b, err := json.Marshal(c.Workspaces)
	if err != nil || string(b) != `[{"name":"notes","permissionMode":"memory"},{"name":"docs","sandbox":null}]` {
		t.Errorf("marshalled %s, %v", b, err)
	}
}
