package channelturn

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn"
)

// Edge is the name channel turns are queued and continued under (worker.Edge).
const Edge = "channel"

// Turns is async-worker's part of channel turns (a worker.Edge): each turn's output is posted
// to the chat it came from, edited as it grows.
type Turns struct {
	Bindings *channels.Store
	APIs     channels.APIs
	Logger   *slog.Logger
	// EditEvery spaces the edits of a growing reply, within the platforms' rate limits
	// (Telegram: about one edit a second per chat; Slack: chat.update is tier 3); 0: DefaultEditEvery.
	EditEvery time.Duration
}

// DefaultEditEvery is how often a growing reply is edited at most.
const DefaultEditEvery = time.Second

// chatOf loads the binding of route r and its platform.
func (t *Turns) chatOf(ctx context.Context, r Route) (channels.Binding, platform, error) {
	b, err := t.Bindings.Get(ctx, r.Binding)
	if err != nil {
		return b, nil, fmt.Errorf("the channel binding %s: %w", r.Binding, err)
	}
	p, err := platformOf(t.APIs, b)
	return b, p, err
}

// Prepare makes the turn a channel turn: delivered to its route, and, on a binding with nobody
// to approve, with calls that need approval denied saying so (002: no approval can be asked).
// It returns the run that posts the turn's output to the chat, and concludes it.
func (t *Turns) Prepare(ctx context.Context, work turn.Work, start *turn.Start) (func(context.Context, *turn.Run) error, error) {
	r, err := decodeRoute(work.Route)
	if err != nil {
		return nil, err
	}
	b, p, err := t.chatOf(ctx, r)
	if err != nil {
		return nil, err
	}
	start.Delivery.Route = string(work.Route)
	start.NoApprovals = len(b.Approvers) == 0
	return func(ctx context.Context, run *turn.Run) error {
		p.typing(ctx, r)
		t.relay(ctx, p, r, run.Events(ctx))
		return run.Finish(ctx, run.Outcome(), nil)
	}, nil
}

// Refused tells the chat why its message was not taken up.
func (t *Turns) Refused(ctx context.Context, work turn.Work, o turn.Outcome) {
	r, err := decodeRoute(work.Route)
	if err == nil {
		var p platform
		if _, p, err = t.chatOf(ctx, r); err == nil {
			_, err = p.post(ctx, r, "⚠️ "+o.Error)
		}
	}
	if err != nil {
		t.Logger.ErrorContext(ctx, "telling a chat its turn was refused", "eventId", work.EventID, "err", err)
	}
}

// Continue runs a continuation of a channel turn (its async calls settled), posting to the
// chat the turn came from.
func (t *Turns) Continue(ctx context.Context, c *turn.Continuation) error {
	r, err := decodeRoute(json.RawMessage(c.Group.Group.Delivery.Route))
	var b channels.Binding
	var p platform
	if err == nil {
		b, p, err = t.chatOf(ctx, r)
	}
	if err != nil {
		t.Logger.ErrorContext(ctx, "continuing a channel turn without its chat; its output is kept in the conversation", "err", err)
		return c.Finish(ctx, c.Execute(ctx), nil)
	}
	if len(b.Approvers) == 0 {
		c.WithoutApprovals()
	}
	t.relay(ctx, p, r, c.Events(ctx, nil))
	return c.Finish(ctx, c.Outcome(), nil)
}

// relay posts a turn's events to the chat: text as one reply edited as it grows (a new message
// past the platform's limit), each tool call as a compact line of it, and each held call as an
// approval prompt of its own.
func (t *Turns) relay(ctx context.Context, p platform, r Route, events iter.Seq[turn.Event]) {
	every := t.EditEvery
	if every <= 0 {
		every = DefaultEditEvery
	}
	rp := &reply{p: p, r: r, every: every, log: t.Logger}
	inputs := map[string]json.RawMessage{}
	for ev := range events {
		switch ev.Kind {
		case turn.Failed:
			rp.text("\n\n⚠️ " + ev.Error)
		case turn.AsyncStarted:
			rp.tool(ctx, ev.Loop.ToolCallID, ev.Loop.ToolName, "running in the background")
		case turn.AsyncLanded:
			state := "✓"
			if ev.Result.Status != asynctools.Completed {
				state = ev.Result.Status
			}
			rp.tool(ctx, ev.Result.ToolCallID, ev.Result.ToolName, state)
		case turn.Loop:
			le := ev.Loop
			switch le.Type {
			case agent.StepStart:
				rp.paragraph()
			case agent.TextDelta:
				rp.text(le.Text)
				rp.flush(ctx, false)
			case agent.ToolInputAvailable:
				inputs[le.ToolCallID] = le.Input
				rp.tool(ctx, le.ToolCallID, le.ToolName, "…")
				p.typing(ctx, r)
			case agent.ToolOutput:
				rp.tool(ctx, le.ToolCallID, le.ToolName, "✓")
			case agent.ToolOutputError, agent.ToolInputError:
				rp.tool(ctx, le.ToolCallID, le.ToolName, "failed")
			case agent.ToolOutputDenied:
				rp.tool(ctx, le.ToolCallID, le.ToolName, "denied")
			case agent.ToolApprovalRequest:
				rp.flush(ctx, true)
				hash, _ := approval.ArgsHash(inputs[le.ToolCallID])
				pr := prompt{ApprovalID: le.ApprovalID, Tool: le.ToolName, Args: shownArgs(inputs[le.ToolCallID]), Hash: hash}
				if _, err := p.ask(ctx, r, pr); err != nil {
					t.Logger.ErrorContext(ctx, "posting an approval prompt", "approvalId", le.ApprovalID, "err", err)
				}
			case agent.StepFinish:
				rp.flush(ctx, false)
			}
		}
	}
	rp.flush(ctx, true)
}

// reply is the message a turn's output grows in.
type reply struct {
	p     platform
	r     Route
	every time.Duration
	log   *slog.Logger
	// id is the posted message's; empty until something is posted.
	id string
	// tools are the compact lines of the message's tool calls, by call id in order.
	tools []toolLine
	body  strings.Builder
	// sent is what the message shows; edited is when it last changed.
	sent   string
	edited time.Time
}

type toolLine struct{ id, name, state string }

func (rp *reply) text(s string) { rp.body.WriteString(s) }

// paragraph ends the text so far, so the next step's text starts a paragraph of its own.
func (rp *reply) paragraph() {
	if b := rp.body.String(); strings.TrimSpace(b) != "" && !strings.HasSuffix(b, "\n\n") {
		rp.body.Reset()
		rp.body.WriteString(strings.TrimRight(b, " \n") + "\n\n")
	}
}

func (rp *reply) tool(ctx context.Context, id, name, state string) {
	for i := range rp.tools {
		if rp.tools[i].id == id {
			rp.tools[i].state = state
			rp.flush(ctx, false)
			return
		}
	}
	rp.tools = append(rp.tools, toolLine{id, name, state})
	rp.flush(ctx, false)
}

// render is the message's Markdown: its tool lines, then its text.
func (rp *reply) render() string {
	var b strings.Builder
	for _, l := range rp.tools {
		fmt.Fprintf(&b, "_%s: %s_\n", l.name, l.state)
	}
	if rp.body.Len() > 0 {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(rp.body.String())
	}
	return strings.TrimSpace(b.String())
}

// flush shows the reply as it stands: at once when force, else at most once every `every`. A
// reply past the platform's limit is finished where it can be cut and goes on in a new message.
func (rp *reply) flush(ctx context.Context, force bool) {
	text := rp.render()
	if text == "" || text == rp.sent || (!force && time.Since(rp.edited) < rp.every) {
		return
	}
	if pieces := rp.p.split(text); len(pieces) > 1 {
		// The message is finished with its first pieces; the rest goes on in a new one.
		for _, piece := range pieces[:len(pieces)-1] {
			rp.show(ctx, piece)
			rp.id, rp.sent = "", ""
		}
		rp.tools = nil
		rp.body.Reset()
		rp.body.WriteString(pieces[len(pieces)-1])
		text = rp.render()
	}
	rp.show(ctx, text)
}

// show posts text as the reply's message, or edits the message to it.
func (rp *reply) show(ctx context.Context, text string) {
	var err error
	if rp.id == "" {
		rp.id, err = rp.p.post(ctx, rp.r, text)
	} else {
		err = rp.p.edit(ctx, rp.r, rp.id, text)
	}
	if err != nil {
		// A rate limit the client could not wait out, a platform hiccup: the next flush tries
		// again with the text as it stands then.
		rp.log.WarnContext(ctx, "posting a channel reply", "err", err)
		return
	}
	rp.sent, rp.edited = text, time.Now()
}

// secretKey matches argument names whose values an approval prompt never shows.
var secretKey = regexp.MustCompile(`(?i)(key|token|secret|password|passwd|credential|auth)`)

// maxShownArgs bounds the arguments an approval prompt shows.
const maxShownArgs = 500

// shownArgs is a call's arguments as its approval prompt shows them: values of secret-looking
// keys hidden, truncated.
func shownArgs(input json.RawMessage) string {
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return "(arguments not shown)"
	}
	b, _ := json.MarshalIndent(hideSecrets(v), "", " ")
	s := string(b)
	if r := []rune(s); len(r) > maxShownArgs {
		s = string(r[:maxShownArgs]) + "…"
	}
	return s
}

func hideSecrets(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if secretKey.MatchString(k) {
				x[k] = "••••"
			} else {
				x[k] = hideSecrets(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = hideSecrets(e)
		}
	}
	return v
}
