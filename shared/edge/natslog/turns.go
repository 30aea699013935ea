package natslog

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/agentharness/harness/shared/edge/aisdk"
	"github.com/agentharness/harness/shared/state/streamlog"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/natsturns"
)

// Attach makes the engine's turn streams go to NATS as well when c has a URL; without one, or
// without a stream log, it changes nothing. The three functions that run turns call it, so a
// continuation on async-worker publishes to the subject its turn began on.
func Attach(opts *turn.Options, c Config, secret func(ctx context.Context, id string) (string, error), logger *slog.Logger) error {
	if opts.Streams == nil {
		return nil
	}
	mirror, err := FromConfig(context.Background(), c, secret, opts.Streams.Retention(), func(stream string) string {
		return natsturns.Subject(turn.StreamParts(stream))
	}, Encode, logger)
	if err != nil || mirror == nil {
		return err
	}
	opts.Streams, opts.Subject = opts.Streams.WithMirror(mirror), natsturns.Subject
	return nil
}

// Message is what a turn's entry is on NATS: its place in the turn's stream, the UI message
// stream chunks of the AI SDK it stands for (those an SSE client gets), and, on the entry that
// ends a part of the turn, how that part ended.
type Message struct {
	Seq     int64    `json:"seq"`
	Chunks  []any    `json:"chunks"`
	Outcome *Outcome `json:"outcome,omitempty"`
}

// Outcome is how a part of a turn ended. Final is false when the turn goes on later on the same
// subject (it waits for approval or for async calls): a reader following the turn reads on
// until an outcome is final.
type Outcome struct {
	Status string `json:"status"`
	Final  bool   `json:"final"`
	Error  string `json:"error,omitempty"`
}

// Encode is an entry of a turn's stream log as a Message.
func Encode(streamKey string, e streamlog.Entry) ([]byte, error) {
	logged, err := turn.DecodeLogged(e.Seq, e.Payload)
	if err != nil {
		return nil, err
	}
	m := Message{Seq: e.Seq, Chunks: []any{}}
	switch {
	case logged.Event != nil:
		m.Chunks = append(m.Chunks, aisdk.EventChunks(*logged.Event)...)
	case logged.Outcome != nil:
		o := *logged.Outcome
		_, conversationID, _ := turn.StreamParts(streamKey)
		if finish := aisdk.TurnFinish(conversationID, o); finish != nil {
			m.Chunks = append(m.Chunks, finish)
		}
		m.Outcome = &Outcome{Status: string(o.Status), Final: !o.Continues(), Error: o.Error}
	}
	return json.Marshal(m)
}
