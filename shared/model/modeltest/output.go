package modeltest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
)

// OutputSchema is the output schema of the adapters' structured-output fixtures (output.json).
const OutputSchema = `{"type":"object","properties":{"city":{"type":"string"},"sunny":{"type":"boolean"}},"required":["city","sunny"]}`

// OutputRequest is the request of the structured-output fixtures: the retry the loop makes after
// a prose answer, with the note that asks again, under the output schema.
func OutputRequest() *model.Request {
	return &model.Request{
		System: "Say where it is sunny.",
		Messages: []model.Message{
			User("Where is it sunny?"),
			{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: "It is sunny in Oslo."}}},
			{Role: model.RoleUser, Kind: model.KindOutputRetry, Parts: []model.Part{{Type: model.PartText, Text: "Your answer is not valid against the output schema (the answer is not a JSON object). Answer again with only a JSON object valid against the schema."}}},
		},
		Output: json.RawMessage(OutputSchema),
	}
}

// CheckOutput streams OutputRequest and requires an answer whose text is the object of the
// fixtures, {"city":"Oslo","sunny":true}, ending with stop and usage.
func CheckOutput(t *testing.T, m agent.Model, usage model.Usage) {
	t.Helper()
	events, err := Collect(t.Context(), m, OutputRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var text strings.Builder
	for _, ev := range events {
		switch ev.Type {
		case model.EventTextDelta:
			text.WriteString(ev.Text)
		case model.EventFinish:
			if ev.Finish != model.FinishStop || ev.Usage != usage {
				t.Errorf("finish %s with usage %+v, want stop with %+v", ev.Finish, ev.Usage, usage)
			}
		default:
			t.Errorf("event %+v, want only text and the finish", ev)
		}
	}
	if got, want := text.String(), `{"city":"Oslo","sunny":true}`; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	if n := len(events); n == 0 || events[n-1].Type != model.EventFinish {
		t.Errorf("events %+v do not end with the finish", events)
	}
}
