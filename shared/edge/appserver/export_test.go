package appserver

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/turn"
)

// TestOut exposes a runtime's WebSocket output to the external tests: the events of a turn go
// through p to the connections subscribed to the runtime in reg.
type TestOut struct{ o *wsOut }

func NewTestOut(reg *connections.Registry, p Poster, accountID, agentID, conversationID string, window time.Duration) *TestOut {
	return &TestOut{&wsOut{
		reg: reg, poster: p, log: slog.New(slog.DiscardHandler), now: time.Now, account: accountID,
		rt: runtimeScope{AgentID: agentID, ConversationID: conversationID}, runID: "evt_test",
		calls: map[string]toolCallView{}, window: window,
	}}
}

func (t *TestOut) Event(ctx context.Context, ev turn.Event) { t.o.event(ctx, ev) }

// Replay sends stored messages as sync does.
func (t *TestOut) Replay(ctx context.Context, msgs []model.Message) { t.o.replay(ctx, msgs) }

// End ends the turn as completed.
func (t *TestOut) End(ctx context.Context) {
	t.o.end(ctx, turn.Outcome{Status: turn.StatusCompleted}, false)
}

// EndWaiting ends this invocation's part of the turn waiting for external calls: nothing more is
// said, and the invocation may freeze as soon as it returns.
func (t *TestOut) EndWaiting(ctx context.Context) {
	t.o.end(ctx, turn.Outcome{Status: turn.StatusWaitingAsync}, false)
}

// ResolveModel is update_model's reading of its model_id or model_handle.
var ResolveModel = resolveModel

// VisibleTools is the tools a turn selecting scopes sees of the runtime's subscribers, by name and
// connection.
func VisibleTools(subs []connections.Subscriber, scopes []string) [][2]string {
	var out [][2]string
	for _, t := range visibleTools(subs, scopes) {
		out = append(out, [2]string{t.Def.Name, t.ConnectionID})
	}
	return out
}

// UnifiedDiff is a file's change in git's unified format.
var UnifiedDiff = unifiedDiff
