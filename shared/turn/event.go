// Package turn says what a turn's output is, independent of any wire. The engine produces these
// events in order; each transport encodes them for its own clients: the AI SDK UI message stream
// over SSE, Letta frames over the App Server protocol. A transport never reads another's
// encoding.
package turn

import (
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/mcptools"
	"github.com/agentharness/harness/shared/tool/prompttools"
	"github.com/agentharness/harness/shared/tool/subagenttools"
)

// Kind says which of an Event's fields is set.
type Kind int

const (
	// Loop is an event of the model loop (Event.Loop): a step, text, a tool call and its
	// output, a source, an approval request or a denial.
	Loop Kind = iota + 1
	// AsyncStarted is a tool call that went async (Event.Loop is its ToolOutput, whose output
	// is the placeholder the model sees): its result comes later, as AsyncLanded or in a
	// continuation.
	AsyncStarted
	// AsyncLanded is an async call that settled (Event.Result): while the invocation that
	// started it waits, or at the start of the continuation that brings it back.
	AsyncLanded
	// ApprovalDecided is a held call decided by the request that goes on with the turn
	// (Event.Decision), reported when other held calls still wait.
	ApprovalDecided
	// Failed is a turn that stopped on a failure; Event.Error is what its client may be told.
	Failed
	// Subagent is the progress of a subagent call (Event.Subagent): started, a message of a
	// blocking child's, finished.
	Subagent
	// PromptTool is the progress of a prompt tool's call (Event.PromptTool): its nested loop
	// started, finished a step, ended.
	PromptTool
	// Warning is something that went wrong without stopping the turn (Event.Warning): an MCP
	// server whose tools are not offered this turn.
	Warning
	// ToolProgress is what a running tool call said of its progress (Event.ToolProgress): an
	// MCP server's progress notifications.
	ToolProgress
)

// Event is one thing a turn's output says.
type Event struct {
	Kind Kind
	// Seq is the event's place in the turn's stream log, when InLog: a client that resumes
	// after it names it.
	Seq        int64 `json:"-"`
	InLog      bool  `json:"-"`
	Loop       agent.Event
	Result     asynctools.Result
	Decision   Decision
	Error      string
	Subagent   *subagenttools.Progress `json:",omitempty"`
	PromptTool *prompttools.Progress   `json:",omitempty"`
	Warning    string                  `json:",omitempty"`
	// ToolProgress is a running call's progress (ToolProgress).
	ToolProgress *tool.Progress `json:",omitempty"`
	// Child is the subagent conversation whose event this is, shown to its caller's client
	// (CallerView); empty for the turn's own.
	Child string `json:",omitempty"`
}

// The invocation is the turn its tools and models run in (tool.WithTurn): it shows its client
// what they report, on the loop's goroutine, which alone may emit, runs their subagent calls,
// and names the thread whose files they read.
var (
	_ prompttools.Turn   = (*invocation)(nil)
	_ mcptools.Turn      = (*invocation)(nil)
	_ subagenttools.Turn = (*invocation)(nil)
	_ attachments.Turn   = (*invocation)(nil)
)

// ShowPrompt tells the client how a prompt tool's call goes.
func (d *invocation) ShowPrompt(p prompttools.Progress) {
	d.emit(Event{Kind: PromptTool, PromptTool: &p})
}

// ShowProgress tells the client a running call's progress.
func (d *invocation) ShowProgress(p tool.Progress) {
	d.emit(Event{Kind: ToolProgress, ToolProgress: &p})
}
