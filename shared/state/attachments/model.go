package attachments

import (
	"context"
	"errors"
	"iter"
	"slices"
	"sync"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
)

// Turn is what Model needs of the turn a request runs in (the engine's, tool.TurnFrom): the
// thread whose files the request's file parts name.
type Turn interface {
	Thread() (accountID, threadID string)
}

// Model gives m the bytes of the files its requests carry: each file part refers to a file of
// the thread of the turn the request runs in, read from s when a request first needs it and
// kept. A file whose bytes are gone stays a note the model is given instead. Outside a turn a
// request goes as it is.
func (s *Store) Model(m agent.Model) agent.Model {
	return &filesModel{Model: m, store: s, bytes: map[[3]string][]byte{}}
}

type filesModel struct {
	agent.Model
	store *Store

	mu sync.Mutex
	// bytes are the files read, by account, thread and id.
	bytes map[[3]string][]byte
}

func (m *filesModel) Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
	t, ok := tool.TurnFrom(ctx).(Turn)
	if !ok {
		return m.Model.Stream(ctx, req)
	}
	accountID, threadID := t.Thread()
	msgs, err := m.load(ctx, accountID, threadID, req.Messages)
	if err != nil {
		return func(yield func(model.Event, error) bool) { yield(model.Event{}, err) }
	}
	r := *req
	r.Messages = msgs
	return m.Model.Stream(ctx, &r)
}

// load returns msgs with the bytes of their file parts, copying only the messages it changes.
func (m *filesModel) load(ctx context.Context, accountID, threadID string, msgs []model.Message) ([]model.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []model.Message
	for i, msg := range msgs {
		if !slices.ContainsFunc(msg.Parts, func(p model.Part) bool { return p.Type == model.PartFile && p.Data == nil }) {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		parts := slices.Clone(msg.Parts)
		for j, p := range parts {
			if p.Type != model.PartFile || p.Data != nil {
				continue
			}
			k := [3]string{accountID, threadID, p.Attachment}
			data, ok := m.bytes[k]
			if !ok {
				var err error
				data, err = m.store.Get(ctx, accountID, threadID, p.Attachment)
				if err != nil && !errors.Is(err, ErrNotFound) {
					return nil, err
				}
				m.bytes[k] = data
			}
			parts[j].Data = data
		}
		out[i].Parts = parts
	}
	if out == nil {
		return msgs, nil
	}
	return out, nil
}
