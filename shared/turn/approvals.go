package turn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool"
)

// turnPlan is what a request does to its conversation, decided under the conversation's lease
// before the stream opens.
type turnPlan struct {
	// message is the new user message, if the request brings one.
	message *model.Message
	// decisions settle the paused step, by tool call id; nil when nothing is held.
	decisions map[string]agent.Decision
	// waiting lists the approvals still pending after this request: the pass only reports
	// the decisions it took (taken) and ends.
	waiting []store.Approval
	taken   []Decision
	// resume: the message was already saved by an earlier attempt of this turn; the pass picks
	// the conversation up where it stopped.
	resume bool
	// cancel: the turn was aborted; the paused step ends with its calls denied, its outside
	// async calls cancelled, and no further model call.
	cancel bool
}

// plan checks the request against the approvals the conversation waits for and records its
// decisions. Decisions are checked against the persisted approval (same id, same call, same
// arguments, still pending, before its deadline) and written all or none; expired approvals
// are settled as such on the way. Its refusals are *Refusal: NotFound for an approval the account
// does not hold, Conflict for one that cannot take this decision, or for a new message that would skip
// pending approvals.
func (e *Engine) plan(ctx context.Context, accountID string, req Request, in Input, turn *store.Lease, now time.Time) (*turnPlan, error) {
	plan := &turnPlan{message: in.Message, cancel: in.Cancel}
	held := turn.Pending()
	if len(held) == 0 {
		if in.Decisions == nil {
			return plan, nil
		}
		// Nothing waits: every decision is for an unknown, foreign or settled approval.
		return nil, e.staleDecision(ctx, accountID, req.ConversationID, in.Decisions[0].ApprovalID)
	}
	rows, err := e.opts.Store.Approvals(ctx, accountID, held)
	if err != nil {
		return nil, err
	}
	var settle []store.Settlement
	outcome := map[string]store.Approval{} // approval id -> row with its final status
	for _, id := range held {
		a, ok := rows[id]
		if !ok {
			return nil, fmt.Errorf("conversation %s waits for approval %s, which is missing", req.ConversationID, id)
		}
		if a.Expired(now) {
			a.Status, a.Reason = store.ApprovalExpired, expiredText(a)
			settle = append(settle, store.Settlement{ApprovalID: id, Status: a.Status, Reason: a.Reason})
		}
		outcome[id] = a
	}
	var refusal error
	// said are the reasons the request's decisions give, as the client sent them, for the
	// decisions their results keep (model.Approval).
	said := map[string]string{}
	for _, d := range in.Decisions {
		if !in.Cancel {
			said[d.ApprovalID] = d.Reason
		}
	}
	for _, d := range in.Decisions {
		a, ok := outcome[d.ApprovalID]
		if !ok {
			refusal = e.staleDecision(ctx, accountID, req.ConversationID, d.ApprovalID)
			break
		}
		if refusal = decisionRefusal(d, a); refusal != nil {
			break
		}
		if a.Status == store.ApprovalPending {
			reason := d.Reason
			switch {
			case in.Cancel:
				reason = abortedText
			case !*d.Approved:
				reason = deniedText(d.Reason)
			}
			a.Status, a.Reason = decidedStatus(d), reason
			outcome[a.ID] = a
			settle = append(settle, store.Settlement{ApprovalID: a.ID, Status: a.Status, Reason: reason})
			plan.taken = append(plan.taken, d)
		}
	}
	if refusal == nil && in.Message != nil {
		var waiting []string
		for _, id := range held {
			if outcome[id].Status == store.ApprovalPending {
				waiting = append(waiting, id)
			}
		}
		if len(waiting) > 0 && req.OnPendingApprovals != "deny" {
			refusal = pendingApprovalsError(req.ConversationID, approvalsOf(outcome, waiting))
		}
		for _, id := range waiting {
			a := outcome[id]
			a.Status, a.Reason = store.ApprovalDenied, "denied automatically: the user sent a new message instead of answering; the tool never ran"
			outcome[id] = a
			settle = append(settle, store.Settlement{ApprovalID: id, Status: a.Status, Reason: a.Reason})
		}
	}
	if refusal != nil {
		// Expiries are settled even when the request is refused, so a late decision leaves the
		// conversation usable.
		settle = expiriesOf(settle)
	}
	if err := turn.Settle(ctx, settle, now); err != nil {
		var conflict *store.ApprovalConflictError
		if errors.As(err, &conflict) {
			a := rows[conflict.ApprovalID]
			a.Status = conflict.Status
			return nil, decidedError(a)
		}
		return nil, err
	}
	if refusal != nil {
		return nil, refusal
	}
	var waiting []store.Approval
	plan.decisions = map[string]agent.Decision{}
	for _, id := range held {
		a := outcome[id]
		kept := &model.Approval{ID: a.ID, Approved: a.Status == store.ApprovalApproved, Reason: a.Reason, RequestReason: a.RequestReason}
		if reason, ok := said[id]; ok {
			kept.Reason = reason
		}
		switch a.Status {
		case store.ApprovalPending:
			waiting = append(waiting, a)
		case store.ApprovalApproved:
			plan.decisions[a.ToolCallID] = agent.Decision{Approved: true, Approval: kept}
		default:
			plan.decisions[a.ToolCallID] = agent.Decision{Denial: a.Reason, Approval: kept}
		}
	}
	if len(waiting) > 0 {
		plan.decisions, plan.waiting = nil, waiting
	}
	return plan, nil
}

// decisionRefusal is the rule every decision passes, at Precheck and under the lease alike: it
// must answer the call its approval was asked for, and the approval must still be pending, or
// already hold this very decision (taken by a request that stopped before the step resumed). a
// carries its expiry: its Status is ApprovalExpired once its deadline has passed.
func decisionRefusal(d Decision, a store.Approval) error {
	if err := matches(d, a); err != nil {
		return err
	}
	switch {
	case a.Status == store.ApprovalExpired:
		return &Refusal{Kind: Conflict, Message: fmt.Sprintf("approval %s expired at %s; the tool never ran", a.ID, a.Deadline.UTC().Format(time.RFC3339)),
			Detail: map[string]any{"approvalId": a.ID, "status": store.ApprovalExpired}}
	case a.Status != store.ApprovalPending && a.Status != decidedStatus(d):
		return decidedError(a)
	}
	return nil
}

// decidedStatus is the status a decision gives its approval.
func decidedStatus(d Decision) string {
	if *d.Approved {
		return store.ApprovalApproved
	}
	return store.ApprovalDenied
}

// matches checks that a decision answers the call its approval was asked for.
func matches(d Decision, a store.Approval) error {
	conflict := func(msg string) error {
		return &Refusal{Kind: Conflict, Message: msg, Detail: map[string]any{"approvalId": a.ID, "toolCallId": a.ToolCallID}}
	}
	if d.ToolCallID != "" && d.ToolCallID != a.ToolCallID {
		return conflict(fmt.Sprintf("approval %s is for tool call %s, not %s", a.ID, a.ToolCallID, d.ToolCallID))
	}
	if len(d.Input) > 0 {
		hash, err := approval.ArgsHash(d.Input)
		if err != nil || hash != a.ArgsHash {
			return conflict(fmt.Sprintf("approval %s was asked for other arguments of %s than the ones answered; the decision was not applied", a.ID, a.ToolName))
		}
	}
	return nil
}

// staleDecision explains a decision for an approval the conversation does not wait for: the
// same 404 for an id the account does not hold as for another account's, else 409.
func (e *Engine) staleDecision(ctx context.Context, accountID, conversationID, approvalID string) error {
	a, err := e.opts.Store.Approval(ctx, accountID, approvalID)
	if errors.Is(err, store.ErrNotFound) {
		return &Refusal{Kind: NotFound, Message: "approval " + approvalID + " not found"}
	}
	if err != nil {
		return err
	}
	if a.ConversationID != conversationID {
		return &Refusal{Kind: Conflict, Message: fmt.Sprintf("approval %s belongs to conversation %s, not %s", a.ID, a.ConversationID, conversationID),
			Detail: map[string]any{"approvalId": a.ID}}
	}
	return decidedError(a)
}

// pendingApprovalsError refuses a new message that would skip pending approvals.
func pendingApprovalsError(conversationID string, waiting []store.Approval) error {
	ids := make([]string, 0, len(waiting))
	for _, a := range waiting {
		ids = append(ids, a.ID)
	}
	return &Refusal{Kind: Conflict, Message: fmt.Sprintf("conversation %s is waiting for approval of %s: answer them, or send the message with \"onPendingApprovals\": \"deny\" to deny them first", conversationID, strings.Join(ids, ", ")),
		Detail: map[string]any{"pendingApprovals": pendingView(waiting)}}
}

func decidedError(a store.Approval) error {
	status := a.Status
	if status == store.ApprovalPending {
		status = store.ApprovalExpired
	}
	return &Refusal{Kind: Conflict, Message: fmt.Sprintf("approval %s is already %s; a decision counts once", a.ID, status),
		Detail: map[string]any{"approvalId": a.ID, "status": status}}
}

func expiriesOf(settle []store.Settlement) []store.Settlement {
	var out []store.Settlement
	for _, s := range settle {
		if s.Status == store.ApprovalExpired {
			out = append(out, s)
		}
	}
	return out
}

func approvalsOf(m map[string]store.Approval, ids []string) []store.Approval {
	out := make([]store.Approval, 0, len(ids))
	for _, id := range ids {
		out = append(out, m[id])
	}
	return out
}

// deniedText is what the model is told about a call the user denied.
func deniedText(reason string) string {
	if reason = strings.TrimSpace(reason); reason != "" {
		return "denied by the user: " + reason + "; the tool did not run"
	}
	return "denied by the user; the tool did not run"
}

// abortedText is what the model is told of a held call whose turn was aborted.
const abortedText = "cancelled: the turn was aborted before the call was approved; the tool did not run"

func expiredText(a store.Approval) string {
	return fmt.Sprintf("the approval request expired after %s without an answer; the tool never ran", a.Deadline.Sub(a.CreatedAt).Round(time.Second))
}

// PendingApproval is how a waiting approval is shown to clients.
type PendingApproval struct {
	ApprovalID string `json:"approvalId"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	Deadline   string `json:"expiresAt,omitempty"`
}

func pendingView(as []store.Approval) []PendingApproval {
	out := make([]PendingApproval, 0, len(as))
	for _, a := range as {
		out = append(out, PendingApproval{ApprovalID: a.ID, ToolCallID: a.ToolCallID, ToolName: a.ToolName, Deadline: a.Deadline.UTC().Format(time.RFC3339)})
	}
	return out
}

func pendingFromLoop(ps []agent.Pending) []PendingApproval {
	out := make([]PendingApproval, 0, len(ps))
	for _, p := range ps {
		out = append(out, PendingApproval{ApprovalID: p.ApprovalID, ToolCallID: p.ToolCallID, ToolName: p.ToolName})
	}
	return out
}

// pauseFunc persists a step held for approval: its messages and one pending approval per held
// call, bound to the call's exact arguments, with the configured deadline.
func (e *Engine) pauseFunc(turn *store.Lease, agentID string) agent.PauseFunc {
	return e.pauseWithHandover(turn, agentID, nil)
}

// pauseWithHandover is pauseFunc with what the paused turn leaves for its resume, which carry
// returns (and may prepare) given the approvals' deadline; nil carries nothing.
func (e *Engine) pauseWithHandover(turn *store.Lease, agentID string, carry func(ctx context.Context, deadline time.Time) (store.Handover, error)) agent.PauseFunc {
	return func(ctx context.Context, msgs []model.Message, pending []agent.Pending) error {
		now := e.opts.Now()
		rows := make([]store.Approval, 0, len(pending))
		for _, p := range pending {
			hash, err := approval.ArgsHash(p.Input)
			if err != nil {
				return fmt.Errorf("hashing the arguments of %s: %w", p.ToolCallID, err)
			}
			rows = append(rows, store.Approval{
				ID: p.ApprovalID, AgentID: agentID, ToolCallID: p.ToolCallID, ToolName: p.ToolName,
				Input: p.Input, ArgsHash: hash, RequestReason: p.Reason,
				CreatedAt: now, Deadline: now.Add(e.opts.ApprovalTimeout),
			})
		}
		var c store.Handover
		if carry != nil {
			var err error
			if c, err = carry(ctx, now.Add(e.opts.ApprovalTimeout)); err != nil {
				return err
			}
		}
		return turn.Pause(ctx, msgs, rows, c)
	}
}

// withOverrides applies a request's toolApproval overrides to the agent's tools.
func withOverrides(tools *tool.Set, overrides map[string]approval.Status) (*tool.Set, error) {
	if len(overrides) == 0 {
		return tools, nil
	}
	if tools == nil {
		tools, _ = tool.NewSet()
	}
	out, err := tools.WithApprovals(overrides)
	var oe *tool.OverrideError
	if errors.As(err, &oe) {
		field := "toolApproval." + oe.Tool
		return nil, &Refusal{Kind: Invalid, Message: field + ": " + oe.Err.Error(), Detail: map[string]any{"field": field}}
	}
	return out, err
}
