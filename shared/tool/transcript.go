package tool

import (
	"context"
	"sync"

	"github.com/agentharness/harness/shared/model"
)

// Transcript collects what a tool's own model loop (a prompt tool's) produced while one call
// ran: its messages, kept with the call's step in the conversation's record but never shown to
// the calling model, and the tokens it used, which count toward the calling turn's usage.
type Transcript struct {
	mu    sync.Mutex
	msgs  []model.Message
	usage model.Usage
}

// Add records messages of the nested loop and the tokens it used.
func (t *Transcript) Add(usage model.Usage, msgs ...model.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.msgs = append(t.msgs, msgs...)
	t.usage = t.usage.Add(usage)
}

// Messages and Usage are what was recorded.
func (t *Transcript) Messages() []model.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.msgs
}

func (t *Transcript) Usage() model.Usage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.usage
}

type transcriptKey struct{}

// WithTranscript returns ctx whose call records its nested loop in t.
func WithTranscript(ctx context.Context, t *Transcript) context.Context {
	return context.WithValue(ctx, transcriptKey{}, t)
}

// TranscriptFrom is the transcript of the call ctx runs; nil outside one.
func TranscriptFrom(ctx context.Context) *Transcript {
	t, _ := ctx.Value(transcriptKey{}).(*Transcript)
	return t
}
