package turn

import (
	"context"
	"encoding/json"

	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/mcptools"
)

// reportingProgress makes an MCP tool's inline calls tell their client the server's progress
// notifications, as ToolProgress events. The notifications come on the SDK's goroutine and only
// the loop's goroutine may emit, so the call runs on a goroutine of its own while Execute, on the
// loop's, relays them. A call in the background (async) reports none.
func reportingProgress(t tool.Tool) tool.Tool {
	execute := t.Execute
	name := t.Name
	t.Execute = func(ctx context.Context, input json.RawMessage) (any, error) {
		d, inTurn := callerFrom(ctx)
		if inTurn {
			ctx = mcptools.WithTree(ctx, TreeHeader, d.treeToken(ctx))
		}
		if !inTurn || asynctools.InBackground(ctx) {
			return execute(ctx, input)
		}
		id := tool.CallIDFrom(ctx)
		updates := make(chan ToolProgressState, 16)
		ctx = mcptools.WithProgress(ctx, func(progress, total float64, message string) {
			select {
			case updates <- ToolProgressState{ToolCallID: id, ToolName: name, Progress: progress, Total: total, Message: message}:
			default: // the client is shown the latest it can keep up with
			}
		})
		type result struct {
			out any
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := execute(ctx, input)
			done <- result{out, err}
		}()
		for {
			select {
			case p := <-updates:
				d.emit(Event{Kind: ToolProgress, ToolProgress: &p})
			case r := <-done:
				return r.out, r.err
			}
		}
	}
	return t
}
