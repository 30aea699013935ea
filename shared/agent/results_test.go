package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
)

// jsonSize is the size of s as a JSON string.
func jsonSize(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

// noteOf splits a cut text into what it shows and its note; ok is false when it has no note.
func noteOf(s string) (shown, note string, ok bool) {
	i := strings.LastIndex(s, "\n\n[truncated: ")
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i:], true
}

// Truncate keeps a text that fits whole, and cuts one that does not to the longest prefix that
// fits with its note, between characters, counting what JSON escapes.
func TestTruncate(t *testing.T) {
	for _, tt := range []struct {
		name  string
		text  string
		limit int
	}{
		{"fits", "short enough", 100},
		{"ascii", strings.Repeat("abcdefghij", 10_000), 4096},
		{"escapes", strings.Repeat(`<"\&>`+"\n\t\x01", 5_000), 4096},
		{"multi-byte", strings.Repeat("é€😀", 10_000), 4096},
		{"escapes near the limit", strings.Repeat("<", 3000), 4096},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := agent.Truncate(tt.text, tt.limit)
			if jsonSize(tt.text) <= tt.limit {
				if got != tt.text {
					t.Errorf("Truncate changed a text that fits: %q", got)
				}
				return
			}
			if n := jsonSize(got); n > tt.limit {
				t.Errorf("the cut text encodes in %d bytes, more than %d", n, tt.limit)
			}
			shown, note, ok := noteOf(got)
			if !ok || !strings.HasPrefix(tt.text, shown) || !utf8.ValidString(shown) {
				t.Fatalf("the cut text is not a whole-character prefix with a note: %.200q…", got)
			}
			want := fmt.Sprintf("this result is %d bytes; only its first %d are shown and the other %d were left out.", len(tt.text), len(shown), len(tt.text)-len(shown))
			if !strings.Contains(note, want) {
				t.Errorf("note %q, want it to say %q", note, want)
			}
			// One more character would not fit: the prefix is the longest.
			_, size := utf8.DecodeRuneInString(tt.text[len(shown):])
			if longer := tt.text[:len(shown)+size] + note; jsonSize(longer) <= tt.limit-2 {
				t.Errorf("a prefix %d bytes longer would still fit: %d of %d", size, jsonSize(longer), tt.limit)
			}
		})
	}
}

// big is a tool that returns text of a size: as a string, inside an object, or as its error.
func big() tool.Tool {
	return tool.Tool{
		Name:        "big",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"kind":{"type":"string"},"bytes":{"type":"integer"}}}`),
		Execute: func(_ context.Context, input json.RawMessage) (any, error) {
			var args struct {
				Kind  string
				Bytes int
			}
			_ = json.Unmarshal(input, &args)
			text := strings.Repeat(`"quoted" <b> `, args.Bytes/13+1)
			switch args.Kind {
			case "object":
				return map[string]any{"rows": []string{text}}, nil
			case "error":
				return nil, errors.New(text)
			}
			return text, nil
		},
	}
}

// A result larger than its share of the step is cut where the loop makes it, whatever it is:
// the client's event, the saved result and the model's next request carry the same cut result,
// which says how large the whole was and where Config.KeepResult kept it.
func TestLargeResultsAreCutInTheLoop(t *testing.T) {
	rec := &recorder{}
	kept := map[string]string{}
	cfg := agent.Config{
		Model: rec.wrap(playback(
			[]item{
				callItem("c1", "big", `{"kind":"text","bytes":1000000}`),
				callItem("c2", "big", `{"kind":"object","bytes":1000000}`),
				callItem("c3", "big", `{"kind":"error","bytes":1000000}`),
				callItem("c4", "big", `{"kind":"text","bytes":100}`),
			},
			[]item{textItem("done")},
		)),
		Tools: newSet(t, big()),
		Save:  rec.save,
		KeepResult: func(_ context.Context, whole json.RawMessage) string {
			key := fmt.Sprintf("key-%d", len(kept)+1)
			kept[key] = string(whole)
			return key
		},
	}
	events := runOK(t, cfg, userMsg("go"))
	told := map[string]agent.Event{}
	for _, ev := range events {
		if ev.Type == agent.ToolOutput || ev.Type == agent.ToolOutputError {
			told[ev.ToolCallID] = ev
		}
	}
	saved := rec.saved[0][1]
	sent := rec.requests[1].Messages[2]
	if saved.Role != model.RoleTool || len(saved.Parts) != 4 {
		t.Fatalf("the step saved %+v, want its four results", saved)
	}
	limit := agent.MaxResultBytes // four calls: each gets the whole bound
	for i, p := range saved.Parts {
		if string(sent.Parts[i].Output) != string(p.Output) {
			t.Errorf("%s: the model got %.100s…, the conversation keeps %.100s…", p.ToolCallID, sent.Parts[i].Output, p.Output)
		}
		ev := told[p.ToolCallID]
		if p.ToolCallID == "c4" {
			if p.OutputKey != "" || p.OutputBytes != 0 || string(ev.Output) != string(p.Output) {
				t.Errorf("a small result was changed: %+v", p)
			}
			continue
		}
		whole, ok := kept[p.OutputKey]
		if !ok || len(whole) != p.OutputBytes || p.OutputBytes <= limit || len(p.Output) > limit {
			t.Errorf("%s: key %q, %d bytes of %d kept, cut to %d: want the whole kept and the result within %d", p.ToolCallID, p.OutputKey, len(whole), p.OutputBytes, len(p.Output), limit)
		}
		var text string
		if p.IsError {
			text = errorText(t, p)
			if ev.ErrorText != text {
				t.Errorf("%s: the client was told %.100q…, the model %.100q…", p.ToolCallID, ev.ErrorText, text)
			}
		} else {
			if string(ev.Output) != string(p.Output) {
				t.Errorf("%s: the client was told %.100s…, the model %.100s…", p.ToolCallID, ev.Output, p.Output)
			}
			if err := json.Unmarshal(p.Output, &text); err != nil {
				t.Fatalf("%s: the cut result is not a JSON string: %v", p.ToolCallID, err)
			}
		}
		shown, _, ok := noteOf(text)
		var wholeText string
		switch p.ToolCallID {
		case "c1":
			_ = json.Unmarshal([]byte(whole), &wholeText)
		case "c2":
			wholeText = whole // an object is shown as its JSON text
		case "c3":
			var e struct{ Error string }
			_ = json.Unmarshal([]byte(whole), &e)
			wholeText = e.Error
		}
		if !ok || !strings.HasPrefix(wholeText, shown) || len(shown) < limit/2 {
			t.Errorf("%s: the cut result shows %d bytes of the whole's %d (note: %v), want its beginning", p.ToolCallID, len(shown), len(wholeText), ok)
		}
	}
}

// Results share their step's stored message: in a step of many calls each is cut at its share
// of StepResultBytes, and without Config.KeepResult nothing is kept, but the results are cut
// all the same.
func TestManyResultsShareTheirStep(t *testing.T) {
	rec := &recorder{}
	const calls = 16
	var step []item
	for i := range calls {
		step = append(step, callItem(fmt.Sprint("c", i), "big", `{"bytes":100000}`))
	}
	cfg := agent.Config{Model: playback(step, []item{textItem("done")}), Tools: newSet(t, big()), Save: rec.save}
	runOK(t, cfg, userMsg("go"))
	saved := rec.saved[0][1]
	total := 0
	for _, p := range saved.Parts {
		b, _ := json.Marshal(p)
		total += len(b)
		if len(p.Output) > agent.StepResultBytes/calls || p.OutputKey != "" || p.OutputBytes == 0 {
			t.Errorf("%s: %d bytes, key %q, whole %d: want it cut to %d, with no key", p.ToolCallID, len(p.Output), p.OutputKey, p.OutputBytes, agent.StepResultBytes/calls)
		}
	}
	if total > agent.StepResultBytes+calls*200 {
		t.Errorf("the step's results take %d bytes, want about %d at most", total, agent.StepResultBytes)
	}
}
