package turn

import (
	"context"
	"encoding/json"
)

// KeepResult keeps the whole of a tool result the loop cut to fit the conversation's record
// (agent.Config.KeepResult) and returns its key. A result that cannot be kept is no reason to
// fail the turn: the model and the record still get the cut result, without a key.
func (d *invocation) KeepResult(ctx context.Context, whole json.RawMessage) string {
	if d.e.opts.Results == nil {
		return ""
	}
	key, err := d.e.opts.Results.Put(ctx, d.accountID, d.conversationID, whole)
	if err != nil {
		d.log.ErrorContext(ctx, "keeping a tool result cut to fit the conversation", "err", err)
		return ""
	}
	return key
}
