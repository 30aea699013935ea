package agent_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/wire/jsonschema"
	"github.com/google/go-cmp/cmp"
)

const citySchema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`

func cityOutput(t *testing.T) *agent.Output {
	t.Helper()
	compiled, err := jsonschema.Compile(json.RawMessage(citySchema))
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Output{Schema: json.RawMessage(citySchema), Compiled: compiled}
}

func TestRunStructuredOutput(t *testing.T) {
	tests := []struct {
		name   string
		script string
		// want are the kinds of what the turn saved, as role:kind[:output], and its output.
		want   []string
		output string
		err    string // a substring of the turn's error; empty when it succeeds
	}{
		{
			name:   "valid at once",
			script: `[{"toolCalls":[{"name":"current_time"}]},{"text":" {\"city\":\"Oslo\"}\n"}]`,
			want:   []string{"assistant:", "tool:", "assistant::output"},
			output: `{"city":"Oslo"}`,
		},
		{
			name:   "valid on the retry",
			script: `[{"text":"Oslo"},{"text":"{\"city\":\"Oslo\"}"}]`,
			want:   []string{"assistant:", "user:output-retry", "assistant::output"},
			output: `{"city":"Oslo"}`,
		},
		{
			name:   "invalid twice",
			script: `[{"text":"{\"town\":\"Oslo\"}"},{"text":"[\"Oslo\"]"}]`,
			want:   []string{"assistant:", "user:output-retry", "assistant:"},
			err:    "the answer is not valid against the agent's output schema: the answer is not a JSON object",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			cfg := agent.Config{Model: rec.wrap(scripted(t, tt.script)), Tools: newSet(t, currentTime()), Save: rec.save, NewID: sequentialIDs(), Output: cityOutput(t)}
			events, errs, _ := run(cfg, userMsg("Where?"))
			var got []string
			for _, batch := range rec.saved {
				for _, m := range batch {
					s := string(m.Role) + ":" + m.Kind
					if m.Output {
						s += ":output"
					}
					got = append(got, s)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("saved (-want +got):\n%s", diff)
			}
			for _, r := range rec.requests {
				if string(r.Output) != citySchema {
					t.Errorf("request output schema = %s, want %s", r.Output, citySchema)
				}
			}
			var outputs []string
			for _, ev := range events {
				if ev.Type == agent.OutputAvailable {
					outputs = append(outputs, string(ev.Output))
				}
			}
			if tt.err != "" {
				var oe *agent.OutputError
				if len(errs) != 1 || !errors.As(errs[0], &oe) || !strings.Contains(errs[0].Error(), tt.err) {
					t.Fatalf("errors = %v, want one *agent.OutputError containing %q", errs, tt.err)
				}
				if outputs != nil {
					t.Errorf("outputs = %v, want none", outputs)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("errors = %v", errs)
			}
			if diff := cmp.Diff([]string{tt.output}, outputs); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			if n := len(events); n < 2 || events[n-2].Type != agent.OutputAvailable || events[n-1].Type != agent.Finish {
				t.Errorf("last events = %v, want the output then the finish", types(events))
			}
		})
	}
}

func TestRetryNoteSaysWhy(t *testing.T) {
	rec := &recorder{}
	cfg := agent.Config{Model: rec.wrap(scripted(t, `[{"text":"{\"town\":\"Oslo\"}"},{"text":"{\"city\":\"Oslo\"}"}]`)), Save: rec.save, Output: cityOutput(t)}
	runOK(t, cfg, userMsg("Where?"))
	if len(rec.requests) != 2 {
		t.Fatalf("model calls = %d, want 2", len(rec.requests))
	}
	// The retry is asked with the answer and the note, as they were saved.
	msgs := rec.requests[1].Messages
	note := msgs[len(msgs)-1]
	if note.Role != model.RoleUser || note.Kind != model.KindOutputRetry || !strings.Contains(note.Text(), "city is required") {
		t.Errorf("last message of the retry = %+v, want the note naming the missing city", note)
	}
	if msgs[len(msgs)-2].Text() != `{"town":"Oslo"}` {
		t.Errorf("the answer before the note = %q", msgs[len(msgs)-2].Text())
	}
}
