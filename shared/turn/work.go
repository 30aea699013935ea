package turn

import (
	"encoding/json"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// MaxWorkBytes keeps a queued turn inside SQS's 256 KiB message limit.
const MaxWorkBytes = 250 << 10

// Work is what async-worker takes from its queue: an /async turn to run, the
// continuation of a settled dispatch group, or the purge of a deleted account's data.
type Work struct {
	Type      workqueue.Kind `json:"type"`
	AccountID string         `json:"accountId"`

	// A turn: its event, the secret seed of its group ids, the request and what it brings.
	EventID    string         `json:"eventId,omitempty"`
	GroupSeed  string         `json:"seed,omitempty"`
	Request    *Request       `json:"request,omitempty"`
	Message    *model.Message `json:"message,omitempty"`
	Decisions  []Decision     `json:"decisions,omitempty"`
	RespondsTo string         `json:"respondsTo,omitempty"`
	// WS is set for a WebSocket turn: its output goes to the runtime's connections.
	WS json.RawMessage `json:"ws,omitempty"`
	// Channel is set for a turn that came from a chat channel: where its output goes.
	Channel json.RawMessage `json:"channel,omitempty"`
	// Tree is set for a subagent's turn: where it sits in its caller's turn tree.
	Tree *TreePosition `json:"tree,omitempty"`

	// A continuation: the group whose results it brings back.
	GroupID string `json:"groupId,omitempty"`
}
