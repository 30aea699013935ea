package subagent_test

import (
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn/subagent"
)

func TestOutcome(t *testing.T) {
	answer := []model.Message{
		{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "q"}}},
		{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: "first"}}},
		{Role: model.RoleTool},
		{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: "final"}}},
	}
	for _, tt := range []struct {
		name   string
		ended  subagent.Ended
		status string
		has    string
	}{
		{"completed", subagent.Ended{Status: store.EventCompleted, Messages: answer}, asynctools.Completed, `"text":"final"`},
		{"failed", subagent.Ended{Status: store.EventFailed, Error: "model unavailable"}, asynctools.Failed, "finder failed: model unavailable"},
		{"failed without a reason", subagent.Ended{Status: store.EventFailed}, asynctools.Failed, "finder failed: the turn failed"},
		{"cancelled", subagent.Ended{Status: store.EventCancelled}, asynctools.Failed, "finder was cancelled before it answered"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := subagent.Outcome("finder", "conv_sub_1", "evt_sub_ag_1.x", tt.ended)
			if err != nil {
				t.Fatal(err)
			}
			got := o.Error + string(o.Response)
			if o.Status != tt.status || !strings.Contains(got, tt.has) {
				t.Errorf("outcome %s %q, want %s with %q", o.Status, got, tt.status, tt.has)
			}
		})
	}
	if _, err := subagent.Outcome("finder", "conv_sub_1", "evt_sub_ag_1.x", subagent.Ended{Status: store.EventWaitingAsync}); err == nil {
		t.Error("a child still waiting was given an outcome")
	}
	a, b := subagent.ConversationID("acc", "conv", "evt_1", "call_1"), subagent.ConversationID("acc", "conv", "evt_1", "call_2")
	c := subagent.ConversationID("acc", "conv", "evt_2", "call_1")
	if a == b || a == c || !strings.HasPrefix(a, "conv_sub_") || a != subagent.ConversationID("acc", "conv", "evt_1", "call_1") {
		t.Errorf("calls' conversations %q, %q and %q: want distinct conv_sub_ ids per call and turn, the same for the same", a, b, c)
	}
	if id, ok := subagent.CallOf(subagent.EventID("ag_1.x")); !ok || id != "ag_1.x" {
		t.Errorf("CallOf(EventID(ag_1.x)) = %q, %v", id, ok)
	}
	if _, ok := subagent.CallOf("evt_1"); ok {
		t.Error("a client's event read as a subagent call's")
	}
}
