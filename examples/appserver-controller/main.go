// Command appserver-controller is a controller application for the harness's App Server
// protocol (Letta App Server v2 over a WebSocket). It owns a tool, lookup_ticket, that runs
// here in the controller, not in the harness: the agent calls it, the harness sends
// external_tool_call_request over the socket, and this program answers with
// external_tool_call_response.
//
// With `make dev` running, in a second shell from the repository root:
//
//	source .dev.env
//	go run ./examples/appserver-controller
//
// It connects to HARNESS_URL's /ws with the account secret, sends runtime_start with
// create_agent (a scripted agent that calls lookup_ticket, then answers with what it returned),
// create_conversation and its external tool, sends one input, answers the tool call from its
// own ticket table, prints the turn's stream deltas, and exits when the turn's stop_reason
// arrives: 0 on end_turn, non-zero on any other stop, an error or a timeout.
//
// Flags override the environment: -url (HARNESS_URL), -secret (HARNESS_SECRET), -timeout.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentharness/harness/examples/internal/harnessapi"
	"github.com/coder/websocket"
)

// agent is the scripted agent runtime_start creates.
const agent = `{
  "name": "Ticket desk (App Server example)",
  "system": "Look tickets up before you answer.",
  "model": {"provider": "scripted", "script": [
    {"text": "Looking the ticket up. ", "toolCalls": [{"name": "lookup_ticket", "input": {"id": "LET-123"}}]},
    {"text": "Here is the ticket: {{toolResults}}"}
  ]}
}`

// lookupTicket is the controller-owned tool, as runtime_start registers it.
const lookupTicket = `{
  "name": "lookup_ticket",
  "label": "Lookup ticket",
  "description": "Fetch a support ticket by ID.",
  "parameters": {"type": "object", "properties": {"id": {"type": "string", "description": "Ticket ID, for example LET-123"}}, "required": ["id"], "additionalProperties": false}
}`

// tickets is the controller's own data, which the harness never sees except through the tool.
var tickets = map[string]map[string]string{
	"LET-123": {"id": "LET-123", "title": "Customer cannot connect Slack", "status": "open", "priority": "high"},
}

func main() {
	var url, secret string
	harnessapi.Endpoint(&url, &secret)
	timeout := flag.Duration("timeout", time.Minute, "give up after this long")
	flag.Parse()
	if url == "" || secret == "" {
		fmt.Fprintln(os.Stderr, "set HARNESS_URL and HARNESS_SECRET (source .dev.env while make dev runs) or pass -url and -secret")
		os.Exit(2)
	}
	harnessapi.Main("appserver-controller", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return run(ctx, url, secret, os.Stdout)
	})
}

func run(ctx context.Context, base, secret string, out io.Writer) error {
	wsURL := "ws" + strings.TrimPrefix(strings.TrimRight(base, "/"), "http") + "/ws"
	conn, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + secret}}})
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", wsURL, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return conn.Write(ctx, websocket.MessageText, b)
	}

	if err := send(map[string]any{
		"type": "runtime_start", "request_id": "start-1",
		"create_agent":        map[string]any{"body": json.RawMessage(agent)},
		"create_conversation": map[string]any{"body": map[string]any{}},
		"external_tools":      []any{map[string]any{"tools": []json.RawMessage{json.RawMessage(lookupTicket)}}},
	}); err != nil {
		return err
	}
	var text strings.Builder
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		var f frame
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("a frame is not JSON: %s", b)
		}
		switch f.Type {
		case "runtime_start_response":
			if !f.Success {
				return fmt.Errorf("runtime_start failed: %s", f.Error)
			}
			fmt.Fprintf(out, "runtime started: agent %s, conversation %s\n", f.Runtime.AgentID, f.Runtime.ConversationID)
			if err := send(map[string]any{
				"type": "input", "request_id": "input-1", "runtime": f.Runtime,
				"payload": map[string]any{"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": "What is going on with LET-123?"}}},
			}); err != nil {
				return err
			}
		case "input_accepted":
			if !f.Accepted {
				return fmt.Errorf("the input was refused: %s", f.Error)
			}
		case "external_tool_call_request":
			fmt.Fprintf(out, "tool call %s(%s)\n", f.ToolName, f.Input)
			if err := send(answer(f)); err != nil {
				return err
			}
		case "stream_delta":
			d := f.Delta
			switch d.MessageType {
			case "assistant_message":
				text.WriteString(d.Content)
			case "tool_return_message":
				fmt.Fprintf(out, "tool returned (%s): %s\n", d.Status, d.ToolReturn)
			case "loop_error":
				return fmt.Errorf("the turn failed: %s", d.Message)
			case "stop_reason":
				fmt.Fprintf(out, "final text: %s\nstop_reason: %s\n", text.String(), d.StopReason)
				if d.StopReason != "end_turn" {
					return errors.New("the turn did not end normally")
				}
				return nil
			}
		case "error":
			return fmt.Errorf("the harness refused a command: %s", f.Error)
		}
	}
}

// answer runs lookup_ticket: a result for a known ticket, a tool-level error (is_error, which
// the model sees) for an unknown one, a protocol error for a tool this controller does not own.
func answer(f frame) map[string]any {
	resp := map[string]any{"type": "external_tool_call_response", "request_id": f.RequestID}
	if f.ToolName != "lookup_ticket" {
		resp["error"] = "unknown external tool " + f.ToolName
		return resp
	}
	var in struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(f.Input, &in)
	t, ok := tickets[in.ID]
	if !ok {
		resp["result"] = map[string]any{"is_error": true, "content": []any{map[string]string{"type": "text", "text": "ticket " + in.ID + " was not found"}}}
		return resp
	}
	b, _ := json.Marshal(t)
	resp["result"] = map[string]any{"content": []any{map[string]string{"type": "text", "text": string(b)}}}
	return resp
}

// frame holds the fields of the frames this controller reads.
type frame struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Success   bool   `json:"success"`
	Accepted  bool   `json:"accepted"`
	Error     string `json:"error"`
	Runtime   *struct {
		AgentID        string `json:"agent_id"`
		ConversationID string `json:"conversation_id"`
	} `json:"runtime"`
	ToolName string          `json:"tool_name"`
	Input    json.RawMessage `json:"input"`
	Delta    struct {
		MessageType string `json:"message_type"`
		Content     string `json:"content"`
		Status      string `json:"status"`
		ToolReturn  string `json:"tool_return"`
		Message     string `json:"message"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
}
