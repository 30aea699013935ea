package provider

import (
	"context"
	"encoding/json"
	"errors"
	"iter"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
)

// fallback is a model block with fallbacks: a step goes to its first model and, when that one
// is overloaded (Overloaded) before its answer's first event, after the adapter's own retries,
// to the next. A step that has begun to stream stays with its model, failing as it fails, since
// its client has seen part of the answer. A step a fallback answered begins with an
// EventModel naming it.
type fallback struct {
	models []agent.Model
	names  []string
}

func (f *fallback) Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		for i, m := range f.models {
			started := false
			for ev, err := range m.Stream(ctx, req) {
				if err != nil && !started && i < len(f.models)-1 && Overloaded(err) && ctx.Err() == nil {
					break // to the next model
				}
				if err != nil {
					yield(model.Event{}, err)
					return
				}
				if !started && i > 0 && !yield(model.Event{Type: model.EventModel, Text: f.names[i]}, nil) {
					return
				}
				started = true
				if !yield(ev, nil) {
					return
				}
			}
			if started {
				return
			}
		}
	}
}

// Overloaded reports whether a model call failed because its provider is overloaded, rate
// limited or failing (429, 5xx, Anthropic's 529), as opposed to refusing the request or the
// credentials: a fallback is tried for the first, never for the second.
func Overloaded(err error) bool {
	var pe *model.ProviderError
	return errors.As(err, &pe) && (pe.Status == 429 || pe.Status >= 500)
}

// nameOf is "provider/model" of a block, how a stream says which model answered.
func nameOf(block json.RawMessage) string {
	var b struct {
		Provider string `json:"provider"`
		Model    string `json:"model"`
	}
	_ = json.Unmarshal(block, &b) // a block New built from decodes
	if b.Model == "" {
		return b.Provider
	}
	return b.Provider + "/" + b.Model
}
