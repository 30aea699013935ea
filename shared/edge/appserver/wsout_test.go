package appserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/edge/appserver"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/turn"
)

// recordingPoster keeps every frame posted, in order; like API Gateway, it refuses a frame over
// its limit.
type recordingPoster struct {
	mu     sync.Mutex
	frames []map[string]any
}

func (p *recordingPoster) Post(_ context.Context, _ string, data []byte) error {
	if len(data) > appserver.MaxFrameBytes {
		return fmt.Errorf("a frame of %d bytes, more than %d", len(data), appserver.MaxFrameBytes)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frames = append(p.frames, m)
	return nil
}

func (p *recordingPoster) Disconnect(context.Context, string) error {
	return errors.New("the output never closes a connection")
}

// deltas returns the message types of the stream deltas posted so far and the content of
// each assistant_message and reasoning_message (prefixed "reasoning: ").
func (p *recordingPoster) deltas() (kinds, texts []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.frames {
		d, _ := f["delta"].(map[string]any)
		if f["type"] != "stream_delta" || d == nil {
			continue
		}
		kind, _ := d["message_type"].(string)
		kinds = append(kinds, kind)
		switch kind {
		case "assistant_message":
			texts = append(texts, d["content"].(string))
		case "reasoning_message":
			texts = append(texts, "reasoning: "+d["reasoning"].(string))
		}
	}
	return kinds, texts
}

// newOut subscribes one connection to a runtime on DynamoDB Local and returns the runtime's
// output with a text window, and what reached the connection.
func newOut(t *testing.T, window time.Duration) (*appserver.TestOut, *recordingPoster) {
	t.Helper()
	stack := testenv.Stack(t)
	reg := connections.New(stack.DB, stack.Name("ConnectionsTable"))
	ctx, now := context.Background(), time.Now()
	conn := connections.Connection{ID: "conn-1", AccountID: "acc_1", Channel: connections.Both}
	if err := reg.Connect(ctx, conn, now); err != nil {
		t.Fatal(err)
	}
	if err := reg.Subscribe(ctx, conn, "agent-1", "conv-1", nil, now); err != nil {
		t.Fatal(err)
	}
	p := &recordingPoster{}
	return appserver.NewTestOut(reg, p, "acc_1", "agent-1", "conv-1", window), p
}

// A model streams a token or two per delta; the controller gets them as few frames, in order,
// with nothing lost.
func TestWebSocketTextIsCoalesced(t *testing.T) {
	ctx := context.Background()
	t.Run("a burst becomes one frame, sent before the next event", func(t *testing.T) {
		out, p := newOut(t, time.Minute)
		var want strings.Builder
		for i := range 200 {
			d := " word" + string(rune('a'+i%26))
			want.WriteString(d)
			out.Event(ctx, textDelta("text-1-1", d))
		}
		out.Event(ctx, turn.Event{Kind: turn.Loop, Loop: agent.Event{Type: agent.ToolInputAvailable, ToolCallID: "call_1", ToolName: "current_time", Input: json.RawMessage(`{}`)}})
		kinds, texts := p.deltas()
		if strings.Join(kinds, ",") != "assistant_message,tool_call_message" || len(texts) != 1 || texts[0] != want.String() {
			t.Errorf("frames %v with text %q, want the whole text in one assistant_message before the tool call", kinds, texts)
		}
	})
	t.Run("text waits at most the window", func(t *testing.T) {
		out, p := newOut(t, 20*time.Millisecond)
		out.Event(ctx, textDelta("text-1-1", "Thinking"))
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, texts := p.deltas(); len(texts) == 1 && texts[0] == "Thinking" {
				break
			}
			if time.Now().After(deadline) {
				kinds, texts := p.deltas()
				t.Fatalf("after 5s with no other event: frames %v, text %q; want the text sent", kinds, texts)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("parts stay apart and a long part is split", func(t *testing.T) {
		out, p := newOut(t, time.Minute)
		out.Event(ctx, textDelta("text-1-1", "first part"))
		chunk := strings.Repeat("x", 1024)
		for range 40 {
			out.Event(ctx, textDelta("text-2-1", chunk))
		}
		out.End(ctx)
		kinds, texts := p.deltas()
		if len(texts) < 3 || texts[0] != "first part" || strings.Join(texts[1:], "") != strings.Repeat(chunk, 40) {
			t.Fatalf("texts %d (first %.20q), want the first part alone, then the second in frames of at most 16 KiB", len(texts), texts)
		}
		for _, s := range texts[1:] {
			if len(s) > 16<<10 {
				t.Errorf("a frame holds %d bytes of text, want at most %d", len(s), 16<<10)
			}
		}
		if kinds[len(kinds)-1] != "stop_reason" {
			t.Errorf("frames %v, want the text before the stop_reason", kinds)
		}
	})
	t.Run("reasoning is coalesced apart from the answer, as reasoning messages", func(t *testing.T) {
		out, p := newOut(t, time.Minute)
		for _, d := range []string{"Check", " the", " clock."} {
			out.Event(ctx, turn.Event{Kind: turn.Loop, Loop: agent.Event{Type: agent.ReasoningDelta, ID: "reasoning-1-1", Text: d}})
		}
		out.Event(ctx, textDelta("text-1-2", "It is noon."))
		out.End(ctx)
		kinds, texts := p.deltas()
		if strings.Join(kinds[:2], ",") != "reasoning_message,assistant_message" || strings.Join(texts, "|") != "reasoning: Check the clock.|It is noon." {
			t.Errorf("frames %v with texts %q, want one reasoning_message, then the answer", kinds, texts)
		}
		for _, f := range p.frames {
			if d, _ := f["delta"].(map[string]any); d != nil && d["message_type"] == "reasoning_message" && d["source"] != "reasoner_model" {
				t.Errorf("reasoning_message %v, want source reasoner_model", d)
			}
		}
	})
	t.Run("the end of the invocation sends what is queued", func(t *testing.T) {
		out, p := newOut(t, time.Minute)
		out.Event(ctx, textDelta("text-1-1", "Done."))
		out.End(ctx)
		kinds, texts := p.deltas()
		if len(kinds) == 0 || kinds[0] != "assistant_message" || kinds[len(kinds)-1] != "stop_reason" || len(texts) != 1 || texts[0] != "Done." {
			t.Errorf("frames %v, texts %q; want Done. first and stop_reason last", kinds, texts)
		}
		// A turn that goes on waiting for external calls says nothing more at its end.
		out, p = newOut(t, time.Minute)
		out.Event(ctx, textDelta("text-1-1", "Asking the controller."))
		out.EndWaiting(ctx)
		if _, texts := p.deltas(); len(texts) != 1 || texts[0] != "Asking the controller." {
			t.Errorf("texts %q when the invocation ended waiting, want the queued text sent", texts)
		}
	})
}

func textDelta(id, text string) turn.Event {
	return turn.Event{Kind: turn.Loop, Loop: agent.Event{Type: agent.TextDelta, ID: id, Text: text}}
}

// A tool's result reaches the controller within API Gateway's frame limit, even one within the
// loop's bound that a frame, which holds it twice and escapes it again, would take past the
// limit: cut, with a note of what was left out.
func TestWebSocketToolReturnFitsAFrame(t *testing.T) {
	ctx := context.Background()
	out, p := newOut(t, time.Minute)
	output := `[` + strings.Repeat(`"",`, agent.MaxResultBytes/3-1) + `""]` // two bytes in three escaped
	out.Event(ctx, turn.Event{Kind: turn.Loop, Loop: agent.Event{Type: agent.ToolOutput, ToolCallID: "call_1", ToolName: "rows", Output: json.RawMessage(output)}})
	var got string
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.frames {
		if d, _ := f["delta"].(map[string]any); d != nil && d["message_type"] == "tool_return_message" {
			got, _ = d["tool_return"].(string)
		}
	}
	i := strings.LastIndex(got, "\n\n[truncated: ")
	if i < 0 || !strings.HasPrefix(output, got[:i]) || i < agent.MaxResultBytes/4 {
		t.Fatalf("tool_return %d bytes (ends %q), want the result's beginning cut with a note", len(got), got[max(0, len(got)-200):])
	}
}

// A compaction reaches the controller as a summary_message, live and on sync, with what it
// covers.
func TestWebSocketSummaryMessage(t *testing.T) {
	ctx := context.Background()
	c := &model.Compaction{KeptFrom: "msg_7", Messages: 6, TokensBefore: 8100, TokensAfter: 3500}
	out, p := newOut(t, time.Minute)
	out.Event(ctx, turn.Event{Kind: turn.Loop, Loop: agent.Event{Type: agent.Compacted, ID: "msg_s1", Text: "So far: a plan.", Compaction: c}})
	out.Replay(ctx, []model.Message{{ID: "msg_s1", Role: model.RoleUser, Kind: model.KindSummary, Compaction: c,
		Parts: []model.Part{{Type: model.PartText, Text: "So far: a plan."}}}})
	p.mu.Lock()
	defer p.mu.Unlock()
	var got []map[string]any
	for _, f := range p.frames {
		if d, _ := f["delta"].(map[string]any); d != nil && d["message_type"] == "summary_message" {
			got = append(got, d)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d summary_message deltas in %v, want the live one and the replayed one", len(got), p.frames)
	}
	for _, d := range got {
		if d["id"] != "msg_s1" || d["summary"] != "So far: a plan." || d["compacted_messages"] != 6.0 || d["tokens_before"] != 8100.0 || d["tokens_after"] != 3500.0 {
			t.Errorf("summary_message %v", d)
		}
	}
}

// A loop_error delta is a message like every other delta: it carries their type.
func TestWebSocketLoopErrorIsAMessage(t *testing.T) {
	out, p := newOut(t, time.Minute)
	out.Event(context.Background(), turn.Event{Kind: turn.Failed, Error: "the model failed"})
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.frames {
		if d, _ := f["delta"].(map[string]any); d != nil && d["message_type"] == "loop_error" {
			if d["type"] != "message" || d["message"] != "the model failed" || d["is_terminal"] != true {
				t.Errorf("loop_error delta %v, want type message, the failure and is_terminal", d)
			}
			return
		}
	}
	t.Fatalf("no loop_error delta in %v", p.frames)
}

// A controller that reconnected while its old socket lingers has registered its tools twice: a
// turn sees each once, the first connection's, and the second's scoped tools only when selected.
func TestReregisteredToolsAreSeenOnce(t *testing.T) {
	tools := []connections.ToolGroup{{Tools: []connections.ToolDef{{Name: "pick_file", Parameters: json.RawMessage(`{"type":"object"}`)}}}}
	subs := []connections.Subscriber{
		{ConnectionID: "old", Tools: tools},
		{ConnectionID: "new", Tools: append(tools, connections.ToolGroup{ScopeID: "ide", Tools: []connections.ToolDef{{Name: "open_tab"}}})},
	}
	if got, want := appserver.VisibleTools(subs, nil), [][2]string{{"pick_file", "old"}}; !slices.Equal(got, want) {
		t.Errorf("tools without a scope selected %v, want %v", got, want)
	}
	if got, want := appserver.VisibleTools(subs, []string{"ide"}), [][2]string{{"pick_file", "old"}, {"open_tab", "new"}}; !slices.Equal(got, want) {
		t.Errorf("tools with scope ide %v, want %v", got, want)
	}
}
