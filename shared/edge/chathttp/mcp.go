package chathttp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/callers"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpToolPrefix starts the MCP name of every agent's tool.
const mcpToolPrefix = "run_agent_"

// mcpMaxToolName is the longest tool name MCP allows.
const mcpMaxToolName = 128

// mcpMaxSummary bounds the first line of a system prompt that a tool's description quotes.
const mcpMaxSummary = 200

// mcpInputSchema is every agent tool's input: one message, in a conversation or a new one.
var mcpInputSchema = json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"},"conversationId":{"type":"string"}},"required":["message"],"additionalProperties":false}`)

// mcpArgs are an agent tool's arguments.
type mcpArgs struct {
	Message        *string `json:"message"`
	ConversationID string  `json:"conversationId"`
}

// serveMCP runs /mcp: the account's agents as MCP tools, over the Streamable HTTP transport.
// Lambda keeps nothing between requests, so each request gets a stateless server of its own,
// built for the account its bearer secret opens, that answers in plain JSON (a buffered API
// Gateway passes it as is). The secret is checked first, whatever the method: a request
// without one is 401 as POST is.
func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request) {
	secret, err := httpjson.Secret(r)
	if err == nil {
		err = callers.SecretOnly(r)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	acc, err := h.opts.Store.AccountBySecret(r.Context(), secret)
	if err != nil {
		h.fail(w, r, httpjson.SecretRefused(err))
		return
	}
	if r.Method != http.MethodPost {
		// A stateless server has no stream to open with GET and no session to end with DELETE:
		// the transport's answer is 405, after which hosts go on over POST alone.
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, r, &httpjson.Error{Status: http.StatusMethodNotAllowed, Message: "method " + r.Method + " is not allowed on /mcp: this server offers no stream and keeps no session, so send every message with POST"})
		return
	}
	if mcpBatch(w, r, h.opts.MaxBodyBytes) {
		// The current MCP revision removed JSON-RPC batching; refusing it whole also keeps one
		// request to one turn.
		httpjson.WriteJSON(w, http.StatusBadRequest, map[string]any{"jsonrpc": "2.0", "id": nil,
			"error": &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "JSON-RPC batches are not supported: send one message per request"}})
		return
	}
	// A call from one of the harness's own turns carries its turn tree: the turn it starts is
	// counted there, one level below its caller.
	var caller *turn.TreePosition
	if header := r.Header.Get(turn.TreeHeader); header != "" {
		p, err := h.eng.OpenTree(r.Context(), header)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		caller = &p
	}
	server, err := h.mcpServer(r, acc.ID, secret, caller)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: h.sdkLogger(), MaxRequestBodyBytes: h.opts.MaxBodyBytes,
	}).ServeHTTP(w, r)
}

// mcpBatch reports whether r's body is a JSON array, a JSON-RPC batch. It reads past the
// leading JSON whitespace only, so r.Body still reads the same JSON value after it, bounded by
// limit (whitespace included).
func mcpBatch(w http.ResponseWriter, r *http.Request, limit int64) bool {
	br := bufio.NewReader(http.MaxBytesReader(w, r.Body, limit))
	r.Body = struct {
		io.Reader
		io.Closer
	}{br, r.Body}
	for {
		c, err := br.ReadByte()
		if err != nil {
			// Empty, too large or unreadable: the SDK reads the same error and answers it.
			return false
		}
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			_ = br.UnreadByte()
			return c == '['
		}
	}
}

// sdkLogger is the harness's logger for the MCP SDK, warnings and errors only: the SDK logs the
// connect and disconnect of every stateless request at INFO.
func (h *Handler) sdkLogger() *slog.Logger {
	return slog.New(minLevel{Handler: h.opts.Logger.Handler(), min: slog.LevelWarn})
}

// minLevel is a slog.Handler that drops the records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: m.Handler.WithAttrs(attrs), min: m.min}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: m.Handler.WithGroup(name), min: m.min}
}

// mcpServer returns an MCP server whose tools are the account's agents, one run_agent_<id>
// each; agents whose ids give the same tool name after the name's characters are replaced are
// served by the first by id only.
func (h *Handler) mcpServer(r *http.Request, accountID, secret string, caller *turn.TreePosition) (*mcp.Server, error) {
	agents, err := h.opts.Store.ListAgents(r.Context(), accountID)
	if err != nil {
		return nil, err
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "agent-harness", Title: "Agent harness", Version: "1"}, &mcp.ServerOptions{
		Logger: h.sdkLogger(),
		// The server is the account's, so is each list it answers: only the host that asked
		// may cache it, never an intermediary for another account (the SDK's default is public).
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" },
	})
	taken := map[string]bool{}
	for _, a := range agents {
		name := mcpToolName(a.ID)
		if taken[name] {
			h.opts.Logger.WarnContext(r.Context(), "agent not served over MCP: its tool name is taken", "accountId", accountID, "agentId", a.ID, "tool", name)
			continue
		}
		taken[name] = true
		server.AddTool(&mcp.Tool{Name: name, Description: mcpDescription(a), InputSchema: mcpInputSchema},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return h.mcpCall(r, accountID, secret, a.ID, req.Params.Arguments, caller)
			})
	}
	return server, nil
}

// mcpToolName is the MCP tool name of an agent: run_agent_<id> with every character outside
// [A-Za-z0-9_-] replaced by '_' (hosts differ on the rest), cut to the length MCP allows.
func mcpToolName(agentID string) string {
	name := []byte(mcpToolPrefix + agentID)
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			name[i] = '_'
		}
	}
	return string(name[:min(len(name), mcpMaxToolName)])
}

// mcpDescription tells a host's model what an agent tool is: the agent's name, and the first
// line of its system prompt when that is short. It reads the stored config, whose secrets are
// redacted: listing tools opens no secret.
func mcpDescription(a store.Agent) string {
	var c struct {
		Name   string `json:"name"`
		System string `json:"system"`
	}
	_ = json.Unmarshal(a.Config, &c)
	name := strings.TrimSpace(c.Name)
	if name == "" {
		name = a.ID
	}
	desc := fmt.Sprintf("Send a message to the agent %q (id %s) and get its answer. Pass conversationId to continue a conversation; without it a new one starts.", name, a.ID)
	line, _, _ := strings.Cut(strings.TrimSpace(c.System), "\n")
	if line = strings.TrimSpace(line); line != "" && len(line) <= mcpMaxSummary {
		desc += " The agent's instructions begin: " + line
	}
	return desc
}

// mcpCall runs one turn of the agent with the call's message, in this invocation as POST / runs
// it, under an event of its own so that GET /status and POST /async (approvals) reach the turn
// once the call has answered. r is the HTTP request the call came in: the turn keeps its
// deadline (the invocation's) but not its cancellation, as POST / does. The engine's refusals
// and failed turns are tool errors; only infrastructure failures are MCP errors. caller, when
// set, is the turn tree of the harness's turn that made the call.
func (h *Handler) mcpCall(r *http.Request, accountID, secret, agentID string, raw json.RawMessage, caller *turn.TreePosition) (*mcp.CallToolResult, error) {
	ctx := r.Context()
	req, in, err := mcpTurn(agentID, raw)
	if err != nil {
		return h.mcpRefused(ctx, err)
	}
	opening, err := h.opts.Store.OpenTurn(ctx, secret, req.AgentID, req.ConversationID, req.madeID)
	if err != nil {
		return h.mcpRefused(ctx, httpjson.SecretRefused(err))
	}
	cfg, err := h.eng.OpenedAgent(ctx, opening, req.Request, false)
	if err != nil {
		return h.mcpRefused(ctx, err)
	}
	if err := h.eng.ClaimEvent(ctx, accountID, req.Request); err != nil {
		return h.mcpRefused(ctx, err)
	}
	var tree turn.TreePosition
	if caller != nil {
		tree = caller.Below()
		err = h.eng.JoinTree(ctx, tree, accountID, req.ConversationID, req.EventID)
	}
	seed := store.NewID("")
	var run *turn.Run
	if err == nil {
		run, err = h.eng.Begin(ctx, turn.Start{
			AccountID: accountID, Request: req.Request, Input: in, Config: cfg, Opening: opening, GroupSeed: seed, Tree: tree,
			// Its continuations (after async tools) settle its event, as an /async turn's do.
			Delivery: asynctools.Delivery{EventID: req.EventID, GroupSeed: seed},
		})
	}
	if err != nil {
		if rerr := h.opts.Store.ReleaseEvent(context.WithoutCancel(ctx), accountID, req.EventID); rerr != nil {
			h.opts.Logger.ErrorContext(ctx, "releasing event", "eventId", req.EventID, "err", rerr)
		}
		return h.mcpRefused(ctx, err)
	}
	runCtx, stop := detached(ctx)
	defer stop()
	res := run.Execute(runCtx)
	if err := run.Finish(ctx, res, nil); err != nil {
		h.opts.Logger.ErrorContext(ctx, "reporting the event", "eventId", req.EventID, "err", err)
	}
	// The answer is read whether or not the host is still there: the turn has run.
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), turn.FinishTimeout)
	defer cancel()
	return h.mcpOutcome(done, accountID, req, res)
}

// mcpTurn reads an agent tool's arguments as the turn request POST / would get for them, with
// the same checks, a new conversation when none is named, and an event id of its own.
func mcpTurn(agentID string, raw json.RawMessage) (*turnRequest, turn.Input, error) {
	var args mcpArgs
	if len(raw) > 0 {
		if err := httpjson.CheckKeys(raw); err != nil {
			return nil, turn.Input{}, err
		}
		if err := httpjson.DecodeStrict(raw, &args); err != nil {
			return nil, turn.Input{}, httpjson.BodyError(err)
		}
	}
	if args.Message == nil {
		return nil, turn.Input{}, httpjson.FieldError("message", "is required")
	}
	if err := httpjson.CheckOptionalID("conversationId", args.ConversationID); err != nil {
		return nil, turn.Input{}, err
	}
	req := &turnRequest{Request: turn.Request{AgentID: agentID, ConversationID: args.ConversationID}, Message: args.Message}
	if err := req.validate(); err != nil {
		return nil, turn.Input{}, err
	}
	in, err := req.input(turn.NewMessageID)
	if err == nil {
		err = httpError(turn.CheckMessageSize("message", in.Message))
	}
	if err != nil {
		return nil, turn.Input{}, err
	}
	if req.ConversationID == "" {
		req.ConversationID, req.madeID = store.NewID("conv_"), true
	}
	req.EventID = store.NewID("evt_")
	return req, in, nil
}

// mcpOutcome is the tool result of a turn that ran: its answer, or what it waits for and how it
// goes on, or its failure as a tool error.
func (h *Handler) mcpOutcome(ctx context.Context, accountID string, req *turnRequest, res turn.Outcome) (*mcp.CallToolResult, error) {
	out := map[string]any{"conversationId": req.ConversationID, "eventId": req.EventID, "status": res.Status}
	statusURL := "/status/" + req.EventID
	var text string
	switch res.Status {
	case turn.StatusCompleted:
		ev, err := h.opts.Store.Event(ctx, accountID, req.EventID)
		if err != nil {
			return h.mcpInternal(ctx, fmt.Errorf("reading the answer of event %s: %w", req.EventID, err))
		}
		msgs, err := h.opts.Store.Messages(ctx, accountID, req.ConversationID, ev.FromSeq, ev.ToSeq)
		if err != nil {
			return h.mcpInternal(ctx, fmt.Errorf("reading the answer of event %s: %w", req.EventID, err))
		}
		text = model.FinalText(msgs)
		out["text"] = text
	case turn.StatusWaiting:
		pending := make([]map[string]string, 0, len(res.PendingApprovals))
		var b strings.Builder
		b.WriteString("The turn waits for approval before it can go on:\n")
		for _, p := range res.PendingApprovals {
			pending = append(pending, map[string]string{"approvalId": p.ApprovalID, "toolCallId": p.ToolCallID, "toolName": p.ToolName})
			fmt.Fprintf(&b, "- tool %s, call %s: approval %s\n", p.ToolName, p.ToolCallID, p.ApprovalID)
		}
		decide, _ := json.Marshal(map[string]any{"agentId": req.AgentID, "id": req.ConversationID, "eventId": req.EventID,
			"approvals": []map[string]any{{"approvalId": "<approvalId>", "approved": true}}})
		fmt.Fprintf(&b, "Decide each with POST /async %s (\"approved\": false denies it, with an optional \"reason\"); GET %s then says how the turn ends.", decide, statusURL)
		text = b.String()
		out["pendingApprovals"], out["statusUrl"] = pending, statusURL
	case turn.StatusWaitingAsync:
		text = fmt.Sprintf("The turn waits for %d async tool call(s) and goes on by itself when they complete; GET %s says where it is and, once it has ended, its answer.", len(res.PendingAsync), statusURL)
		out["pendingAsyncTools"], out["statusUrl"] = res.PendingAsync, statusURL
	default:
		reason := res.Error
		if reason == "" {
			reason = "the turn ended " + string(res.Status)
		}
		out["error"] = reason
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: reason}}, StructuredContent: out}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: out}, nil
}

// mcpRefused answers a call the harness refused before its turn ran: a tool error with the
// refusal's message and details, as the HTTP routes answer it (httpError); anything else is an
// infrastructure failure.
func (h *Handler) mcpRefused(ctx context.Context, err error) (*mcp.CallToolResult, error) {
	var e *httpjson.Error
	if !errors.As(httpError(err), &e) {
		return h.mcpInternal(ctx, err)
	}
	out := map[string]any{"error": e.Message}
	for k, v := range e.Extra {
		out[k] = v
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: e.Message}}, StructuredContent: out}, nil
}

// mcpInternal logs an infrastructure failure and answers it as a bare MCP internal error.
func (h *Handler) mcpInternal(ctx context.Context, err error) (*mcp.CallToolResult, error) {
	h.opts.Logger.ErrorContext(ctx, "MCP tool call failed", "err", err)
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
}
