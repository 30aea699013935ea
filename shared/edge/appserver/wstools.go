package appserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/wire/jsonschema"
	"github.com/agentharness/harness/shared/wire/wsconn"
)

// wsTurn is what a WebSocket turn needs in every invocation that runs part of it: its runtime,
// the controller-owned tools visible to it (taken when the input arrived) and the allowlist of
// the agent's own tools.
type wsTurn struct {
	Runtime   runtimeScope `json:"runtime"`
	Tools     []wsTool     `json:"tools,omitempty"`
	Allowlist *[]string    `json:"allowlist,omitempty"`
}

// wsTool is a controller-owned tool and the connection that registered it.
type wsTool struct {
	ConnectionID string              `json:"connectionId"`
	ScopeID      string              `json:"scopeId,omitempty"`
	Def          connections.ToolDef `json:"def"`
}

var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkToolGroups validates external_tools as runtime_start or an update sends them: names
// models accept, a description, a parameters schema that compiles, and no name twice in what
// one turn can see.
func checkToolGroups(groups []connections.ToolGroup) error {
	unscoped := map[string]bool{}
	for _, g := range groups {
		if g.ScopeID == "" {
			for _, t := range g.Tools {
				unscoped[t.Name] = true
			}
		}
	}
	scoped := map[string]map[string]bool{}
	for i, g := range groups {
		for j, t := range g.Tools {
			at := fmt.Sprintf("external_tools[%d].tools[%d]", i, j)
			switch {
			case !toolNamePattern.MatchString(t.Name):
				return fmt.Errorf("%s.name %q must be 1-64 letters, digits, _ or -", at, t.Name)
			case t.Description == "":
				return fmt.Errorf("%s (%s): description is required", at, t.Name)
			case len(t.Parameters) == 0:
				return fmt.Errorf("%s (%s): parameters (a JSON schema) is required", at, t.Name)
			}
			if _, err := tool.NewSet(tool.Tool{Name: t.Name, InputSchema: t.Parameters, Execute: noExecute}); err != nil {
				var re *jsonschema.RefError
				if errors.As(err, &re) {
					return fmt.Errorf("%s.parameters.%s (%s): %s", at, re.Path, t.Name, re.Problem)
				}
				return fmt.Errorf("%s (%s): parameters: %v", at, t.Name, err)
			}
			if g.ScopeID == "" {
				continue
			}
			if unscoped[t.Name] {
				return fmt.Errorf("%s: %s is also registered without a scope; a turn selecting scope %q would see it twice", at, t.Name, g.ScopeID)
			}
			if scoped[g.ScopeID] == nil {
				scoped[g.ScopeID] = map[string]bool{}
			}
			scoped[g.ScopeID][t.Name] = true
		}
		if g.ScopeID == "" {
			seen := map[string]bool{}
			for _, t := range g.Tools {
				if seen[t.Name] {
					return fmt.Errorf("external_tools[%d]: tool %s is registered twice", i, t.Name)
				}
				seen[t.Name] = true
			}
		}
	}
	return nil
}

func noExecute(context.Context, json.RawMessage) (any, error) { return nil, errors.New("not run") }

// visibleTools picks, from the runtime's subscribers, the tools a turn selecting scopes sees:
// every unscoped tool, and the scoped tools of the selected scopes, each name once. A tool two
// connections registered (a controller that reconnected while its old socket lingers, two tabs
// of one controller) is the first's; its call goes to another connection that registered it
// when that one has gone (externalTool).
func visibleTools(subs []connections.Subscriber, scopes []string) []wsTool {
	var out []wsTool
	seen := map[string]bool{}
	for _, s := range subs {
		for _, g := range s.Tools {
			if g.ScopeID != "" && !slices.Contains(scopes, g.ScopeID) {
				continue
			}
			for _, t := range g.Tools {
				if !seen[t.Name] {
					seen[t.Name] = true
					out = append(out, wsTool{ConnectionID: s.ConnectionID, ScopeID: g.ScopeID, Def: t})
				}
			}
		}
	}
	return out
}

// wsToolSet is the ToolSet of a WebSocket turn: the agent's tools narrowed by the allowlist,
// plus the controller-owned tools, which run as external-dispatch calls answered over the
// socket.
func (h *server) wsToolSet(agentTools *tool.Set, accountID string, t *wsTurn) (*tool.Set, error) {
	base := agentTools
	if t.Allowlist != nil && base != nil {
		base = base.Only(*t.Allowlist)
	}
	extra := make([]tool.Tool, 0, len(t.Tools))
	for _, wt := range t.Tools {
		extra = append(extra, h.externalTool(accountID, t.Runtime, wt))
	}
	if len(extra) == 0 && base != nil {
		return base, nil
	}
	set, err := base.With(extra...)
	if err != nil {
		return nil, fmt.Errorf("the controller's tools clash with the agent's: %w", err)
	}
	return set, nil
}

// externalTool is a controller-owned tool. Its execute sends external_tool_call_request, whose
// request_id is the call's AsyncToolResult id, to the connection that registered the tool (or,
// if that one has gone, to another connection of the runtime that registered the same tool);
// external_tool_call_response settles the row like POST /async-tools/{id}/complete.
func (h *server) externalTool(accountID string, rt runtimeScope, wt wsTool) tool.Tool {
	return tool.Tool{
		Name: wt.Def.Name, Description: wt.Def.Description, InputSchema: wt.Def.Parameters,
		Async: asynctools.ExternalDispatch,
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			tk, ok := asynctools.TicketFrom(ctx)
			if !ok {
				return nil, errors.New("controller-owned tools run only as dispatched calls")
			}
			req := map[string]any{
				"type": "external_tool_call_request", "request_id": tk.ResultID, "runtime": rt,
				"tool_call_id": tk.ToolCallID, "tool_name": wt.Def.Name, "input": json.RawMessage(input),
			}
			if wt.ScopeID != "" {
				req["scope_id"] = wt.ScopeID
			}
			b, err := json.Marshal(req)
			if err != nil {
				return nil, err
			}
			err = h.opts.Poster.Post(ctx, wt.ConnectionID, b)
			if err == nil {
				return map[string]bool{"dispatched": true}, nil
			}
			if !errors.Is(err, wsconn.ErrGone) {
				h.opts.Logger.WarnContext(ctx, "sending an external tool call", "connectionId", wt.ConnectionID, "err", err)
			}
			// The registering connection cannot take it: another one of the runtime that
			// registered the same tool (a reconnected controller) may.
			subs, err := h.opts.Connections.Subscribers(ctx, accountID, rt.ConversationID)
			if err != nil {
				return nil, err
			}
			for _, s := range subs {
				if s.ConnectionID == wt.ConnectionID || s.Channel == connections.Stream || !registers(s, wt) {
					continue
				}
				if err := h.opts.Poster.Post(ctx, s.ConnectionID, b); err == nil {
					return map[string]bool{"dispatched": true}, nil
				}
			}
			return nil, fmt.Errorf("the controller that registered %s is not connected", wt.Def.Name)
		},
	}
}

// registers reports whether subscriber s registered tool wt under the same scope.
func registers(s connections.Subscriber, wt wsTool) bool {
	for _, g := range s.Tools {
		if g.ScopeID != wt.ScopeID {
			continue
		}
		for _, t := range g.Tools {
			if t.Name == wt.Def.Name {
				return true
			}
		}
	}
	return false
}
