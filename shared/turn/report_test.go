package turn_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn"
	"github.com/google/go-cmp/cmp"
)

// Report records a turn's progress on its event; what the status route shows besides the
// status is the outcome's detail: the error, or what the turn waits for, with the refusal's
// extras.
func TestReportDetail(t *testing.T) {
	e := newEngineEnv(t)
	pending := []turn.PendingApproval{{ApprovalID: "apr_1", ToolCallID: "call_1", ToolName: "test_async", Deadline: "2030-01-02T03:04:05Z"}}
	tests := []struct {
		name string
		o    turn.Outcome
		want string // the event's detail
	}{
		{"completed", turn.Outcome{Status: turn.StatusCompleted}, `{}`},
		{"failed, with its error", turn.Outcome{Status: turn.StatusFailed, Error: "the model failed"}, `{"error":"the model failed"}`},
		{"failed without an error", turn.Outcome{Status: turn.StatusFailed}, `{"error":"the turn failed"}`},
		{"failed, with the refusal's extras", turn.Outcome{Status: turn.StatusFailed, Error: "too large", ErrExtra: map[string]any{"field": "message"}},
			`{"error":"too large","field":"message"}`},
		{"waiting for approval", turn.Outcome{Status: turn.StatusWaiting, PendingApprovals: pending},
			`{"pendingApprovals":[{"approvalId":"apr_1","toolCallId":"call_1","toolName":"test_async","expiresAt":"2030-01-02T03:04:05Z"}]}`},
		{"waiting for async tools", turn.Outcome{Status: turn.StatusWaitingAsync, AsyncGroup: "grp_1", PendingAsync: []asynctools.Call{{ResultID: "grp_1.0", ToolCallID: "call_2", ToolName: "dispatch"}}},
			`{"groupId":"grp_1","pendingAsyncTools":[{"resultId":"grp_1.0","toolCallId":"call_2","toolName":"dispatch"}]}`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eventID := fmt.Sprintf("ev_%d", i)
			req := turn.Request{ConversationID: "c-" + eventID, EventID: eventID}
			if err := e.ClaimEvent(e.ctx, e.account, req); err != nil {
				t.Fatal(err)
			}
			if err := e.Report(e.ctx, e.account, eventID, tt.o, 1, 3); err != nil {
				t.Fatalf("Report: %v", err)
			}
			ev, err := e.store.Event(e.ctx, e.account, eventID)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Status != string(tt.o.Status) || ev.FromSeq != 1 || ev.ToSeq != 3 {
				t.Errorf("event %s [%d, %d), want %s [1, 3)", ev.Status, ev.FromSeq, ev.ToSeq, tt.o.Status)
			}
			var got, want any
			if err := json.Unmarshal(ev.Detail, &got); err != nil {
				t.Fatalf("detail %s: %v", ev.Detail, err)
			}
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("detail (-want +got):\n%s", diff)
			}
		})
	}
}

// A final event keeps its outcome: a later report (a stray duplicate, a retried invocation) is
// refused without an error, and neither its status, its usage, its span nor its detail change.
func TestReportAfterTheFinalOneIsIgnored(t *testing.T) {
	e := newEngineEnv(t)
	req := turn.Request{ConversationID: "c-final", EventID: "ev_final"}
	if err := e.ClaimEvent(e.ctx, e.account, req); err != nil {
		t.Fatal(err)
	}
	steps := []turn.Outcome{
		{Status: turn.StatusProcessing, Usage: model.Usage{InputTokens: 3, OutputTokens: 1}},
		{Status: turn.StatusCompleted, Usage: model.Usage{InputTokens: 10, OutputTokens: 4}},
	}
	for i, o := range steps {
		if err := e.Report(e.ctx, e.account, "ev_final", o, 1, int64(2+i)); err != nil {
			t.Fatalf("Report %s: %v", o.Status, err)
		}
	}
	final, err := e.store.Event(e.ctx, e.account, "ev_final")
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != store.EventCompleted || final.Usage != (model.Usage{InputTokens: 13, OutputTokens: 5}) || final.ToSeq != 3 {
		t.Fatalf("event %s, usage %+v, to %d; want completed, the reports' usage added up, to 3", final.Status, final.Usage, final.ToSeq)
	}

	for _, late := range []turn.Outcome{
		{Status: turn.StatusFailed, Error: "a late failure", Usage: model.Usage{InputTokens: 100}},
		{Status: turn.StatusProcessing, Usage: model.Usage{OutputTokens: 100}},
	} {
		if err := e.Report(e.ctx, e.account, "ev_final", late, 1, 9); err != nil {
			t.Errorf("a late report (%s) = %v, want it ignored without an error", late.Status, err)
		}
	}
	got, err := e.store.Event(e.ctx, e.account, "ev_final")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(final, got); diff != "" {
		t.Errorf("the final event after late reports (-before +after):\n%s", diff)
	}

	// The event id stays taken: a request naming it again is refused with its status.
	ref := refusedAs(t, "claiming the event again", e.ClaimEvent(e.ctx, e.account, req), turn.Conflict)
	if ref.Detail["eventId"] != "ev_final" || ref.Detail["status"] != store.EventCompleted {
		t.Errorf("the refusal's detail is %v, want eventId ev_final and status completed", ref.Detail)
	}
}
