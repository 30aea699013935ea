package turn

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/tool/asynctools"
)

// Thread is the invocation's thread, whose files its models read (attachments.Model).
func (d *invocation) Thread() (accountID, threadID string) { return d.accountID, d.conversationID }

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
