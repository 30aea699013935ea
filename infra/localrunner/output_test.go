package localrunner_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/google/go-cmp/cmp"
)

// reporter answers with a structured output: it looks the time up, answers in prose (which the
// schema refuses), and, asked once more, with the object.
const reporter = `{"name":"reporter","model":{"provider":"scripted","script":[
  {"toolCalls":[{"name":"current_time","input":{}}]},
  {"text":"It is Oslo."},
  {"text":"{\"city\":\"Oslo\",\"sunny\":true}"}]},
 "tools":{"current_time":{}},
 "output":{"schema":{"type":"object","properties":{"city":{"type":"string"},"sunny":{"type":"boolean"}},"required":["city","sunny"]}}}`

// stubborn never answers with an object.
const stubborn = `{"name":"stubborn","model":{"provider":"scripted","script":[{"text":"Oslo, I think."}]},
 "output":{"schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`

// partTypes are the types of a UIMessage's parts, in order.
func partTypes(msg map[string]any) []string {
	var types []string
	for _, p := range msg["parts"].([]any) {
		types = append(types, p.(map[string]any)["type"].(string))
	}
	return types
}

// dataOutputs are the data of the data-output parts of a UIMessage.
func dataOutputs(msg map[string]any) []any {
	var out []any
	for _, p := range msg["parts"].([]any) {
		if part := p.(map[string]any); part["type"] == "data-output" {
			out = append(out, part["data"])
		}
	}
	return out
}

// An agent with an output schema: the turn's object reaches the AI SDK's chat client as one
// data-output part after the answer that passed (the prose one before it was asked again), the
// conversation read back and the turn's replay show the same message, and an /async turn's
// status has it as output.
func TestStructuredOutputReachesClients(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, reporter)
	c := &chatClient{e: e, agentID: agentID, id: "output-chat"}
	c.send(t, map[string]any{"type": "text", "text": "where is it sunny?"})

	want := []any{map[string]any{"city": "Oslo", "sunny": true}}
	msg := c.list[len(c.list)-1]
	if diff := cmp.Diff(want, dataOutputs(msg)); diff != "" {
		t.Fatalf("data-output parts of the streamed message (-want +got):\n%s\n%v", diff, msg)
	}
	wantTypes := []string{"step-start", "tool-current_time", "step-start", "text", "step-start", "text", "data-output"}
	if diff := cmp.Diff(wantTypes, partTypes(msg)); diff != "" {
		t.Errorf("parts of the streamed message (-want +got):\n%s", diff)
	}

	c.checkReadBack(t)

	// The turn's replay, which a page that resumes reads, has the part too.
	replay := call(t, e.srv, http.MethodGet, "/chat/"+c.id+"/stream", e.secret, "")
	if replay.status != http.StatusOK {
		t.Fatalf("replaying the turn = %d %s", replay.status, replay.body)
	}
	if diff := cmp.Diff(want, dataOutputs(read(t, nil, replay.body))); diff != "" {
		t.Errorf("data-output parts of the replayed message (-want +got):\n%s", diff)
	}

	ev := e.async(t, `{"agentId":"`+agentID+`","message":"and now?"}`)
	final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
	var s struct {
		Output any `json:"output"`
	}
	if err := json.Unmarshal([]byte(final.raw), &s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[0], s.Output); diff != "" {
		t.Errorf("the status's output (-want +got):\n%s\n%s", diff, final.raw)
	}
}

// A model that answers prose twice fails the turn with the validation error: on the stream as
// its error chunk, in /status as the failed event's error.
func TestStructuredOutputInvalidTwiceFails(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, stubborn)
	const why = "the answer is not valid against the agent's output schema: the answer is not a JSON object"

	body := (&chatClient{e: e, agentID: agentID, id: "output-fail"}).post(t, map[string]any{"id": "output-fail", "agentId": agentID, "trigger": "submit-message",
		"messages": []any{map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "where?"}}}}})
	if !bytes.Contains(body, []byte(`"type":"error","errorText":"`+why)) || bytes.Contains(body, []byte(`data-output`)) {
		t.Errorf("the stream of the failed turn lacks its error chunk (or has an output):\n%s", body)
	}

	ev := e.async(t, `{"agentId":"`+agentID+`","message":"where?"}`)
	final := e.status(t, ev.EventID)
	for deadline := time.Now().Add(asyncWait); final.Status != store.EventFailed; final = e.status(t, ev.EventID) {
		if final.Status == store.EventCompleted || time.Now().After(deadline) {
			t.Fatalf("the turn did not fail: %s", final.raw)
		}
		time.Sleep(pollEvery)
	}
	if !strings.HasPrefix(final.Error, why) || strings.Contains(final.raw, `"output"`) {
		t.Errorf("the failed status = %s, want its error to begin %q and no output", final.raw, why)
	}
	// Both answers and the note between them are kept.
	var kinds []string
	for _, m := range final.Messages {
		kinds = append(kinds, string(m.Role)+"/"+m.Kind)
	}
	if diff := cmp.Diff([]string{"user/", "assistant/", "user/output-retry", "assistant/"}, kinds); diff != "" {
		t.Errorf("the failed turn's messages (-want +got):\n%s", diff)
	}
}

// A schema that is not an object's, or that points outside itself, is refused naming the field.
func TestStructuredOutputBadSchema(t *testing.T) {
	e := newAsyncEnv(t)
	for _, schema := range []string{`{"type":"array"}`, `{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`} {
		res := call(t, e.srv, http.MethodPost, "/accounts/me/agents", e.secret, `{"model":{"provider":"scripted","script":[{"text":"{}"}]},"output":{"schema":`+schema+`}}`)
		if res.status != http.StatusBadRequest || res.json(t)["field"] != "output.schema" {
			t.Errorf("creating an agent with output schema %s = %d %s, want 400 naming output.schema", schema, res.status, res.body)
		}
	}
}
