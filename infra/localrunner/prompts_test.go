package localrunner_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/store"
)

// A prompt tool over real HTTP: the caller's file goes to the nested loop's first message
// (initAttachmentsProperty) with the call's message (initUserMessageProperty), on the prompt's own
// model and system prompt; the client is shown the nested work as data-prompt-tool parts, the
// caller's model gets the shaped result, and /status shows the nested messages, marked, beside
// the caller's answer.
func TestAPromptToolOverHTTP(t *testing.T) {
	stack := testenv.Stack(t)
	e, mock, block := newMockModelEnv(t, stack, "A dot.")
	caller := e.agent(t, `{"name":"caller","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"describe","input":{"question":"what is in the picture?","files":["`+attachments.ID(pixel)+`"]}}]},
		{"text":"Seen: {{toolResults}}"}]},
		"prompts":{"describe":{"system":"You describe pictures.","model":`+block+`,
			"inputSchema":{"type":"object","properties":{"question":{"type":"string"},"files":{"type":"array","items":{"type":"string"}}},"required":["question"]},
			"initUserMessageProperty":"question","initAttachmentsProperty":"files"}}}`)
	data := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pixel)

	res := call(t, e.srv, http.MethodPost, "/", e.secret, fileMessage(caller, "prompt-1", data))
	if res.status != http.StatusOK {
		t.Fatalf("POST / = %d %s", res.status, res.body)
	}
	cs := testenv.Chunks(t, bytes.NewReader(res.body))
	reqs := mock.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the prompt's model got %d requests, want 1", len(reqs))
	}
	for _, want := range []string{`"You describe pictures."`, `what is in the picture?`, `"url":"` + data + `"`} {
		if !bytes.Contains(reqs[0].Body, []byte(want)) {
			t.Errorf("the nested request %s lacks %s", reqs[0].Body, want)
		}
	}
	if bytes.Contains(reqs[0].Body, []byte("what is this?")) {
		t.Errorf("the nested request carries the caller's conversation: %s", reqs[0].Body)
	}
	parts := chunksOf(cs, "data-prompt-tool")
	if len(parts) < 2 {
		t.Fatalf("the stream has %d data-prompt-tool parts, want the call's progress: %v", len(parts), cs)
	}
	last, _ := parts[len(parts)-1]["data"].(map[string]any)
	if last["state"] != "completed" || last["prompt"] != "describe" || parts[0]["id"] != last["toolCallId"] {
		t.Errorf("the last progress part is %v, want describe completed under the call's id", parts[len(parts)-1])
	}
	if text := streamText(cs); !strings.Contains(text, `Seen: [{"text":"A dot."}]`) {
		t.Errorf("the caller answered %q, want the shaped result", text)
	}
	// The official AI SDK client reads the stream and keeps one data-prompt-tool part, the last.
	out, stderr, err := testenv.CheckUIStream(t, res.body)
	if err != nil {
		t.Fatalf("the AI SDK refused the stream: %v\n%s", err, stderr)
	}
	var checked struct {
		Message struct{ Parts []map[string]any }
	}
	if err := json.Unmarshal(out, &checked); err != nil {
		t.Fatal(err)
	}
	var kept []map[string]any
	for _, p := range checked.Message.Parts {
		if p["type"] == "data-prompt-tool" {
			kept = append(kept, p)
		}
	}
	if len(kept) != 1 || kept[0]["data"].(map[string]any)["state"] != "completed" {
		t.Errorf("the AI SDK built data-prompt-tool parts %v, want one, completed", kept)
	}

	// /async: the status lists the nested messages, marked, and the caller's answer as its text.
	s := e.async(t, fileMessage(caller, "prompt-2", data))
	final, _ := e.waitStatus(t, s.EventID, store.EventCompleted)
	var nested []model.Message
	for _, m := range final.Messages {
		if m.IsNested() {
			nested = append(nested, m)
		}
	}
	if len(nested) != 2 || nested[0].Nested == nil || nested[0].Nested.ToolName != "describe" || nested[1].Text() != "A dot." {
		raw, _ := json.Marshal(final.Messages)
		t.Errorf("the status shows nested messages %s, want the call's message and the prompt's answer", raw)
	}
	if final.Text == nil || !strings.HasPrefix(*final.Text, "Seen:") {
		t.Errorf("the status's text is %v, want the caller's answer", final.Text)
	}
}

// Over the App Server WebSocket, a prompt tool's nested loop goes out as tool progress: running,
// then completed, under the call's id, between the call and its return.
func TestPromptToolProgressOverWebSocket(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "ws-prompt")
	c, rt := startRuntime(t, srv, secret, `{"name":"caller","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"summarize","input":{"message":"the week"}}]},{"text":"Heard: {{toolResults}}"}]},
		"prompts":{"summarize":{"system":"Summarise.","model":{"provider":"scripted","script":[{"text":"A quiet week."}]}}}}`)
	c.send(map[string]any{"type": "input", "request_id": "in-1", "runtime": rt, "payload": map[string]any{
		"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": "sum it up"}},
	}})
	_, seen := c.await("stop_reason", 30*time.Second, deltaIs("stop_reason"))
	var order, states []string
	callID := ""
	for _, f := range seen {
		d, _ := f["delta"].(map[string]any)
		switch d["message_type"] {
		case "tool_call_message":
			call, _ := d["tool_call"].(map[string]any)
			callID, _ = call["tool_call_id"].(string)
			order = append(order, "call")
		case "tool_progress_message":
			p, _ := d["progress"].(map[string]any)
			if d["tool_call_id"] != callID || p["prompt"] != "summarize" {
				t.Errorf("tool progress %v is not the call's (%s)", d, callID)
			}
			states = append(states, fmt.Sprint(p["state"]))
			order = append(order, "progress")
		case "tool_return_message":
			order = append(order, "return")
		}
	}
	if len(states) == 0 || states[0] != "running" || states[len(states)-1] != "completed" {
		t.Errorf("progress states %v, want running first and completed last", states)
	}
	if len(order) < 3 || order[0] != "call" || order[len(order)-1] != "return" {
		t.Errorf("frames %v, want the call, its progress, then its return", order)
	}
}
