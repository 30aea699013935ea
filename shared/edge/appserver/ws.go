package appserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentharness/harness/shared/agentconfig"
	"math"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/callers"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/turn/follow"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/agentharness/harness/shared/wire/ids"
	"github.com/agentharness/harness/shared/wire/strictjson"
	"github.com/agentharness/harness/shared/wire/wsconn"
)

// MaxFrameBytes is the largest command the gateway reads: API Gateway's WebSocket message limit.
const MaxFrameBytes = wsconn.MaxMessageSize

// Gateway is ws-gateway: the Letta App Server v2 protocol over a WebSocket. Each frame is
// handled on its own, as API Gateway invokes a function per message: what must outlive a frame
// (connections, runtimes, their external tools, a runtime's run) is in the connections table,
// and turns run on async-worker, which posts their output to the runtime's connections.
type Gateway struct {
	h      *server
	agents *agentstore.Service
}

// Disconnect forgets a connection. Tool calls it was asked to run stay on their rows: another
// connection may answer them, or they time out.
func (g *Gateway) Disconnect(ctx context.Context, connectionID string) error {
	return g.h.opts.Connections.Disconnect(ctx, connectionID)
}

// command is what every frame has: its type and, for commands that answer, a request_id.
type command struct {
	Type      string          `json:"type"`
	RequestID string          `json:"request_id"`
	Runtime   *runtimeScope   `json:"runtime"`
	Payload   json.RawMessage `json:"payload"`
}

// Message handles one frame from a connection. Nothing a client sends drops the socket: bad
// input gets an error frame, with the request_id when the frame had one. What ends the socket
// is its authority ending: account-manage closes the account's sockets of an old secret as it
// rotates the secret or deletes the account, and every frame is checked against the account as
// it is now too, so a socket that escaped that gets an error at its next frame and is closed.
func (g *Gateway) Message(ctx context.Context, connectionID string, body []byte) error {
	conn, err := g.h.opts.Connections.Connection(ctx, connectionID)
	if errors.Is(err, connections.ErrNotFound) {
		return g.post(ctx, connectionID, map[string]any{"type": "error", "error": "this connection is not registered (it may have expired); reconnect"})
	}
	if err != nil {
		return err
	}
	if stop, err := g.authority(ctx, conn); stop || err != nil {
		return err
	}
	if len(body) > MaxFrameBytes {
		return g.post(ctx, conn.ID, map[string]any{"type": "error", "error": fmt.Sprintf("frame of %d bytes is larger than the %d-byte limit", len(body), MaxFrameBytes)})
	}
	var cmd command
	if err := json.Unmarshal(body, &cmd); err != nil {
		return g.post(ctx, conn.ID, map[string]any{"type": "error", "error": "malformed JSON: " + err.Error()})
	}
	c := &call{g: g, conn: conn, cmd: cmd, body: body}
	if err := strictjson.CheckKeys(body); err != nil {
		return c.fail(ctx, "error", err.Error())
	}
	if err := httpjson.CheckOptionalID("request_id", cmd.RequestID); err != nil {
		c.cmd.RequestID = "" // a malformed id is not echoed back
		return c.fail(ctx, "error", c.refusal(ctx, err))
	}
	switch cmd.Type {
	case "app_server_info":
		return c.info(ctx)
	case "runtime_start":
		return c.runtimeStart(ctx)
	case "runtime_external_tools_update":
		return c.toolsUpdate(ctx)
	case "input":
		return c.input(ctx)
	case "sync":
		return c.sync(ctx)
	case "abort_message":
		return c.abort(ctx)
	case "external_tool_call_response":
		return c.toolResponse(ctx)
	case "conversation_list":
		return c.conversationList(ctx)
	case "list_models":
		return c.listModels(ctx)
	case "update_model":
		return c.updateModel(ctx)
	case "update_toolset":
		return c.updateToolset(ctx)
	case "":
		return c.fail(ctx, "error", `the frame has no "type"`)
	}
	if use, ok := legacyCommands[cmd.Type]; ok {
		return c.fail(ctx, "error", fmt.Sprintf("%q is a v1 listener command: send %s instead", cmd.Type, use))
	}
	if handled, err := c.memoryCommands(ctx); handled {
		return err
	}
	if handled, err := c.providerCommands(ctx); handled {
		return err
	}
	return c.fail(ctx, "error", fmt.Sprintf("unknown or unsupported command type %q", cmd.Type))
}

// legacyCommands are the v1 listener's command names, which the App Server does not take, and
// what a controller sends instead (the App Server guide's table).
var legacyCommands = map[string]string{
	"request_state":             "sync",
	"change_cwd":                "change_device_state with payload.cwd",
	"change_mode":               "change_device_state with payload.mode",
	"cancel_run":                "abort_message",
	"recover_pending_approvals": "sync with recover_approvals: true",
}

// post sends msg to one connection; a connection that has gone is forgotten.
func (g *Gateway) post(ctx context.Context, connectionID string, msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	err = g.h.opts.Poster.Post(ctx, connectionID, b)
	if errors.Is(err, wsconn.ErrGone) {
		return g.h.opts.Connections.Disconnect(context.WithoutCancel(ctx), connectionID)
	}
	return err
}

// call is one command being handled.
type call struct {
	g    *Gateway
	conn connections.Connection
	cmd  command
	body []byte
}

func (c *call) reply(ctx context.Context, msg map[string]any) error {
	if c.cmd.RequestID != "" {
		msg["request_id"] = c.cmd.RequestID
	}
	return c.g.post(ctx, c.conn.ID, msg)
}

// fail answers the command with its response type and success false (type "error" when the
// command has no response of its own).
func (c *call) fail(ctx context.Context, responseType, msg string) error {
	out := map[string]any{"type": responseType, "success": false, "error": msg}
	if c.cmd.Runtime != nil {
		out["runtime"] = c.cmd.Runtime
	}
	return c.reply(ctx, out)
}

// refusal is the client-facing text of err: an engine refusal's or an *httpjson.Error's
// message, a generic text otherwise (logged in full). It is the one place the App Server maps
// the engine's refusals to its error frames.
func (c *call) refusal(ctx context.Context, err error) string {
	var ref *turn.Refusal
	if errors.As(err, &ref) {
		return ref.Message
	}
	var e *httpjson.Error
	if errors.As(err, &e) {
		return e.Message
	}
	c.g.h.opts.Logger.ErrorContext(ctx, "websocket command failed", "type", c.cmd.Type, "err", err)
	return "internal error"
}

func (c *call) decode(v any) error {
	if err := json.Unmarshal(c.body, v); err != nil {
		return fmt.Errorf("malformed %s: %v", c.cmd.Type, err)
	}
	return nil
}

func (c *call) info(ctx context.Context) error {
	return c.reply(ctx, map[string]any{
		"type": "app_server_info_response", "success": true, "backend": "api",
		"letta_code_version": "harness", "protocol_version": 1, "server": "harness",
		"capabilities": map[string]any{
			"agent_management": false, "conversation_management": false, "memory_management": c.g.h.opts.Workspaces != nil,
			"runtime_start": true, "runtime_external_tools_update": true, "launch_subagent": false,
			"runtime_workspace_sandbox": false, "structured_outputs": false, "split_channels": true,
		},
	})
}

// runtimeStart resolves (or creates) the agent and the conversation, registers the
// connection's external tools for the runtime, answers with the canonical runtime and replays
// the runtime's state.
func (c *call) runtimeStart(ctx context.Context) error {
	const resp = "runtime_start_response"
	var cmd struct {
		AgentID     *string `json:"agent_id"`
		CreateAgent *struct {
			Body json.RawMessage `json:"body"`
		} `json:"create_agent"`
		ConversationID     *string                 `json:"conversation_id"`
		CreateConversation json.RawMessage         `json:"create_conversation"`
		ExternalTools      []connections.ToolGroup `json:"external_tools"`
		// RecoverApprovals, as on sync: held approvals are put to the controller again unless
		// it says it has them (false).
		RecoverApprovals *bool `json:"recover_approvals"`
	}
	if err := c.decode(&cmd); err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	hasConv := cmd.ConversationID != nil
	createConv := len(cmd.CreateConversation) > 0 && string(cmd.CreateConversation) != "null"
	switch {
	case (cmd.AgentID == nil) == (cmd.CreateAgent == nil):
		return c.fail(ctx, resp, "send exactly one of agent_id and create_agent")
	case hasConv == createConv:
		return c.fail(ctx, resp, "send exactly one of conversation_id and create_conversation")
	}
	if hasConv {
		if err := httpjson.CheckID("conversation_id", *cmd.ConversationID); err != nil {
			return c.fail(ctx, resp, c.refusal(ctx, err))
		}
	}
	if cmd.AgentID != nil {
		if err := httpjson.CheckID("agent_id", *cmd.AgentID); err != nil {
			return c.fail(ctx, resp, c.refusal(ctx, err))
		}
	}
	if err := checkToolGroups(cmd.ExternalTools); err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	acc := c.conn.AccountID
	var view agentstore.View
	created := map[string]bool{"agent": false, "conversation": false}
	if c.conn.Token() {
		if cmd.CreateAgent != nil {
			return c.fail(ctx, resp, "create_agent: an end-user token may not create agents (only the account secret may); start one of its agents with agent_id")
		}
		rt := runtimeScope{AgentID: *cmd.AgentID}
		if hasConv {
			rt.ConversationID = *cmd.ConversationID
		}
		if err := c.admit(ctx, rt); err != nil {
			return c.fail(ctx, resp, err.Error())
		}
	}
	if cmd.CreateAgent != nil {
		body, err := agentBody(cmd.CreateAgent.Body)
		if err != nil {
			return c.fail(ctx, resp, "create_agent.body: "+err.Error())
		}
		view, err = c.g.agents.Create(ctx, acc, store.NewID("agt_"), body)
		if err != nil {
			return c.fail(ctx, resp, "create_agent.body: "+c.refusal(ctx, agentconfig.HTTPError(err)))
		}
		created["agent"] = true
	} else {
		var err error
		view, err = c.g.agents.Get(ctx, acc, *cmd.AgentID)
		if errors.Is(err, store.ErrNotFound) {
			return c.fail(ctx, resp, "agent "+*cmd.AgentID+" not found")
		}
		if err != nil {
			return c.fail(ctx, resp, c.refusal(ctx, err))
		}
	}
	rt := runtimeScope{AgentID: view.AgentID}
	if hasConv {
		rt.ConversationID = *cmd.ConversationID
		head, err := c.g.h.opts.Store.ConversationHead(ctx, acc, rt.ConversationID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return c.fail(ctx, resp, c.refusal(ctx, err))
		case head.AgentID != rt.AgentID:
			return c.fail(ctx, resp, "conversation "+rt.ConversationID+" belongs to another agent")
		}
	} else {
		rt.ConversationID = store.NewID("conv_")
		created["conversation"] = true
	}
	if err := c.checkToolsAgainstAgent(ctx, rt.AgentID, cmd.ExternalTools); err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	tools := cmd.ExternalTools
	if tools == nil {
		tools = []connections.ToolGroup{}
	}
	asked, err := c.subscribeForReplay(ctx, rt, tools, !created["conversation"])
	if err != nil {
		return c.fail(ctx, resp, c.refusal(ctx, err))
	}
	var cfg struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(view.Config, &cfg)
	if err := c.reply(ctx, map[string]any{
		"type": resp, "success": true, "runtime": rt, "created": created,
		"agent":        map[string]any{"id": rt.AgentID, "name": cfg.Name},
		"conversation": map[string]any{"id": rt.ConversationID, "agent_id": rt.AgentID},
	}); err != nil {
		return err
	}
	return c.g.replay(ctx, c.conn, rt, cmd.RecoverApprovals == nil || *cmd.RecoverApprovals, asked)
}

// subscribeForReplay subscribes the connection to the runtime asking for its latest turn's
// output where there may be one (existing) and it can be replayed: from the stream log, to a
// connection that carries the stream channel. asked says whether it asked.
func (c *call) subscribeForReplay(ctx context.Context, rt runtimeScope, tools []connections.ToolGroup, existing bool) (asked bool, err error) {
	reg, now := c.g.h.opts.Connections, c.g.h.opts.Now()
	if !existing || c.g.h.opts.Streams == nil || c.conn.Channel == connections.Control {
		return false, reg.Subscribe(ctx, c.conn, rt.AgentID, rt.ConversationID, tools, now)
	}
	return true, reg.SubscribeForReplay(ctx, c.conn, rt.AgentID, rt.ConversationID, tools, now)
}

// checkToolsAgainstAgent refuses external tools named like one of the agent's own tools: the
// model would see two tools of one name.
func (c *call) checkToolsAgainstAgent(ctx context.Context, agentID string, groups []connections.ToolGroup) error {
	if len(groups) == 0 {
		return nil
	}
	cfg, err := c.g.h.eng.LoadAgent(ctx, c.conn.AccountID, agentID, nil)
	if err != nil {
		return errors.New(c.refusal(ctx, err))
	}
	if cfg.Tools == nil {
		return nil
	}
	own := map[string]bool{}
	for _, n := range cfg.Tools.Names() {
		own[n] = true
	}
	for _, g := range groups {
		for _, t := range g.Tools {
			if own[t.Name] {
				return fmt.Errorf("external tool %s has the name of one of agent %s's own tools", t.Name, agentID)
			}
		}
	}
	return nil
}

// agentBody maps a Letta agent create body to an agent config: name, system, model (a
// "provider/model" handle, or the harness's model block) and tools (tool names, or the
// harness's config.tools object). Letta fields with no meaning here (memory_blocks…) are
// ignored.
func agentBody(raw json.RawMessage) ([]byte, error) {
	var b map[string]json.RawMessage
	if err := json.Unmarshal(raw, &b); err != nil || b == nil {
		return nil, errors.New("must be a JSON object")
	}
	out := map[string]any{}
	for _, k := range []string{"name", "system", "maxSteps"} {
		if v, ok := b[k]; ok {
			out[k] = v
		}
	}
	if v, ok := b["model"]; ok {
		var handle string
		if json.Unmarshal(v, &handle) == nil {
			provider, id, ok := strings.Cut(handle, "/")
			if !ok || provider == "" || id == "" {
				return nil, fmt.Errorf(`model %q must be a "provider/model" handle or a model block`, handle)
			}
			out["model"] = map[string]string{"provider": provider, "model": id}
		} else {
			out["model"] = v
		}
	}
	if v, ok := b["tools"]; ok {
		var names []string
		if json.Unmarshal(v, &names) == nil {
			tools := map[string]any{}
			for _, n := range names {
				tools[n] = map[string]any{}
			}
			out["tools"] = tools
		} else {
			out["tools"] = v
		}
	}
	return json.Marshal(out)
}

// scope reads the command's runtime and checks its ids.
func (c *call) scope(ctx context.Context) (runtimeScope, error) {
	rt := c.cmd.Runtime
	if rt == nil {
		return runtimeScope{}, errors.New("runtime (agent_id and conversation_id) is required")
	}
	if err := rt.check("runtime."); err != nil {
		return runtimeScope{}, errors.New(c.refusal(ctx, err))
	}
	return *rt, nil
}

// runtime reads and checks the command's runtime: the connection must have started it (or
// synced it), and the agent must be the runtime's.
func (c *call) runtime(ctx context.Context) (runtimeScope, []connections.Subscriber, error) {
	rt, err := c.scope(ctx)
	if err != nil {
		return runtimeScope{}, nil, err
	}
	subs, err := c.subscribed(ctx, rt)
	return rt, subs, err
}

// subscribed reads the runtime's subscribers and checks that the connection is one of them,
// for the runtime's agent.
func (c *call) subscribed(ctx context.Context, rt runtimeScope) ([]connections.Subscriber, error) {
	subs, err := c.g.h.opts.Connections.Subscribers(ctx, c.conn.AccountID, rt.ConversationID)
	if err != nil {
		return nil, errors.New(c.refusal(ctx, err))
	}
	for _, s := range subs {
		if s.ConnectionID == c.conn.ID {
			if s.AgentID != rt.AgentID {
				return nil, fmt.Errorf("conversation %s runs agent %s, not %s", rt.ConversationID, s.AgentID, rt.AgentID)
			}
			return subs, nil
		}
	}
	return nil, fmt.Errorf("runtime %s/%s is not started on this connection: send runtime_start first", rt.AgentID, rt.ConversationID)
}

// caller is who the connection speaks for.
func (c *call) caller() callers.Caller {
	return callers.Caller{AccountID: c.conn.AccountID, EndUser: c.conn.EndUser, Agents: c.conn.Agents, Expires: c.conn.Until}
}

// admit refuses an end-user token a runtime it may not drive, as if it did not exist: an agent
// not among its agents, a conversation that is not its end user's (or that no turn wrote yet,
// unless this connection started it with create_conversation). The account secret drives any.
func (c *call) admit(ctx context.Context, rt runtimeScope) error {
	who := c.caller()
	switch {
	case !who.Token():
		return nil
	case !who.Allows(rt.AgentID):
		return fmt.Errorf("agent %s not found", rt.AgentID)
	case rt.ConversationID == "":
		return nil
	}
	info, err := c.g.h.opts.Store.Conversation(ctx, c.conn.AccountID, rt.ConversationID)
	switch {
	case err == nil && who.Sees(info.EndUser):
		return nil
	case errors.Is(err, store.ErrNotFound):
		if _, err := c.subscribed(ctx, rt); err == nil {
			return nil
		}
	case err != nil:
		return errors.New(c.refusal(ctx, err))
	}
	return errors.New(turn.ConversationNotFound(rt.ConversationID).Message)
}

func (c *call) toolsUpdate(ctx context.Context) error {
	const resp = "runtime_external_tools_update_response"
	var cmd struct {
		Updates []struct {
			Runtimes      []runtimeScope          `json:"runtimes"`
			ExternalTools []connections.ToolGroup `json:"external_tools"`
		} `json:"updates"`
	}
	if err := c.decode(&cmd); err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	for i, u := range cmd.Updates {
		if err := checkToolGroups(u.ExternalTools); err != nil {
			return c.fail(ctx, resp, fmt.Sprintf("updates[%d]: %v", i, err))
		}
		for j, rt := range u.Runtimes {
			if err := rt.check(fmt.Sprintf("updates[%d].runtimes[%d].", i, j)); err != nil {
				return c.fail(ctx, resp, c.refusal(ctx, err))
			}
			if err := c.admit(ctx, rt); err != nil {
				return c.fail(ctx, resp, fmt.Sprintf("updates[%d].runtimes[%d]: %v", i, j, err))
			}
			if _, err := c.g.agents.Get(ctx, c.conn.AccountID, rt.AgentID); err != nil {
				return c.fail(ctx, resp, fmt.Sprintf("updates[%d].runtimes[%d]: agent %s not found", i, j, rt.AgentID))
			}
			head, err := c.g.h.opts.Store.ConversationHead(ctx, c.conn.AccountID, rt.ConversationID)
			if err == nil && head.AgentID != rt.AgentID {
				return c.fail(ctx, resp, fmt.Sprintf("updates[%d].runtimes[%d]: conversation %s belongs to another agent", i, j, rt.ConversationID))
			}
			if err := c.checkToolsAgainstAgent(ctx, rt.AgentID, u.ExternalTools); err != nil {
				return c.fail(ctx, resp, fmt.Sprintf("updates[%d]: %v", i, err))
			}
		}
	}
	for _, u := range cmd.Updates {
		tools := u.ExternalTools
		if tools == nil {
			tools = []connections.ToolGroup{}
		}
		for _, rt := range u.Runtimes {
			if err := c.g.h.opts.Connections.Subscribe(ctx, c.conn, rt.AgentID, rt.ConversationID, tools, c.g.h.opts.Now()); err != nil {
				return c.fail(ctx, resp, c.refusal(ctx, err))
			}
		}
	}
	return c.reply(ctx, map[string]any{"type": resp, "success": true})
}

// inputPayload is create_message or approval_response.
type inputPayload struct {
	Kind     string `json:"kind"`
	Messages []struct {
		Role            string          `json:"role"`
		Content         json.RawMessage `json:"content"`
		ClientMessageID string          `json:"client_message_id"`
	} `json:"messages"`
	ClientToolAllowlist  *[]string `json:"client_tool_allowlist"`
	ExternalToolScopeIDs []string  `json:"external_tool_scope_ids"`
	// ImageFailureMode is "strict" (the default: an image that cannot be taken refuses the
	// message) or "drop" (it is left out).
	ImageFailureMode string `json:"image_failure_mode"`

	RequestID string `json:"request_id"`
	Decision  *struct {
		Behavior string `json:"behavior"`
		Message  string `json:"message"`
	} `json:"decision"`
	Error string `json:"error"`
}

// input queues a turn: a new user message, or the answer to a held call. The turn runs on
// async-worker like an /async turn, with the controller-owned tools the message can see.
func (c *call) input(ctx context.Context) error {
	refuse := func(msg string) error {
		if c.cmd.RequestID == "" {
			return c.reply(ctx, map[string]any{"type": "error", "error": msg})
		}
		out := map[string]any{"type": "input_accepted", "accepted": false, "error": msg}
		if c.cmd.Runtime != nil {
			out["runtime"] = c.cmd.Runtime
		}
		return c.reply(ctx, out)
	}
	rt, subs, err := c.runtime(ctx)
	if err != nil {
		return refuse(err.Error())
	}
	var p inputPayload
	if err := json.Unmarshal(c.cmd.Payload, &p); err != nil || len(c.cmd.Payload) == 0 {
		return refuse("payload must be an object with a kind (create_message or approval_response)")
	}
	h := c.g.h
	run, hasRun, err := h.opts.Connections.Run(ctx, c.conn.AccountID, rt.ConversationID)
	if err != nil {
		return refuse(c.refusal(ctx, err))
	}
	req := &turn.Request{ConversationID: rt.ConversationID, AgentID: rt.AgentID, EventID: store.NewID("evt_"), EndUser: c.conn.EndUser}
	var in turn.Input
	wt := &wsTurn{Runtime: rt}
	switch p.Kind {
	case "create_message":
		msg, err := userMessage(p)
		if err != nil {
			return refuse(err.Error())
		}
		if err := c.keepFiles(ctx, rt.ConversationID, msg); err != nil {
			return refuse(err.Error())
		}
		in.Message = msg
		wt.Tools = visibleTools(subs, p.ExternalToolScopeIDs)
		wt.Allowlist = p.ClientToolAllowlist
	case "approval_response":
		if p.RequestID == "" {
			return refuse("payload.request_id (the control_request's request_id) is required")
		}
		if err := httpjson.CheckID("payload.request_id", p.RequestID); err != nil {
			return refuse(c.refusal(ctx, err))
		}
		d := turn.Decision{ApprovalID: p.RequestID}
		switch {
		case p.Error != "":
			d.Approved, d.Reason = new(false), p.Error
		case p.Decision == nil:
			return refuse(`payload.decision is required: {"behavior":"allow"} or {"behavior":"deny","message":…}`)
		case p.Decision.Behavior == "allow":
			d.Approved, d.Reason = new(true), p.Decision.Message
		case p.Decision.Behavior == "deny":
			d.Approved, d.Reason = new(false), p.Decision.Message
		default:
			return refuse(fmt.Sprintf("payload.decision.behavior %q is not allow or deny", p.Decision.Behavior))
		}
		in.Decisions = []turn.Decision{d}
		if routed, err := c.childDecision(ctx, rt, req, in, refuse); routed {
			return err
		}
		// The answer continues the turn that asked, with the tools it had.
		if hasRun && len(run.Turn) > 0 {
			_ = json.Unmarshal(run.Turn, wt)
			wt.Runtime = rt
		}
	default:
		return refuse(fmt.Sprintf("payload.kind %q is not create_message or approval_response", p.Kind))
	}
	if _, err := h.eng.Agent(ctx, c.conn.AccountID, *req, false); err != nil {
		return refuse(c.refusal(ctx, err))
	}
	wsState, err := json.Marshal(wt)
	if err != nil {
		return err
	}
	disposition := "started"
	if hasRun && (run.Status == store.EventProcessing || run.Status == runQueued) {
		disposition = "queued"
	}
	// The run is recorded as queued before the worker can pick the turn up (and record its own
	// progress, which this must not overwrite), so an abort_message that comes first reaches it;
	// an input the runtime is busy for goes on its queue before the worker can take it off.
	accepted := func(ctx context.Context) (func(context.Context), error) {
		if disposition == "queued" {
			q := connections.Queued{ID: req.EventID, Kind: "message", Source: "user", EnqueuedAt: h.opts.Now()}
			if in.Message != nil {
				q.ClientMessageID, q.Content = in.Message.ID, in.Message.Text()
			} else {
				q.Kind, q.ClientMessageID = "approval_result", p.RequestID
			}
			if err := h.opts.Connections.Enqueue(ctx, c.conn.AccountID, rt.ConversationID, q); err != nil {
				return nil, err
			}
			return func(ctx context.Context) {
				if _, err := h.opts.Connections.Dequeue(ctx, c.conn.AccountID, rt.ConversationID, req.EventID); err != nil {
					h.opts.Logger.ErrorContext(ctx, "dequeueing the refused input", "eventId", req.EventID, "err", err)
				}
			}, nil
		}
		queued := connections.Run{EventID: req.EventID, FromSeq: -1, Status: runQueued, Turn: wsState, UpdatedAt: h.opts.Now()}
		if err := h.opts.Connections.SetRun(ctx, c.conn.AccountID, rt.ConversationID, queued); err != nil {
			h.opts.Logger.ErrorContext(ctx, "recording the queued websocket run", "eventId", req.EventID, "err", err)
			return nil, nil
		}
		if !hasRun {
			return nil, nil
		}
		return func(ctx context.Context) {
			// Nothing will run it: the runtime's run is the one before again.
			if err := h.opts.Connections.SetRun(ctx, c.conn.AccountID, rt.ConversationID, run); err != nil {
				h.opts.Logger.ErrorContext(ctx, "restoring the websocket run", "eventId", run.EventID, "err", err)
			}
		}, nil
	}
	err = h.eng.Queue(ctx, turn.Queued{
		AccountID: c.conn.AccountID, Request: *req, Input: in, Edge: Edge, Route: wsState, Accepted: accepted,
	})
	if err != nil {
		return refuse(c.refusal(ctx, err))
	}
	if c.cmd.RequestID != "" {
		if err := c.reply(ctx, map[string]any{"type": "input_accepted", "runtime": rt, "accepted": true, "disposition": disposition, "run_id": req.EventID}); err != nil {
			return err
		}
	}
	if disposition == "queued" {
		h.newOut(c.conn.AccountID, rt, run.EventID).queue(ctx)
	}
	return nil
}

// childDecision sends a decision on a held call of a subagent of the runtime's conversation (put
// to the controller as the subagent stopped) to the subagent, whose turn resumes on
// async-worker as an /async turn; its end lets the runtime's turn go on, which the controller
// follows as usual. routed is false, and nothing done, for the conversation's own approvals.
func (c *call) childDecision(ctx context.Context, rt runtimeScope, req *turn.Request, in turn.Input, refuse func(string) error) (routed bool, err error) {
	h := c.g.h
	route, err := follow.ToChild(ctx, h.eng, c.conn.AccountID, req, &in)
	if err != nil {
		return true, refuse(c.refusal(ctx, err))
	}
	if route == nil {
		return false, nil
	}
	if err := h.eng.Queue(ctx, turn.Queued{AccountID: c.conn.AccountID, Request: *req, Input: in, Reopen: true}); err != nil {
		return true, refuse(c.refusal(ctx, err))
	}
	if c.cmd.RequestID == "" {
		return true, nil
	}
	return true, c.reply(ctx, map[string]any{"type": "input_accepted", "runtime": rt, "accepted": true, "disposition": "started", "run_id": req.EventID})
}

// userMessage joins the text of create_message's messages into one user message.
func userMessage(p inputPayload) (*model.Message, error) {
	if len(p.Messages) == 0 {
		return nil, errors.New("payload.messages is empty")
	}
	var text []string
	var files []model.Part
	id := ""
	for i, m := range p.Messages {
		if m.Role != "user" {
			return nil, fmt.Errorf("payload.messages[%d].role %q is not supported (only user)", i, m.Role)
		}
		t, f, err := contentParts(m.Content, p.ImageFailureMode == "drop")
		if err != nil {
			return nil, fmt.Errorf("payload.messages[%d].content: %v", i, err)
		}
		text, files = append(text, t), append(files, f...)
		if m.ClientMessageID != "" {
			if p := ids.Problem(m.ClientMessageID); p != "" {
				return nil, fmt.Errorf("payload.messages[%d].client_message_id: %s", i, p)
			}
			id = m.ClientMessageID
		}
	}
	joined := strings.Join(text, "\n\n")
	if strings.TrimSpace(joined) == "" && len(files) == 0 {
		return nil, errors.New("payload.messages has no text and no image")
	}
	if id == "" {
		id = turn.NewMessageID()
	}
	var parts []model.Part
	if strings.TrimSpace(joined) != "" {
		parts = append(parts, model.Part{Type: model.PartText, Text: joined})
	}
	m := &model.Message{ID: id, Role: model.RoleUser, Parts: append(parts, files...)}
	if err := turn.CheckMessageSize("payload.messages", m); err != nil {
		return nil, err
	}
	return m, nil
}

// keepFiles stores the images a new message carries as attachments of its conversation, as the
// HTTP routes do, so the message (and the queued turn) holds their ids, never their bytes.
func (c *call) keepFiles(ctx context.Context, conversationID string, m *model.Message) error {
	for i, p := range m.Parts {
		if p.Type != model.PartFile || p.Data == nil {
			continue
		}
		if c.g.h.opts.Attachments == nil {
			return errors.New("payload.messages: this deployment keeps no files (no bucket for them)")
		}
		id, err := c.g.h.opts.Attachments.Put(ctx, c.conn.AccountID, conversationID, p.Data)
		if err != nil {
			return errors.New(c.refusal(ctx, err))
		}
		m.Parts[i].Attachment, m.Parts[i].Data = id, nil
	}
	return nil
}

// contentParts reads a Letta message content: a string, or text and image parts. An image is
// base64 bytes (source.type "base64"): the harness fetches no URL a client names. With drop
// (image_failure_mode "drop"), an image that cannot be taken is left out rather than refused.
func contentParts(raw json.RawMessage, drop bool) (string, []model.Part, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, nil
	}
	var parts []struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		Source *struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, errors.New("must be a string or a list of text and image parts")
	}
	var b strings.Builder
	var files []model.Part
	for i, p := range parts {
		switch p.Type {
		case "text":
			b.WriteString(p.Text)
		case "image":
			file, err := imagePart(p.Source)
			if err != nil && !drop {
				return "", nil, fmt.Errorf("part %d: %v", i, err)
			}
			if err == nil {
				files = append(files, file)
			}
		default:
			return "", nil, fmt.Errorf("part %d has type %q; text and image are supported", i, p.Type)
		}
	}
	return b.String(), files, nil
}

// imagePart is an image content part's file.
func imagePart(src *struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}) (model.Part, error) {
	if src == nil || src.Type != "base64" {
		return model.Part{}, errors.New(`source must be {"type": "base64", "media_type", "data"}: the harness does not fetch URLs`)
	}
	if field, problem := attachments.Problem(src.MediaType, ""); field != "" {
		return model.Part{}, fmt.Errorf("source.media_type %s", problem)
	}
	data, err := base64.StdEncoding.DecodeString(src.Data)
	if err != nil {
		return model.Part{}, errors.New("source.data is not valid base64")
	}
	if len(data) > attachments.MaxBytes {
		return model.Part{}, fmt.Errorf("the image takes %d bytes, more than %d", len(data), attachments.MaxBytes)
	}
	return model.Part{Type: model.PartFile, MediaType: src.MediaType, Data: data}, nil
}

// sync subscribes the connection to the runtime (keeping tools it registered) and replays the
// runtime's state to it: the loop status, a running turn's output so far, held approvals.
func (c *call) sync(ctx context.Context) error {
	const resp = "sync_response"
	rt, err := c.scope(ctx)
	if err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	if err := c.admit(ctx, rt); err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	if _, err := c.g.agents.Get(ctx, c.conn.AccountID, rt.AgentID); err != nil {
		return c.fail(ctx, resp, "agent "+rt.AgentID+" not found")
	}
	head, err := c.g.h.opts.Store.ConversationHead(ctx, c.conn.AccountID, rt.ConversationID)
	if err == nil && head.AgentID != rt.AgentID {
		return c.fail(ctx, resp, "conversation "+rt.ConversationID+" belongs to another agent")
	}
	var opts struct {
		RecoverApprovals  *bool `json:"recover_approvals"`
		ForceDeviceStatus *bool `json:"force_device_status"`
	}
	if err := json.Unmarshal(c.body, &opts); err != nil {
		return c.fail(ctx, resp, "recover_approvals and force_device_status must be booleans")
	}
	if opts.ForceDeviceStatus != nil && *opts.ForceDeviceStatus {
		return c.fail(ctx, resp, "force_device_status: the harness runs no device, so it has no device status to send; omit it or send false")
	}
	asked, err := c.subscribeForReplay(ctx, rt, nil, true)
	if err != nil {
		return c.fail(ctx, resp, c.refusal(ctx, err))
	}
	// Held approvals are put to the controller again unless it says it has them already.
	recoverHeld := opts.RecoverApprovals == nil || *opts.RecoverApprovals
	if err := c.g.replay(ctx, c.conn, rt, recoverHeld, asked); err != nil {
		return err
	}
	return c.reply(ctx, map[string]any{"type": resp, "runtime": rt, "success": true})
}

// replay sends a runtime's state to one connection (and the account's stream connections): the
// loop status, held approvals, and the output of its latest turn. asked says the connection
// subscribed asking for that output (SubscribeForReplay): the turn is then replayed from its
// stream log, by the worker running it when one does (between two events, so live frames follow
// without a gap or a repeat), else here, when the turn is paused or waits for outside work, or
// ended without any subscriber of the runtime getting its end.
func (g *Gateway) replay(ctx context.Context, conn connections.Connection, rt runtimeScope, recoverApprovals, asked bool) (err error) {
	h := g.h
	if asked {
		defer func() {
			if err != nil { // the connection must not stay without live output
				_, _ = h.opts.Connections.ClaimReplay(context.WithoutCancel(ctx), conn.AccountID, rt.ConversationID, conn.ID)
			}
		}()
	}
	st, err := g.state(ctx, conn.AccountID, rt)
	if err != nil {
		return err
	}
	out := h.newOut(conn.AccountID, rt, st.run.EventID)
	out.only = conn.ID
	processing := st.hasRun && st.run.Status == store.EventProcessing
	if asked {
		mine, whole := true, false
		if processing && st.ours {
			if st.leased(h.opts.Now()) {
				out.loopStatus(ctx, "PROCESSING_API_RESPONSE", []string{st.run.EventID}, nil)
			}
			if mine, st, err = g.awaitWorker(ctx, conn, rt); err != nil {
				return err
			}
			if !mine {
				out.queue(ctx)
				return nil
			}
			// The turn stopped running while the connection waited for it: it missed the end.
			processing, whole = st.hasRun && st.run.Status == store.EventProcessing, true
		} else if mine, err = h.opts.Connections.ClaimReplay(ctx, conn.AccountID, rt.ConversationID, conn.ID); err != nil {
			return err
		}
		// A turn that runs now started after the subscription and sends it everything live.
		if mine && st.ours && !st.leased(h.opts.Now()) && (whole || st.paused() || st.run.Unseen) {
			ended, err := out.fromLog(ctx, -1)
			if err != nil {
				return err
			}
			if ended != nil && !st.paused() {
				out.end(ctx, *ended, false)
				out.queue(ctx)
				return h.opts.Connections.Seen(ctx, conn.AccountID, rt.ConversationID, st.run.EventID)
			}
		}
	}
	switch {
	case processing && !asked:
		out.loopStatus(ctx, "PROCESSING_API_RESPONSE", []string{st.run.EventID}, nil)
		msgs, err := h.opts.Store.Messages(ctx, conn.AccountID, rt.ConversationID, st.run.FromSeq, math.MaxInt64)
		if err != nil {
			return err
		}
		out.replay(ctx, msgs)
	case processing && st.leased(h.opts.Now()):
		out.loopStatus(ctx, "PROCESSING_API_RESPONSE", []string{st.run.EventID}, nil)
	case len(st.head.PendingApprovals) > 0:
		if recoverApprovals {
			rows, err := h.opts.Store.Approvals(ctx, conn.AccountID, st.head.PendingApprovals)
			if err != nil {
				return err
			}
			var asks []approvalAsk
			for _, id := range st.head.PendingApprovals {
				if a, ok := rows[id]; ok && a.Status == store.ApprovalPending && !a.Expired(h.opts.Now()) {
					asks = append(asks, approvalAsk{approvalID: a.ID, call: toolCallView{Name: a.ToolName, Arguments: string(a.Input), ID: a.ToolCallID}})
				}
			}
			out.approvals(ctx, asks)
		}
		out.loopStatus(ctx, "WAITING_ON_APPROVAL", []string{st.run.EventID}, nil)
	case st.head.AsyncGroup != "":
		var executing []string
		if gs, err := h.opts.Async.Load(ctx, st.head.AsyncGroup); err == nil {
			for _, id := range gs.Pending() {
				if r, ok := gs.Row(id); ok {
					executing = append(executing, r.ToolCallID)
				}
			}
		}
		out.loopStatus(ctx, "EXECUTING_CLIENT_SIDE_TOOL", []string{st.run.EventID}, executing)
	default:
		out.loopStatus(ctx, "WAITING_ON_INPUT", nil, nil)
	}
	out.queue(ctx)
	return nil
}

// runtimeState is what replay reads of a runtime: its latest run and its conversation's head.
type runtimeState struct {
	run    connections.Run
	hasRun bool
	head   store.Head
	// ours: the conversation's latest turn is the runtime's run (and not, say, an SSE turn).
	ours bool
}

func (st runtimeState) leased(now time.Time) bool { return st.head.LeaseUntil.After(now) }

// paused: the conversation's turn waits for approval or for outside work.
func (st runtimeState) paused() bool {
	return len(st.head.PendingApprovals) > 0 || st.head.AsyncGroup != ""
}

func (g *Gateway) state(ctx context.Context, accountID string, rt runtimeScope) (runtimeState, error) {
	var st runtimeState
	var err error
	st.run, st.hasRun, err = g.h.opts.Connections.Run(ctx, accountID, rt.ConversationID)
	if err != nil {
		return st, err
	}
	st.head, err = g.h.opts.Store.ConversationHead(ctx, accountID, rt.ConversationID)
	if errors.Is(err, store.ErrNotFound) {
		err = nil
	}
	st.ours = st.hasRun && st.head.Stream == turn.StreamOf(accountID, rt.ConversationID, st.run.EventID)
	return st, err
}

// replayPoll is how often a sync looks whether the worker running the turn took up its replay.
const replayPoll = 100 * time.Millisecond

// awaitWorker waits for the worker running the runtime's turn to take up conn's replay, which it
// does between two events, within its stop poll (turn.Options.StopPoll) at the latest, and before it says
// how its part of the turn ended. mine is true when the turn stopped running without taking it
// up (it waits, or its worker is gone) and the replay fell to the caller, with the runtime's
// state as it found it then; also when no worker answers within replayWait.
func (g *Gateway) awaitWorker(ctx context.Context, conn connections.Connection, rt runtimeScope) (mine bool, st runtimeState, err error) {
	reg := g.h.opts.Connections
	deadline := time.Now().Add(replayWait)
	for {
		waiting, err := reg.AwaitsReplay(ctx, conn.AccountID, rt.ConversationID, conn.ID)
		if err != nil || !waiting {
			return false, st, err
		}
		if st, err = g.state(ctx, conn.AccountID, rt); err != nil {
			return false, st, err
		}
		// A worker records how its part ended only after serving the replays it knows of.
		stopped := !st.leased(g.h.opts.Now()) && (st.run.Status != store.EventProcessing || st.paused())
		if stopped || time.Now().After(deadline) {
			if !stopped {
				g.h.opts.Logger.WarnContext(ctx, "the turn's worker did not take up a replay in time; the connection gets the turn from its log", "connectionId", conn.ID)
			}
			mine, err := reg.ClaimReplay(ctx, conn.AccountID, rt.ConversationID, conn.ID)
			return mine, st, err
		}
		select {
		case <-ctx.Done():
			return false, st, ctx.Err()
		case <-time.After(replayPoll):
		}
	}
}

// toolResponse settles an external tool call with the controller's answer, exactly as the
// completion route does: a result, a result with is_error (a failure the model sees), or a
// protocol error. The last result of a sealed group re-drives the turn.
func (c *call) toolResponse(ctx context.Context) error {
	const resp = "error"
	var cmd struct {
		Result *struct {
			Content []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				Data     string `json:"data"`
				MimeType string `json:"mimeType"`
			} `json:"content"`
			IsError bool `json:"is_error"`
		} `json:"result"`
		Error *string `json:"error"`
	}
	if err := c.decode(&cmd); err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	if c.cmd.RequestID == "" {
		return c.fail(ctx, resp, "external_tool_call_response needs the request_id of the external_tool_call_request")
	}
	var outcome asynctools.Outcome
	switch {
	case (cmd.Result == nil) == (cmd.Error == nil):
		return c.fail(ctx, resp, "external_tool_call_response needs exactly one of result and error")
	case cmd.Error != nil:
		msg := strings.TrimSpace(*cmd.Error)
		if msg == "" {
			msg = "no reason given"
		}
		outcome = asynctools.Outcome{Status: asynctools.Failed, Error: "the controller could not run the tool: " + msg}
	default:
		var texts []string
		allText := true
		for _, p := range cmd.Result.Content {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			} else {
				allText = false
			}
		}
		text := strings.Join(texts, "\n")
		switch {
		case cmd.Result.IsError:
			if text == "" {
				text = "the tool reported an error"
			}
			outcome = asynctools.Outcome{Status: asynctools.Failed, Error: text}
		case allText:
			b, _ := json.Marshal(text)
			outcome = asynctools.Outcome{Status: asynctools.Completed, Response: b}
		default:
			b, _ := json.Marshal(cmd.Result.Content)
			outcome = asynctools.Outcome{Status: asynctools.Completed, Response: b}
		}
	}
	h := c.g.h
	row, err := h.opts.Async.Result(ctx, c.cmd.RequestID)
	if err == nil && row.AccountID == c.conn.AccountID && c.conn.Token() {
		// A token answers the calls of its end user's conversations only.
		var info store.ConversationInfo
		if info, err = h.opts.Store.Conversation(ctx, row.AccountID, row.ConversationID); err == nil && !c.caller().Sees(info.EndUser) {
			err = asynctools.ErrNotFound
		} else if errors.Is(err, store.ErrNotFound) {
			err = asynctools.ErrNotFound
		}
	}
	if errors.Is(err, asynctools.ErrNotFound) || (err == nil && row.AccountID != c.conn.AccountID) {
		return c.fail(ctx, resp, "unknown request_id "+c.cmd.RequestID+": no external tool call of this account has it")
	}
	if err != nil {
		return c.fail(ctx, resp, c.refusal(ctx, err))
	}
	if _, err := asynctools.SettleExternal(ctx, h.opts.Async, h.opts.Redriver, row, outcome, h.opts.Now()); err != nil {
		return c.fail(ctx, resp, c.refusal(ctx, err))
	}
	return nil
}
