// Package subagenttools offers an agent's config.subagent as tools: one per agent it may call
// whose optional flag, if any, is on in the thread; run_subagent, to choose among them;
// subagent_create and subagent_message, for resumable instances; and notify_parent, with which
// an explicit instance answers its caller. The turn a call is made in runs it (Turn): a blocking
// call's child turn runs inside the call, a non-blocking call's is dispatched.
package subagenttools

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/toolset"
)

// Call is what a subagent call was asked.
type Call struct {
	// Config is the caller's config.subagent, and Agent its entry the call runs.
	Config *agentconfig.Subagent
	Agent  agentconfig.SubagentTool
	// Tool is the tool called, and Message the message for the child.
	Tool, Message string
	// Instance names a resumable instance, which the call makes when Create is set (it must
	// not exist yet).
	Instance string
	Create   bool
	// Named is the name the model gave a plain call's child (initAgentNameProperty), if any.
	Named string
	// Files are attachment ids of the caller's thread the child gets (initAttachmentsProperty).
	Files []string
}

// Progress states of a call.
const (
	Started  = "started"
	Message  = "message"
	Finished = "finished"
	// Waiting: a blocking call's child stopped to wait (Status says for what: approval of a
	// call, or its own async calls), and the call was handed over; its answer comes as the
	// call's async result.
	Waiting = "waiting"
)

// Progress is one step of a subagent call, for the caller's client.
type Progress struct {
	ToolCallID string `json:"toolCallId"`
	Agent      string `json:"agent"`
	ThreadID   string `json:"threadId"`
	// EventID is the child's turn, for GET /status/{eventId}.
	EventID string `json:"eventId,omitempty"`
	// State is Started, Message, Waiting or Finished.
	State string `json:"state"`
	// Text is the task the child was given (Started), one of its messages (Message), or its
	// answer or error (Finished).
	Text string `json:"text,omitempty"`
	// Status is how a finished child's turn ended, or what a waiting one waits for.
	Status string `json:"status,omitempty"`
}

// Turn is what a subagent call needs of the turn it is made in (the engine's, tool.TurnFrom).
type Turn interface {
	// CallSubagent runs or dispatches the call's child turn and returns its answer; its errors
	// are the caller's model's to see.
	CallSubagent(ctx context.Context, c Call) (any, error)
	// Instances are the resumable instances the turn's conversation made, by name.
	Instances(ctx context.Context) (map[string]store.Instance, error)
}

// maxFiles bounds the files one call gives its child.
const maxFiles = 10

// instanceName is the grammar of a resumable instance's name.
const instanceName = `^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$`

// Toolset offers config.subagent (turn.Toolset).
type Toolset struct{}

// Offer gives the tools of the agent's config.subagent for the thread, and the calls of its
// immediate agents each turn begins with.
func (Toolset) Offer(_ context.Context, b toolset.Build) (toolset.Offer, error) {
	s := b.Config.Subagent
	if s == nil {
		return toolset.Offer{}, nil
	}
	return toolset.Offer{Tools: tools(s, b.Vars), Immediate: immediateCalls(s, b.Vars)}, nil
}

// errNoTurn: a subagent call runs a turn below the caller's, which it needs.
var errNoTurn = errors.New("a subagent can only be called from a turn")

// call has the turn ctx runs in run c.
func call(ctx context.Context, c Call) (any, error) {
	t, ok := tool.TurnFrom(ctx).(Turn)
	if !ok {
		return nil, errNoTurn
	}
	return t.CallSubagent(ctx, c)
}

// tools are the model-facing tools of s for the thread's vars: one per agent whose optional
// flag, if any, is on there, and run_subagent when asked for.
func tools(s *agentconfig.Subagent, vars tool.Vars) []tool.Tool {
	var out []tool.Tool
	var on, resumable []agentconfig.SubagentTool
	for _, t := range s.Agents {
		if !offered(t, vars) {
			continue
		}
		if t.Resumable != nil {
			resumable = append(resumable, t)
			continue
		}
		on = append(on, t)
		prop := t.MessageProperty()
		out = append(out, tool.Tool{
			Name:        t.Name,
			Description: cmp.Or(t.Description, "Runs the agent "+t.Name+" on a task and returns its answer."),
			InputSchema: messageSchema(prop, nil, t),
			Async:       callMode(t),
			Subagent:    true,
			Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
				var args map[string]json.RawMessage
				if err := json.Unmarshal(input, &args); err != nil {
					return nil, err
				}
				c := Call{Config: s, Agent: t, Tool: t.Name}
				for _, f := range []struct {
					prop string
					to   any
				}{{prop, &c.Message}, {t.InitAgentNameProperty, &c.Named}, {t.InitAttachmentsProperty, &c.Files}} {
					if raw, ok := args[f.prop]; ok && f.prop != "" {
						if err := json.Unmarshal(raw, f.to); err != nil {
							return nil, err
						}
					}
				}
				return call(ctx, c)
			},
		})
	}
	out = append(out, instanceTools(s, resumable)...)
	if !s.RunSubagent || len(on) == 0 {
		return out
	}
	byName, names, lines := catalog(on, func(t agentconfig.SubagentTool) string { return t.Name })
	return append(out, tool.Tool{
		Name:        agentconfig.RunSubagent,
		Description: "Runs one of these agents on a task and returns its answer. " + strings.Join(lines, "; "),
		InputSchema: messageSchema(agentconfig.DefaultMessageProperty, names, agentconfig.SubagentTool{}),
		Async:       callMode(on[0]),
		Subagent:    true,
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			args, err := stringArgs(input)
			if err != nil {
				return nil, err
			}
			return call(ctx, Call{Config: s, Agent: byName[args["agent"]], Tool: agentconfig.RunSubagent, Message: args[agentconfig.DefaultMessageProperty]})
		},
	})
}

// offered reports whether the agent's optional flag, if it has one, is on: a variable of the
// thread, never of the process environment (an account names the flag).
func offered(t agentconfig.SubagentTool, vars tool.Vars) bool {
	if t.Optional == "" {
		return true
	}
	flag, _ := vars.Lookup(t.Optional)
	return agentconfig.FlagOn(flag)
}

// immediateCalls are the calls of s's immediate agents (whose flag, if any, is on in the
// thread) that each turn begins with, given the user's message as theirs; nil when there are
// none.
func immediateCalls(s *agentconfig.Subagent, vars tool.Vars) func(model.Message) []model.Part {
	var now []agentconfig.SubagentTool
	for _, t := range s.Agents {
		if t.Immediate != nil && t.Resumable == nil && offered(t, vars) {
			now = append(now, t)
		}
	}
	if len(now) == 0 {
		return nil
	}
	return func(m model.Message) []model.Part {
		calls := make([]model.Part, 0, len(now))
		for _, t := range now {
			input, _ := json.Marshal(map[string]string{t.MessageProperty(): m.Text()})
			// Named after the message, so each turn's call (and its child) is its own.
			calls = append(calls, model.Part{Type: model.PartToolCall, ToolCallID: "immediate_" + t.Name + "_" + m.ID, ToolName: t.Name, Input: input})
		}
		return calls
	}
}

// catalog indexes the agents a tool chooses among: by name, their sorted names, and a line for
// the tool's description each ("<label>: <description>").
func catalog(agents []agentconfig.SubagentTool, label func(agentconfig.SubagentTool) string) (map[string]agentconfig.SubagentTool, []string, []string) {
	byName := map[string]agentconfig.SubagentTool{}
	var names, lines []string
	for _, t := range agents {
		byName[t.Name] = t
		names = append(names, t.Name)
		lines = append(lines, label(t)+": "+cmp.Or(t.Description, "an agent"))
	}
	sort.Strings(names)
	return byName, names, lines
}

// instanceTools are subagent_create and subagent_message, for the resumable agents.
func instanceTools(s *agentconfig.Subagent, resumable []agentconfig.SubagentTool) []tool.Tool {
	if len(resumable) == 0 {
		return nil
	}
	byName, names, lines := catalog(resumable, func(t agentconfig.SubagentTool) string {
		return fmt.Sprintf("%s (at most %d)", t.Name, t.Resumable.Instances())
	})
	schema := func(props map[string]any, required ...string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false})
		return b
	}
	name := map[string]any{"type": "string", "pattern": instanceName, "description": "The instance's name, which later messages address it by."}
	message := map[string]any{"type": "string", "minLength": 1, "maxLength": 100000, "description": "The message for the instance."}
	return []tool.Tool{{
		Name: agentconfig.SubagentCreate,
		Description: "Creates a named instance of one of these agents, which keeps its conversation across your turns, " +
			"and sends it its first message; its answer comes back to you later. " + strings.Join(lines, "; "),
		InputSchema: schema(map[string]any{"agent": map[string]any{"type": "string", "enum": names}, "name": name, "message": message}, "agent", "name", "message"),
		Async:       asynctools.ExternalDispatch, Subagent: true,
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			args, err := stringArgs(input)
			if err != nil {
				return nil, err
			}
			return call(ctx, Call{Config: s, Agent: byName[args["agent"]], Tool: agentconfig.SubagentCreate, Message: args["message"], Instance: args["name"], Create: true})
		},
	}, {
		Name:        agentconfig.SubagentMessage,
		Description: "Sends a message to an instance made with subagent_create, by its name; its answer comes back to you later.",
		InputSchema: schema(map[string]any{"name": name, "message": message}, "name", "message"),
		Async:       asynctools.ExternalDispatch, Subagent: true,
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			args, err := stringArgs(input)
			if err != nil {
				return nil, err
			}
			turn, ok := tool.TurnFrom(ctx).(Turn)
			if !ok {
				return nil, errNoTurn
			}
			instances, err := turn.Instances(ctx)
			if err != nil {
				return nil, err
			}
			in, found := instances[args["name"]]
			if !found {
				return nil, fmt.Errorf("no subagent instance is named %q here: create it with subagent_create", args["name"])
			}
			t, found := byName[in.Agent]
			if !found {
				return nil, fmt.Errorf("instance %q runs %s, which is no longer a resumable agent of subagent.agents", in.Name, in.Agent)
			}
			return turn.CallSubagent(ctx, Call{Config: s, Agent: t, Tool: agentconfig.SubagentMessage, Message: args["message"], Instance: in.Name})
		},
	}}
}

// NotifyParent is the notify_parent tool of a turn an explicit resumable instance runs for its
// caller's call: it answers the call with a message, through settle, which says how the call
// was settled otherwise already, if it was.
func NotifyParent(settle func(ctx context.Context, message string) (settledOtherwise string, err error)) tool.Tool {
	return tool.Tool{
		Name:        agentconfig.NotifyParent,
		Description: "Answers the agent that sent you this message. Call it once, with your answer: it does not see your replies otherwise.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","minLength":1,"maxLength":100000,"description":"Your answer."}},"required":["message"],"additionalProperties":false}`),
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			var args struct {
				Message string `json:"message"`
			}
			if err := json.Unmarshal(input, &args); err != nil {
				return nil, err
			}
			otherwise, err := settle(ctx, args.Message)
			if err != nil {
				return nil, err
			}
			if otherwise != "" {
				return map[string]any{"delivered": false, "reason": "this message was answered already (" + otherwise + ")"}, nil
			}
			return map[string]any{"delivered": true}, nil
		},
	}
}

// stringArgs decodes a subagent tool's input, whose schema makes every property a string.
func stringArgs(input json.RawMessage) (map[string]string, error) {
	var args map[string]string
	return args, json.Unmarshal(input, &args)
}

// callMode is a subagent tool's execution: inline for a blocking call, else dispatched.
func callMode(t agentconfig.SubagentTool) string {
	if t.IsBlocking() {
		return ""
	}
	return asynctools.ExternalDispatch
}

// messageSchema is the input of a subagent tool: the message under prop, for run_subagent the
// agent's name out of names, and t's optional properties: a name for the child
// (initAgentNameProperty) and files for it (initAttachmentsProperty).
func messageSchema(prop string, names []string, t agentconfig.SubagentTool) json.RawMessage {
	props := map[string]any{prop: map[string]any{"type": "string", "minLength": 1, "maxLength": 100000, "description": "The task or message for the agent."}}
	if p := t.InitAgentNameProperty; p != "" {
		props[p] = map[string]any{"type": "string", "pattern": instanceName, "description": "A name for this run of the agent, shown to the user."}
	}
	if p := t.InitAttachmentsProperty; p != "" {
		props[p] = map[string]any{"type": "array", "maxItems": maxFiles, "uniqueItems": true, "description": "Files of this conversation to give the agent, by their attachment ids.",
			"items": map[string]any{"type": "string", "pattern": attachments.IDPattern}}
	}
	required := []string{prop}
	if names != nil {
		props["agent"] = map[string]any{"type": "string", "enum": names, "description": "The agent to run."}
		required = append([]string{"agent"}, required...)
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false})
	return b
}
