package aisdk

import (
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn"
)

// EventChunks encodes one turn event as the UI message chunks of the AI SDK stream: what SSE
// clients get, and NATS subscribers too.
func EventChunks(ev turn.Event) []any {
	switch ev.Kind {
	case turn.ApprovalDecided:
		return []any{ToolApprovalResponse(ev.Decision.ApprovalID, *ev.Decision.Approved, ev.Decision.Reason)}
	case turn.AsyncLanded:
		r := ev.Result
		v := map[string]any{"resultId": r.ID, "toolCallId": r.ToolCallID, "toolName": r.ToolName, "status": r.Status}
		if r.Status == asynctools.Completed {
			v["response"] = r.Response
		} else {
			v["error"] = r.Error
		}
		return []any{Data("async-result", v, false)}
	case turn.Failed:
		return []any{Error(ev.Error)}
	case turn.Subagent:
		// One part per call, updated in place as the child goes (started, its messages, finished).
		return []any{DataPart("subagent", ev.Subagent.ToolCallID, *ev.Subagent)}
	case turn.ToolProgress:
		// One part per call, replaced as the call goes.
		return []any{DataPart("tool-progress", ev.ToolProgress.ToolCallID, *ev.ToolProgress)}
	case turn.Warning:
		return []any{Data("warning", map[string]string{"message": ev.Warning}, false)}
	case turn.PromptTool:
		// One part per call, updated in place as its nested loop goes.
		return []any{DataPart("prompt-tool", ev.PromptTool.ToolCallID, *ev.PromptTool)}
	}
	le := ev.Loop
	switch le.Type {
	case agent.StepStart:
		return []any{StartStep()}
	case agent.StepFinish:
		return []any{FinishStep()}
	case agent.TextStart:
		return []any{TextStart(le.ID)}
	case agent.TextDelta:
		return []any{TextDelta(le.ID, le.Text)}
	case agent.TextEnd:
		return []any{TextEnd(le.ID)}
	case agent.ReasoningStart:
		return []any{ReasoningStart(le.ID)}
	case agent.ReasoningDelta:
		return []any{ReasoningDelta(le.ID, le.Text)}
	case agent.ReasoningEnd:
		return []any{ReasoningEnd(le.ID)}
	case agent.ToolInputStart:
		return []any{ToolInputStart(le.ToolCallID, le.ToolName)}
	case agent.ToolInputDelta:
		return []any{ToolInputDelta(le.ToolCallID, le.Text)}
	case agent.ToolInputAvailable:
		return []any{ToolInputAvailable(le.ToolCallID, le.ToolName, le.Input)}
	case agent.ToolInputError:
		return []any{ToolInputError(le.ToolCallID, le.ToolName, le.Input, le.ErrorText)}
	case agent.ToolOutput:
		return []any{ToolOutput(le.ToolCallID, le.Output)}
	case agent.ToolOutputError:
		return []any{ToolOutputError(le.ToolCallID, le.ErrorText)}
	case agent.Source:
		return []any{SourceURL(le.Source.ID, le.Source.URL, le.Source.Title)}
	case agent.ModelAnswered:
		// Transient: the stored message names its model (model.Message.Model), and the
		// conversation read back stays what the stream built.
		return []any{Data("model", map[string]string{"model": le.Text}, true)}
	case agent.ToolApprovalRequest:
		return []any{ToolApprovalRequest(le.ApprovalID, le.ToolCallID, le.Text, false)}
	case agent.OutputAvailable:
		return []any{Data("output", le.Output, false)}
	case agent.Compacted:
		return []any{DataPart("compaction", le.ID, Compaction(le.Text, le.Compaction))}
	case agent.ToolOutputDenied:
		if le.Automatic {
			// A policy refused the call: say so the way the AI SDK does, as an automatic
			// request and its denial, so the client's part has its approval.
			return []any{
				ToolApprovalRequest(le.ApprovalID, le.ToolCallID, "", true),
				ToolApprovalResponse(le.ApprovalID, false, le.ErrorText),
				ToolOutputDenied(le.ToolCallID),
			}
		}
		return []any{ToolOutputDenied(le.ToolCallID)}
	}
	return nil
}

// CompactionData is a compaction as clients see it: the data of a data-compaction part, live
// and read back.
type CompactionData struct {
	Summary string `json:"summary"`
	// Messages is how many messages the summary covers; TokensBefore and TokensAfter are the
	// request's estimated input tokens before and after.
	Messages     int `json:"messages"`
	TokensBefore int `json:"tokensBefore"`
	TokensAfter  int `json:"tokensAfter"`
}

// Compaction is the data-compaction part's data of a summary and its compaction.
func Compaction(summary string, c *model.Compaction) CompactionData {
	d := CompactionData{Summary: summary}
	if c != nil {
		d.Messages, d.TokensBefore, d.TokensAfter = c.Messages, c.TokensBefore, c.TokensAfter
	}
	return d
}

// TurnFinish is the finish chunk that ends a turn's stream, with what the turn waits for in
// its metadata (an abort for a stopped turn); nil when the turn ended without a finish reason.
func TurnFinish(conversationID string, res turn.Outcome) any {
	if res.Stopped {
		return Abort(res.Error)
	}
	switch res.Reason {
	case "":
		return nil
	case model.FinishError:
		return Finish(string(model.FinishError), nil)
	}
	meta := map[string]any{"conversationId": conversationID, "usage": res.Usage}
	if len(res.PendingApprovals) > 0 {
		meta["pendingApprovals"] = res.PendingApprovals
	}
	if res.Status == turn.StatusWaitingAsync {
		meta["pendingAsyncTools"] = res.PendingAsync
	}
	return Finish(string(res.Reason), meta)
}
