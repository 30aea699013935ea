// Package channelturn runs agent turns that arrive from chat channels (Slack, Telegram): the
// webhook a binding's platform posts to (Hook), which checks each request, and queues a turn for
// async-worker, and the worker's part of those turns (Turns), which posts their output to the
// chat as it grows and asks for approvals with buttons whose presses come back to the webhook.
package channelturn

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentharness/harness/shared/wire/ids"
)

// Route is where a channel turn came from and where its output goes: a binding's chat and
// thread. It travels with the turn's work message and its async calls' delivery.
type Route struct {
	Binding string `json:"binding"`
	Type    string `json:"type"`
	// Chat is the Slack channel id or the Telegram chat id.
	Chat string `json:"chat"`
	// Thread is the Slack thread's ts or the Telegram forum topic's id; empty for a DM, a
	// Telegram chat without topics, or a Slack message that starts a thread (Reply then).
	Thread string `json:"thread,omitempty"`
	// User is who sent the message, shown nowhere; kept for the logs.
	User string `json:"user,omitempty"`
}

// ConversationID is the harness conversation of a chat and thread under a binding's agent: one
// per thread (or DM, or Telegram chat or topic), a new one when the binding's agent changes.
func ConversationID(bindingID, agentID, chat, thread string) string {
	return ids.Derived("conv_ch_", bindingID, agentID, chat, thread)
}

func (r Route) encode() json.RawMessage {
	b, _ := json.Marshal(r)
	return b
}

func decodeRoute(raw json.RawMessage) (Route, error) {
	var r Route
	if err := json.Unmarshal(raw, &r); err != nil || r.Binding == "" || r.Chat == "" {
		return r, fmt.Errorf("a channel turn without its route (%s)", raw)
	}
	return r, nil
}

// Decision buttons carry the answer, the approval's id and the start of its arguments' hash,
// so a press decides exactly the call it was shown (Telegram's callback data holds 64 bytes).
const hashPrefix = 12

// press is what a decision button carries.
type press struct {
	Approved   bool
	ApprovalID string
	Hash       string
}

func (p press) data() string {
	answer := "n"
	if p.Approved {
		answer = "y"
	}
	return answer + "|" + p.ApprovalID + "|" + p.Hash[:min(hashPrefix, len(p.Hash))]
}

func parsePress(data string) (press, bool) {
	parts := strings.Split(data, "|")
	if len(parts) != 3 || (parts[0] != "y" && parts[0] != "n") || parts[1] == "" || len(parts[2]) != hashPrefix {
		return press{}, false
	}
	return press{Approved: parts[0] == "y", ApprovalID: parts[1], Hash: parts[2]}, true
}
