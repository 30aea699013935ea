package appserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// A conversation_list answers DefaultListLimit conversations unless its query's limit says
// otherwise (Letta's default), at most MaxListLimit.
const (
	DefaultListLimit = 50
	MaxListLimit     = 100
)

// conversationView is a conversation as Letta's Conversation shows it: summary is its title,
// last_message_at when a message was last added, created_by_id the end user whose token made
// it (absent for the account's own).
type conversationView struct {
	ID            string `json:"id"`
	AgentID       string `json:"agent_id"`
	Summary       string `json:"summary"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
	LastMessageAt string `json:"last_message_at"`
	CreatedByID   string `json:"created_by_id,omitempty"`
	Archived      bool   `json:"archived"`
}

func viewOf(info store.ConversationInfo) conversationView {
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	return conversationView{
		ID: info.ID, AgentID: info.AgentID, Summary: info.Title, CreatedAt: at(info.CreatedAt), UpdatedAt: at(info.UpdatedAt),
		LastMessageAt: at(info.UpdatedAt), CreatedByID: info.EndUser,
	}
}

// listQuery is conversation_list's query, Letta's ConversationListParams. The harness lists
// newest message first and keeps no archive, so order and order_by take that order only, and
// archive_status "archived" lists nothing.
type listQuery struct {
	AgentID       *string `json:"agent_id"`
	After         *string `json:"after"`
	Limit         *int    `json:"limit"`
	Order         *string `json:"order"`
	OrderBy       *string `json:"order_by"`
	ArchiveStatus *string `json:"archive_status"`
}

// conversationList answers conversation_list (the official client's conversationList()) from
// the store GET /conversations reads: a token's end user's conversations, or with the account
// secret all of the account's, newest first; query.after (a conversation id) gives the page
// after that conversation.
func (c *call) conversationList(ctx context.Context) error {
	const resp = "conversation_list_response"
	refuse := func(msg string) error {
		return c.reply(ctx, map[string]any{"type": resp, "success": false, "conversations": []any{}, "error": msg})
	}
	var cmd struct {
		Query json.RawMessage `json:"query"`
	}
	if err := c.decode(&cmd); err != nil {
		return refuse(err.Error())
	}
	var q listQuery
	if len(cmd.Query) > 0 && string(cmd.Query) != "null" {
		dec := json.NewDecoder(bytes.NewReader(cmd.Query))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil {
			return refuse("query: " + err.Error() + " (the harness takes agent_id, after, limit, order, order_by and archive_status)")
		}
	}
	who := c.caller()
	query := store.ConversationQuery{EndUser: who.EndUser, All: !who.Token(), Limit: DefaultListLimit}
	if q.AgentID != nil {
		if err := httpjson.CheckID("query.agent_id", *q.AgentID); err != nil {
			return refuse(c.refusal(ctx, err))
		}
		if !who.Allows(*q.AgentID) {
			return refuse("agent " + *q.AgentID + " not found")
		}
		query.AgentID = *q.AgentID
	}
	switch {
	case q.Limit != nil && (*q.Limit < 1 || *q.Limit > MaxListLimit):
		return refuse(fmt.Sprintf("query.limit must be from 1 to %d", MaxListLimit))
	case q.Order != nil && *q.Order != "desc":
		return refuse(`query.order: the harness lists newest first only ("desc")`)
	case q.OrderBy != nil && *q.OrderBy != "last_message_at":
		return refuse(`query.order_by: the harness lists by the last message only ("last_message_at")`)
	case q.ArchiveStatus != nil && *q.ArchiveStatus != "unarchived" && *q.ArchiveStatus != "archived" && *q.ArchiveStatus != "all":
		return refuse(`query.archive_status must be "unarchived", "archived" or "all"`)
	}
	if q.Limit != nil {
		query.Limit = *q.Limit
	}
	views := []conversationView{}
	if q.ArchiveStatus != nil && *q.ArchiveStatus == "archived" {
		return c.reply(ctx, map[string]any{"type": resp, "success": true, "conversations": views})
	}
	if q.After != nil {
		if err := httpjson.CheckID("query.after", *q.After); err != nil {
			return refuse(c.refusal(ctx, err))
		}
		// The page goes on from where that conversation is listed now.
		info, err := c.g.h.opts.Store.Conversation(ctx, c.conn.AccountID, *q.After)
		switch {
		case errors.Is(err, store.ErrNotFound) || (err == nil && (!who.Sees(info.EndUser) || info.UpdatedAt.IsZero())):
			return refuse("query.after: conversation " + *q.After + " not found")
		case err != nil:
			return refuse(c.refusal(ctx, err))
		}
		query.Cursor = store.CursorAfter(c.conn.AccountID, info)
	}
	list, _, err := c.g.h.opts.Store.ListConversations(ctx, c.conn.AccountID, query)
	if err != nil {
		return refuse(c.refusal(ctx, err))
	}
	for _, info := range list {
		views = append(views, viewOf(info))
	}
	return c.reply(ctx, map[string]any{"type": resp, "success": true, "conversations": views})
}
