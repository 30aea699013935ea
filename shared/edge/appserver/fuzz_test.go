package appserver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/fuzzcheck"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/wire/ids"
	"github.com/agentharness/harness/shared/wire/strictjson"
	"github.com/google/go-cmp/cmp"
)

// FuzzFrame reads WebSocket frames as Gateway.Message does before it touches the connections
// table: the command envelope and its duplicate-key check, then the checks of each command that
// need no stored state (an input's create_message payload, runtime_start's create_agent body,
// external tools of runtime_start and runtime_external_tools_update). The handlers mix the rest
// of their decoding with reads of the store, which this does not reach.
func FuzzFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"app_server_info","request_id":"r1"}`,
		`{"type":"runtime_start","request_id":"r2","agent_id":"agt_1","create_conversation":{},"external_tools":[{"tools":[{"name":"read_file","description":"Reads a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]},{"scope_id":"s1","tools":[{"name":"grep","description":"Greps.","parameters":{"type":"object"}}]}]}`,
		`{"type":"runtime_start","create_agent":{"body":{"name":"helper","model":"openai/gpt-4o-mini","tools":["current_time"],"memory_blocks":[]}},"conversation_id":"conv_1"}`,
		`{"type":"runtime_start","create_agent":{"body":{"name":"h","model":{"provider":"openai","model":"gpt-4o-mini"},"tools":{"current_time":{}}}},"create_conversation":{}}`,
		`{"type":"runtime_start","create_agent":{"body":{"model":"gpt-4o"}},"create_conversation":{}}`,
		`{"type":"runtime_external_tools_update","updates":[{"runtimes":[{"agent_id":"a","conversation_id":"c"}],"external_tools":[{"tools":[{"name":"x y","description":"","parameters":{}}]}]}]}`,
		`{"type":"input","request_id":"r3","runtime":{"agent_id":"a","conversation_id":"c"},"payload":{"kind":"create_message","messages":[{"role":"user","content":"hello","client_message_id":"m1"}],"client_tool_allowlist":["grep"],"external_tool_scope_ids":["s1"]}}`,
		`{"type":"input","runtime":{"agent_id":"a","conversation_id":"c"},"payload":{"kind":"create_message","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","text":""}]}]}}`,
		`{"type":"input","runtime":{"agent_id":"a","conversation_id":"c"},"payload":{"kind":"approval_response","request_id":"ap1","decision":{"behavior":"deny","message":"no"}}}`,
		`{"type":"sync","runtime":{"agent_id":"a","conversation_id":"c"}}`,
		`{"type":"abort_message","request_id":"r4","runtime":{"agent_id":"a","conversation_id":"c"}}`,
		`{"type":"external_tool_call_response","request_id":"res_1","result":{"content":[{"type":"text","text":"ok"}],"is_error":false}}`,
		`{"type":"input","type":"sync"}`,
		`{"type":7}`, `{"request_id":"r"}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > MaxFrameBytes {
			return
		}
		var cmd command
		if json.Unmarshal(body, &cmd) != nil {
			return // an error frame
		}
		if err := strictjson.CheckKeys(body); err != nil {
			var dup *strictjson.DuplicateKeyError
			if !errors.As(err, &dup) || dup.Field == "" {
				t.Fatalf("duplicate-key refusal %v names no field", err)
			}
			return
		}
		var parts struct {
			CreateAgent *struct {
				Body json.RawMessage `json:"body"`
			} `json:"create_agent"`
			ExternalTools []connections.ToolGroup `json:"external_tools"`
			Updates       []struct {
				ExternalTools []connections.ToolGroup `json:"external_tools"`
			} `json:"updates"`
		}
		_ = json.Unmarshal(body, &parts)
		groups := [][]connections.ToolGroup{parts.ExternalTools}
		for _, u := range parts.Updates {
			groups = append(groups, u.ExternalTools)
		}
		for _, g := range groups {
			checkGroups(t, g)
		}
		if parts.CreateAgent != nil {
			checkAgentBody(t, parts.CreateAgent.Body)
		}
		var p inputPayload
		if cmd.Type == "input" && len(cmd.Payload) > 0 && json.Unmarshal(cmd.Payload, &p) == nil && p.Kind == "create_message" {
			checkUserMessage(t, p)
		}
	})
}

func checkGroups(t *testing.T, groups []connections.ToolGroup) {
	t.Helper()
	err := checkToolGroups(groups)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "external_tools[") {
			t.Fatalf("external tools refusal %q names no field", err)
		}
		return
	}
	unscoped := map[string]bool{}
	for _, g := range groups {
		for _, tl := range g.Tools {
			if g.ScopeID == "" {
				unscoped[tl.Name] = true
			}
		}
	}
	for _, g := range groups {
		for _, tl := range g.Tools {
			if !toolNamePattern.MatchString(tl.Name) || tl.Description == "" || len(tl.Parameters) == 0 {
				t.Fatalf("accepted tool %+v", tl)
			}
			if g.ScopeID != "" && unscoped[tl.Name] {
				t.Fatalf("accepted %s both scoped and unscoped", tl.Name)
			}
		}
	}
}

func checkAgentBody(t *testing.T, raw json.RawMessage) {
	t.Helper()
	out, err := agentBody(raw)
	if err != nil {
		if msg := err.Error(); msg != "must be a JSON object" && !strings.HasPrefix(msg, "model ") {
			t.Fatalf("create_agent.body refusal %q names no field", msg)
		}
		return
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("agent config %s is not an object: %v", out, err)
	}
	for k := range cfg {
		switch k {
		case "name", "system", "maxSteps", "model", "tools":
		default:
			t.Fatalf("agent config %s has key %q", out, k)
		}
	}
	// The mapping is done once: the config it made maps to itself.
	again, err := agentBody(out)
	if err != nil {
		t.Fatalf("agent config %s is refused when mapped again: %v", out, err)
	}
	if !cmp.Equal(json.RawMessage(out), json.RawMessage(again), fuzzcheck.JSONEqual) {
		t.Fatalf("agent config mapped again changed: %s then %s", out, again)
	}
}

func checkUserMessage(t *testing.T, p inputPayload) {
	t.Helper()
	m, err := userMessage(p)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "payload.messages") {
			t.Fatalf("create_message refusal %q names no field", err)
		}
		return
	}
	if !ids.Valid(m.ID) || m.Role != model.RoleUser || len(m.Parts) != 1 || strings.TrimSpace(m.Text()) == "" {
		t.Fatalf("accepted message %+v: want an id, role user and one non-blank text part", m)
	}
}
