package turn

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentharness/harness/shared/state/streamlog"
)

// Every turn's output also goes to a durable log (Options.Streams), written here where the
// events are produced, once for every transport: a client that reconnects reads what it missed
// from it (follow.Turn). An invocation's part of a turn ends its log entries with its Outcome,
// flushed before the lease is given back, so a reader never waits on a turn that is over.

// logEntry is one entry of a turn's stream log: an event, or how an invocation's part ended.
type logEntry struct {
	Event   *Event   `json:"event,omitempty"`
	Outcome *Outcome `json:"outcome,omitempty"`
}

// DecodeLogged decodes one entry of a turn's stream log, as stored.
func DecodeLogged(seq int64, payload []byte) (Logged, error) {
	var le logEntry
	if err := json.Unmarshal(payload, &le); err != nil {
		return Logged{}, fmt.Errorf("stream log entry %d: %w", seq, err)
	}
	return Logged{Seq: seq, Event: le.Event, Outcome: le.Outcome}, nil
}

// Logged is one entry of a turn's stream log, as follow.Turn reads it: an event the turn said, or
// how one invocation's part of it ended (the last entry before a wait, and the turn's end).
type Logged struct {
	Seq     int64
	Event   *Event
	Outcome *Outcome
}

// StreamOf names the stream log of a conversation's turn, by the key its deliveries carry
// (asynctools.Delivery.TurnKey: the turn's event id where it has one); store.Head.Stream holds
// the latest.
func StreamOf(accountID, conversationID, turnKey string) string {
	return accountID + "#" + conversationID + "#" + turnKey
}

// StreamParts is the inverse of StreamOf: ids hold no '#'.
func StreamParts(stream string) (accountID, conversationID, turnKey string) {
	accountID, rest, _ := strings.Cut(stream, "#")
	conversationID, turnKey, _ = strings.Cut(rest, "#")
	return accountID, conversationID, turnKey
}

// Subject is the NATS subject the turn's stream is copied to, "" where streams are not.
func (e *Engine) Subject(accountID, conversationID, turnKey string) string {
	if e.opts.Subject == nil || e.opts.Streams == nil {
		return ""
	}
	return e.opts.Subject(accountID, conversationID, turnKey)
}

// streamLog is an invocation's writer of its turn's log; nil where no log is configured.
type streamLog struct {
	w      *streamlog.Writer
	failed bool
}

// openLog opens the turn's log for this invocation, named by its delivery's TurnKey. Failing to
// open it costs the log, never the turn.
func (d *invocation) openLog(ctx context.Context) {
	if d.e.opts.Streams == nil || d.output != nil {
		return
	}
	stream := StreamOf(d.accountID, d.conversationID, d.delivery.TurnKey)
	d.lease.RecordStream(stream)
	if d.newStream {
		d.output = &streamLog{w: d.e.opts.Streams.Start(stream)}
		return
	}
	w, err := d.e.opts.Streams.Open(ctx, stream)
	if err != nil {
		d.log.ErrorContext(ctx, "opening the turn's stream log; the turn goes on without it", "err", err)
		d.output = &streamLog{failed: true}
		return
	}
	d.output = &streamLog{w: w}
}

// record appends one entry to the turn's log and returns its sequence number; ok is false
// when the turn keeps no log (or it failed).
func (d *invocation) record(ctx context.Context, e logEntry) (seq int64, ok bool) {
	if d.output == nil || d.output.failed {
		return 0, false
	}
	seq = d.output.w.Next()
	b, err := json.Marshal(e)
	if err == nil {
		err = d.output.w.Append(context.WithoutCancel(ctx), b)
	}
	if err != nil {
		d.log.ErrorContext(ctx, "writing the turn's stream log; it stops here", "err", err)
		d.output.failed = true
		return 0, false
	}
	return seq, true
}

// closeLog ends this invocation's part of the log with its outcome (waiting, when the turn
// goes on later, else its final status) and returns the write of what is left, for end to
// send beside the lease's; nil when there is no log.
func (d *invocation) closeLog(ctx context.Context, o Outcome) (flush func()) {
	d.openLog(ctx) // a part that ended before it ran (an abort found first) still says how
	if d.output == nil || d.output.failed {
		return nil
	}
	d.record(ctx, logEntry{Outcome: &o})
	state := string(o.Status)
	if o.Continues() {
		state = streamlog.Waiting
	}
	// Encoded now, so the send goes out with the lease's end, not after the encoding.
	send := d.output.w.Last(state)
	return func() {
		if err := send(ctx); err != nil {
			d.log.ErrorContext(ctx, "closing the turn's stream log", "err", err)
		}
	}
}
