package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/asynctools"
	"github.com/agentharness/harness/shared/completion"
	"github.com/agentharness/harness/shared/connections"
	"github.com/agentharness/harness/shared/httpjson"
	"github.com/agentharness/harness/shared/ids"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/store"
	"github.com/agentharness/harness/shared/strictjson"
	"github.com/agentharness/harness/shared/turn"
	"github.com/google/go-cmp/cmp"
)

// jsonEqual compares raw JSON by value: spacing, escaping and an absent value against null do
// not count.
var jsonEqual = cmp.Comparer(func(a, b json.RawMessage) bool {
	norm := func(r json.RawMessage) string {
		if len(bytes.TrimSpace(r)) == 0 {
			return "null"
		}
		var v any
		if json.Unmarshal(r, &v) != nil {
			return string(r)
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	return norm(a) == norm(b)
})

// isObject reports whether body is one well-formed JSON object: a body whose refusal must name a
// field.
func isObject(body []byte) bool {
	b := bytes.TrimSpace(body)
	return json.Valid(b) && len(b) > 0 && b[0] == '{'
}

// checkRefusal asserts err is a client error, and that it names a field when body is an object.
func checkRefusal(t *testing.T, body []byte, err error) {
	t.Helper()
	var e *httpjson.Error
	if !errors.As(err, &e) {
		t.Fatalf("refusal %T %v is not an *httpjson.Error", err, err)
	}
	if e.Status != http.StatusBadRequest && e.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("refusal status %d (%s), want 400 or 413", e.Status, e.Message)
	}
	field, _ := e.Extra["field"].(string)
	if isObject(body) && field == "" {
		t.Fatalf("refusal of a JSON object names no field: %s", e.Message)
	}
	if field != "" && !strings.Contains(e.Message, field) {
		t.Fatalf("refusal %q does not mention its field %q", e.Message, field)
	}
}

func readTurnBody(body []byte) (*turnRequest, turn.Input, error) {
	h := &Handler{opts: Options{MaxBodyBytes: DefaultMaxBodyBytes}}
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	return h.readTurn(httptest.NewRecorder(), r)
}

// FuzzReadTurn reads POST / bodies: AI SDK chat requests with their UI message parts, the
// "message" shorthand and the compact "approvals" list.
func FuzzReadTurn(f *testing.F) {
	for _, s := range []string{
		`{"id":"chat-1","trigger":"submit-message","agentId":"demo","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"what time is it?"}]}]}`,
		`{"agentId":"demo","message":"hello"}`,
		`{"agentId":"demo","id":"c","approvals":[{"approvalId":"a","approved":true},{"approvalId":"b","approved":false,"reason":"no","toolCallId":"t","input":{"x":1}}]}`,
		`{"agentId":"d","id":"c","messageId":"m1","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"go"}]},{"id":"m1","role":"assistant","parts":[{"type":"step-start"},{"type":"tool-deploy","toolCallId":"t1","state":"approval-responded","input":{"env":"prod"},"approval":{"id":"ap1","approved":true}}]}]}`,
		`{"agentId":"demo","id":"c","onPendingApprovals":"deny","toolApproval":{"x":"approved"},"message":"hi"}`,
		`{"agentId":"demo","id":"c","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":1}]}]}`,
		`{"agentId":"demo","id":"c","message":"hi","approvals":[{"approvalId":"a","approved":true}]}`,
		`{"agentId":"demo","id":"c","messages":[{"id":"a","role":"system","parts":[]}]}`,
		`{"agentId":"demo","approvals":[{"approvalId":"a","approved":true}]}`,
		`{"agentId":"demo","id":"c","approvals":[{"approvalId":"a","approved":true},{"approvalId":"a","approved":false}]}`,
		`{"agentId":"demo","trigger":"regenerate-message","message":"x"}`,
		`{"agentId":"demo","message":"a","message":"b"}`,
		`{"agentId":`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, in, err := readTurnBody(body)
		if err != nil {
			checkRefusal(t, body, err)
			return
		}
		// What the parser promises of an accepted request.
		switch {
		case !ids.Valid(req.AgentID) || !ids.Valid(req.ConversationID) || req.EventID != "" && !ids.Valid(req.EventID):
			t.Fatalf("accepted ids agentId %q id %q eventId %q", req.AgentID, req.ConversationID, req.EventID)
		case req.ConversationID == "":
			t.Fatal("accepted request has no conversation id")
		case req.Trigger != "" && req.Trigger != "submit-message":
			t.Fatalf("accepted trigger %q", req.Trigger)
		case (in.Message == nil) == (in.Decisions == nil):
			t.Fatalf("accepted input has message %v and decisions %v: want exactly one", in.Message, in.Decisions)
		}
		if m := in.Message; m != nil {
			if !ids.Valid(m.ID) || store.MessageBytes(*m) > store.MaxMessageBytes || m.Role != model.RoleUser || len(m.Parts) != 1 || strings.TrimSpace(m.Text()) == "" {
				t.Fatalf("accepted message %+v: want an id, role user and one non-blank text part", m)
			}
		}
		seen := map[string]bool{}
		for _, d := range in.Decisions {
			if !ids.Valid(d.ApprovalID) || d.Approved == nil || seen[d.ApprovalID] {
				t.Fatalf("accepted decisions %+v: want each with an id, once, and approved set", in.Decisions)
			}
			seen[d.ApprovalID] = true
		}

		// The accepted request, encoded again, reads back the same.
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("encoding the accepted request: %v", err)
		}
		req2, in2, err := readTurnBody(again)
		if err != nil {
			t.Fatalf("the accepted request %s, encoded again, is refused: %v", again, err)
		}
		opts := cmp.Options{jsonEqual}
		if diff := cmp.Diff(req, req2, opts); diff != "" {
			t.Fatalf("request round trip (-first +again):\n%s", diff)
		}
		if diff := cmp.Diff(in.Decisions, in2.Decisions, opts); diff != "" {
			t.Fatalf("decisions round trip (-first +again):\n%s", diff)
		}
		if in.RespondsTo != in2.RespondsTo || (in.Message != nil && in.Message.Text() != in2.Message.Text()) {
			t.Fatalf("input round trip: %+v then %+v", in, in2)
		}
	})
}

// FuzzParseCompletion reads the bodies of POST /async-tools/{resultId}/complete.
func FuzzParseCompletion(f *testing.F) {
	for _, s := range []string{
		`{"status":"completed","response":{"ok":true,"rows":[1,2]}}`,
		`{"status":"completed","response":"plain text"}`,
		`{"status":"completed","response":null}`,
		`{"status":"failed","error":"upstream timed out"}`,
		`{"status":"failed","error":"  "}`,
		`{"status":"failed","error":"x","response":{}}`,
		`{"status":"completed"}`,
		`{"status":"done","response":1}`,
		`{"status":1}`,
		`{"status":"completed","response":1,"extra":true}`,
		`{"status":"completed","response":1} {}`,
		`{"status":"completed","status":"failed","error":"x"}`,
		`nope`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := httpjson.CheckKeys(body)
		var out asynctools.Outcome
		if err == nil {
			out, err = completion.Parse(body)
		}
		if err != nil {
			checkRefusal(t, body, err)
			return
		}
		encoded := map[string]any{"status": out.Status}
		switch out.Status {
		case asynctools.Completed:
			if len(bytes.TrimSpace(out.Response)) == 0 || !json.Valid(out.Response) || out.Error != "" {
				t.Fatalf("accepted completed outcome %+v: want a JSON response and no error", out)
			}
			encoded["response"] = out.Response
		case asynctools.Failed:
			if strings.TrimSpace(out.Error) == "" || len(out.Response) != 0 {
				t.Fatalf("accepted failed outcome %+v: want an error and no response", out)
			}
			encoded["error"] = out.Error
		default:
			t.Fatalf("accepted status %q", out.Status)
		}
		again, err := json.Marshal(encoded)
		if err != nil {
			t.Fatalf("encoding %+v: %v", out, err)
		}
		out2, err := completion.Parse(again)
		if err != nil {
			t.Fatalf("the accepted outcome, encoded again as %s, is refused: %v", again, err)
		}
		if diff := cmp.Diff(out, out2, jsonEqual); diff != "" {
			t.Fatalf("outcome round trip (-first +again):\n%s", diff)
		}
	})
}

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
	if !cmp.Equal(json.RawMessage(out), json.RawMessage(again), jsonEqual) {
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
