package turn

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"sync"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/tool/asynctools"
)

// filesModel gives a model the bytes of the files its requests carry: each file part of the
// conversation refers to an attachment of the conversation's thread (shared/state/attachments), read
// when a request first needs it and kept for the invocation. A file whose bytes are gone stays
// a note the model is given instead.
type filesModel struct {
	agent.Model
	store                     *attachments.Store
	accountID, conversationID string

	mu    sync.Mutex
	bytes map[string][]byte
}

// WithFiles wraps m for the invocation's thread; m itself where no attachments are kept.
func (d *invocation) WithFiles(m agent.Model) agent.Model {
	if d.e.opts.Attachments == nil || m == nil {
		return m
	}
	if _, ok := m.(*filesModel); ok {
		return m
	}
	return &filesModel{Model: m, store: d.e.opts.Attachments, accountID: d.accountID, conversationID: d.conversationID, bytes: map[string][]byte{}}
}

func (m *filesModel) Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
	msgs, err := m.load(ctx, req.Messages)
	if err != nil {
		return func(yield func(model.Event, error) bool) { yield(model.Event{}, err) }
	}
	r := *req
	r.Messages = msgs
	return m.Model.Stream(ctx, &r)
}

// load returns msgs with the bytes of their file parts, copying only the messages it changes.
func (m *filesModel) load(ctx context.Context, msgs []model.Message) ([]model.Message, error) {
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
			data, ok := m.bytes[p.Attachment]
			if !ok {
				var err error
				data, err = m.store.Get(ctx, m.accountID, m.conversationID, p.Attachment)
				if err != nil && !errors.Is(err, attachments.ErrNotFound) {
					return nil, err
				}
				m.bytes[p.Attachment] = data
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

// File is a file part for the attachment id of the invocation's own thread, as the thread's
// messages show it (its media type and name). Beside the loop (an async call), whose history it
// cannot read, the type is told from the bytes.
func (d *invocation) File(ctx context.Context, id string) (model.Part, error) {
	if d.e.opts.Attachments == nil {
		return model.Part{}, errors.New("this deployment keeps no files")
	}
	data, err := d.e.opts.Attachments.Get(ctx, d.accountID, d.conversationID, id)
	if errors.Is(err, attachments.ErrNotFound) || !attachments.ValidID(id) {
		return model.Part{}, fmt.Errorf("this conversation has no attachment %q", id)
	}
	if err != nil {
		return model.Part{}, err
	}
	p := model.Part{Type: model.PartFile, Attachment: id, Data: data, MediaType: http.DetectContentType(data)}
	if !asynctools.InBackground(ctx) {
		p.MediaType, p.Filename = d.fileInfo(id, p.MediaType)
	}
	return p, nil
}

// fileInfo is the media type and name the thread's messages give the attachment id; fallback
// and no name when none does.
func (d *invocation) fileInfo(id, fallback string) (mediaType, filename string) {
	mediaType = fallback
	for _, m := range d.history {
		for _, q := range m.Parts {
			if q.Type == model.PartFile && q.Attachment == id {
				mediaType, filename = q.MediaType, q.Filename
			}
		}
	}
	return mediaType, filename
}
