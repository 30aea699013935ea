package turn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/google/go-cmp/cmp"
)

// Precheck refuses, before a request is queued, what the worker would refuse under the lease,
// with the detail its client acts on, and writes nothing.
func TestPrecheck(t *testing.T) {
	e := newEngineEnv(t)
	held := e.held("c-held")
	e.held("c-held-too")
	group, waiting := e.dispatched("c-async", "")
	e.run(turn.Request{ConversationID: "c-plain", AgentID: "plain"}, says("hi"))
	decided := e.held("c-decided")
	if o := e.run(turn.Request{ConversationID: "c-decided", AgentID: "asker"}, decides(decided, true)); o.Status != turn.StatusCompleted {
		t.Fatalf("the approved call's turn ended %s (%s), want completed", o.Status, o.Error)
	}

	asker := func(conv string) turn.Request { return turn.Request{ConversationID: conv, AgentID: "asker"} }
	tests := []struct {
		name string
		req  turn.Request
		in   turn.Input
		kind turn.RefusalKind // 0: accepted
		// message is part of the refusal's message; detail is what its Detail holds, of the
		// keys it names.
		message string
		detail  map[string]any
	}{
		{name: "a new conversation", req: asker("c-new"), in: says("hi")},
		{name: "a new message that denies the held calls", req: turn.Request{ConversationID: "c-held", AgentID: "asker", OnPendingApprovals: "deny"}, in: says("hi")},
		{name: "a decision for a held call", req: asker("c-held"), in: decides(held, false)},
		{
			name: "a conversation of another agent", req: asker("c-plain"), in: says("hi"),
			kind: turn.Conflict, message: "belongs to another agent",
		},
		{
			name: "a conversation waiting for an outside call", req: turn.Request{ConversationID: "c-async", AgentID: "dispatcher"}, in: says("hi"),
			kind: turn.Conflict, message: "waiting for 1 async tool call",
			detail: map[string]any{"pendingAsyncTools": []string{waiting}},
		},
		{
			name: "a new message while a call waits for approval", req: asker("c-held"), in: says("hi"),
			kind: turn.Conflict, message: held.ApprovalID,
		},
		{
			name: "a decision for an approval the account does not hold", req: asker("c-held"), in: decides(turn.PendingApproval{ApprovalID: "apr_unknown", ToolCallID: held.ToolCallID}, true),
			kind: turn.NotFound, message: "apr_unknown",
		},
		{
			name: "a decision for another conversation's approval", req: asker("c-held-too"), in: decides(held, true),
			kind: turn.Conflict, message: "belongs to conversation c-held",
			detail: map[string]any{"approvalId": held.ApprovalID},
		},
		{
			name: "a decision on a conversation that does not exist", req: asker("c-none"), in: decides(held, true),
			kind: turn.Conflict, message: "belongs to conversation c-held",
		},
		{
			name: "a decision for an approval decided and resumed", req: asker("c-decided"), in: decides(decided, true),
			kind: turn.Conflict, message: "a decision counts once",
			detail: map[string]any{"approvalId": decided.ApprovalID, "status": store.ApprovalApproved},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.Precheck(e.ctx, e.account, tt.req, tt.in)
			if tt.kind == 0 {
				if err != nil {
					t.Fatalf("Precheck = %v, want it accepted", err)
				}
				return
			}
			ref := refusedAs(t, "Precheck", err, tt.kind)
			if !strings.Contains(ref.Message, tt.message) {
				t.Errorf("refusal %q, want it to name %q", ref.Message, tt.message)
			}
			for k, want := range tt.detail {
				if diff := cmp.Diff(want, ref.Detail[k]); diff != "" {
					t.Errorf("refusal detail %s (-want +got):\n%s", k, diff)
				}
			}
		})
	}

	// The pending approval is listed with the call it holds, for the client to answer.
	err := e.Precheck(e.ctx, e.account, asker("c-held"), says("hi"))
	if ps, _ := refusedAs(t, "a new message while held", err, turn.Conflict).Detail["pendingApprovals"].([]turn.PendingApproval); len(ps) != 1 || ps[0].ApprovalID != held.ApprovalID || ps[0].ToolCallID != held.ToolCallID {
		t.Errorf("the refusal lists %v, want approval %s of call %s", ps, held.ApprovalID, held.ToolCallID)
	}
	// Precheck only reads: the new conversation was not made, the held call was not denied nor
	// decided, and the waiting conversation waits still.
	if _, err := e.store.ConversationHead(e.ctx, e.account, "c-new"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("c-new after Precheck: %v, want no conversation", err)
	}
	if a, err := e.store.Approval(e.ctx, e.account, held.ApprovalID); err != nil || a.Status != store.ApprovalPending {
		t.Errorf("approval %s after Precheck is %s (%v), want still pending", held.ApprovalID, a.Status, err)
	}
	if head, err := e.store.ConversationHead(e.ctx, e.account, "c-async"); err != nil || head.AsyncGroup != group {
		t.Errorf("c-async after Precheck waits for group %q (%v), want %s", head.AsyncGroup, err, group)
	}
}

// A user message larger than a stored message may be is refused before anything is written,
// naming the field it came in; one that just fits is not.
func TestCheckMessageSize(t *testing.T) {
	sized := func(n int) *model.Message {
		return &model.Message{ID: "msg_1", Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: strings.Repeat("x", n)}}}
	}
	fits := store.MaxMessageBytes - (store.MessageBytes(*sized(1)) - 1)
	if got := store.MessageBytes(*sized(fits)); got != store.MaxMessageBytes {
		t.Fatalf("a message of %d letters takes %d bytes stored, want exactly %d", fits, got, store.MaxMessageBytes)
	}
	if err := turn.CheckMessageSize("message", sized(fits)); err != nil {
		t.Errorf("a message of exactly %d bytes: %v, want it accepted", store.MaxMessageBytes, err)
	}
	ref := refusedAs(t, "one byte more", turn.CheckMessageSize("messages[2]", sized(fits+1)), turn.TooLarge)
	if ref.Detail["field"] != "messages[2]" {
		t.Errorf("the refusal names field %v, want messages[2]", ref.Detail["field"])
	}
}
