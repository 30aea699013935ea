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
	// Edge names the transport that runs the turn's output on async-worker (worker.Edge), and
	// Route is that edge's state of the turn, opaque here: where its output goes. Both are
	// empty for an /async turn, which shows no output.
	Edge  string          `json:"edge,omitempty"`
	Route json.RawMessage `json:"route,omitempty"`
	// Tree is set for a subagent's turn: where it sits in its caller's turn tree.
	Tree *TreePosition `json:"tree,omitempty"`

	// A continuation: the group whose results it brings back.
	GroupID string `json:"groupId,omitempty"`
}

// UnmarshalJSON reads the work as queued now and as queued by the release before, whose
// WebSocket and channel turns carried their route in a field named after the edge ("ws",
// "channel", the names those edges register under still); read for one release, while such
// messages may be in flight.
func (w *Work) UnmarshalJSON(b []byte) error {
	type plain Work
	var v struct {
		plain
		WS      json.RawMessage `json:"ws"`
		Channel json.RawMessage `json:"channel"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*w = Work(v.plain)
	switch {
	case w.Edge != "":
	case v.WS != nil:
		w.Edge, w.Route = "ws", v.WS
	case v.Channel != nil:
		w.Edge, w.Route = "channel", v.Channel
	}
	return nil
}
