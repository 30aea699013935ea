package mcptools

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/toolset"
)

// Turn is what an MCP call needs of the turn it runs in (the engine's, tool.TurnFrom).
type Turn interface {
	// Tree is the header that carries the turn's tree to the server (WithTree).
	Tree(ctx context.Context) (header, value string)
	// ShowProgress tells the turn's client how a call goes; only on the loop's goroutine.
	ShowProgress(tool.Progress)
}

// Offer gives the tools of the agent's MCP servers (turn.Toolset): a server that fails is a
// warning, and the turn goes on without its tools. A nil Client refuses agents that name
// servers.
func (c *Client) Offer(ctx context.Context, b toolset.Build) (toolset.Offer, error) {
	if len(b.Config.MCPServers) == 0 {
		return toolset.Offer{}, nil
	}
	if c == nil {
		return toolset.Offer{}, &toolset.ConfigError{Err: errNoClient}
	}
	tools, unavailable := c.Tools(ctx, b.Config.MCPServers)
	var o toolset.Offer
	for _, w := range unavailable {
		o.Warnings = append(o.Warnings, w.Error())
	}
	for _, t := range tools {
		o.Tools = append(o.Tools, reportingProgress(t))
	}
	return o, nil
}

// errNoClient: the agent names MCP servers and the deployment has no MCP client.
var errNoClient = errors.New("it names MCP servers, and this deployment calls none")

// reportingProgress makes an MCP tool's calls send the turn's tree, and its inline calls tell the
// turn's client the server's progress notifications. The notifications come on the SDK's
// goroutine and only the loop's goroutine may emit, so the call runs on a goroutine of its own
// while Execute, on the loop's, relays them. A call in the background (async) reports none.
func reportingProgress(t tool.Tool) tool.Tool {
	execute := t.Execute
	name := t.Name
	t.Execute = func(ctx context.Context, input json.RawMessage) (any, error) {
		turn, inTurn := tool.TurnFrom(ctx).(Turn)
		if inTurn {
			header, value := turn.Tree(ctx)
			ctx = WithTree(ctx, header, value)
		}
		if !inTurn || asynctools.InBackground(ctx) {
			return execute(ctx, input)
		}
		id := tool.CallIDFrom(ctx)
		updates := make(chan tool.Progress, 16)
		ctx = WithProgress(ctx, func(progress, total float64, message string) {
			select {
			case updates <- tool.Progress{ToolCallID: id, ToolName: name, Progress: progress, Total: total, Message: message}:
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
				turn.ShowProgress(p)
			case r := <-done:
				return r.out, r.err
			}
		}
	}
	return t
}
