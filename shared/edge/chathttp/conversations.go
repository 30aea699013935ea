package chathttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/agentharness/harness/shared/wire/usertoken"
)

// agentView is an agent as GET /agents shows it to whoever may use it: what it is, not how
// it is configured.
type agentView struct {
	AgentID     string `json:"agentId"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// agents runs GET /agents: the agents the caller may use (a token's, or all of the account's).
func (h *Handler) agents(w http.ResponseWriter, r *http.Request) {
	c, ok := h.caller(w, r)
	if !ok {
		return
	}
	all, err := h.opts.Store.ListAgents(r.Context(), c.AccountID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	views := []agentView{}
	for _, a := range all {
		if !c.Allows(a.ID) {
			continue
		}
		var cfg struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		}
		_ = json.Unmarshal(a.Config, &cfg) // a stored config was checked as it was stored
		views = append(views, agentView{AgentID: a.ID, Name: cfg.Name, Description: cfg.Description})
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"agents": views})
}

// Conversation lists are paged: DefaultListLimit conversations unless limit says otherwise, at
// most MaxListLimit.
const (
	DefaultListLimit = 20
	MaxListLimit     = 100
)

// listConversations runs GET /conversations: a token's end user's conversations, or with the
// account secret all of the account's (or one end user's, with endUser), newest first.
func (h *Handler) listConversations(w http.ResponseWriter, r *http.Request) {
	c, ok := h.caller(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	query := store.ConversationQuery{EndUser: c.EndUser, All: !c.Token(), AgentID: q.Get("agentId"), Cursor: q.Get("cursor"), Limit: DefaultListLimit}
	err := httpjson.CheckOptionalID("agentId", query.AgentID)
	if v := q.Get("limit"); err == nil && v != "" {
		if query.Limit, err = strconv.Atoi(v); err != nil || query.Limit < 1 || query.Limit > MaxListLimit {
			err = httpjson.FieldError("limit", fmt.Sprintf("must be a whole number from 1 to %d", MaxListLimit))
		}
	}
	if v, set := q["endUser"]; err == nil && set {
		switch {
		case c.Token():
			err = &httpjson.Error{Status: http.StatusForbidden, Message: "endUser: an end-user token lists its own end user's conversations only", Extra: map[string]any{"field": "endUser"}}
		default:
			query.EndUser, query.All = v[0], false
			if query.EndUser != "" {
				if p := usertoken.CheckEndUser(query.EndUser); p != nil {
					err = httpjson.FieldError("endUser", p.Error())
				}
			}
		}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	list, next, err := h.opts.Store.ListConversations(r.Context(), c.AccountID, query)
	if errors.Is(err, store.ErrBadCursor) {
		err = httpjson.FieldError("cursor", "is not a cursor this list gave: pass nextCursor as it came")
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if list == nil {
		list = []store.ConversationInfo{}
	}
	out := map[string]any{"conversations": list}
	if next != "" {
		out["nextCursor"] = next
	}
	httpjson.WriteJSON(w, http.StatusOK, out)
}

// MaxTitleRunes bounds a title a client sets.
const MaxTitleRunes = 200

// patchConversation runs PATCH /conversations/{conversationId}: {"title": "…"} renames it.
func (h *Handler) patchConversation(w http.ResponseWriter, r *http.Request) {
	accountID, conv, ok := h.conversationRoute(w, r)
	if !ok {
		return
	}
	var body struct {
		Title *string `json:"title"`
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<10))
	if err == nil {
		err = httpjson.CheckKeys(b)
	}
	if err == nil {
		if derr := httpjson.DecodeStrict(b, &body); derr != nil {
			err = httpjson.BodyError(derr)
		}
	}
	if err == nil {
		switch {
		case body.Title == nil:
			err = httpjson.FieldError("title", "is required")
		case strings.TrimSpace(*body.Title) == "":
			err = httpjson.FieldError("title", "is empty")
		case utf8.RuneCountInString(*body.Title) > MaxTitleRunes:
			err = httpjson.FieldError("title", fmt.Sprintf("is longer than %d characters", MaxTitleRunes))
		case strings.ContainsFunc(*body.Title, unicode.IsControl):
			err = httpjson.FieldError("title", "holds a control character (such as a line break)")
		}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	info, err := h.opts.Store.SetTitle(r.Context(), accountID, conv, strings.TrimSpace(*body.Title))
	if errors.Is(err, store.ErrNotFound) {
		err = &httpjson.Error{Status: http.StatusNotFound, Message: "conversation " + conv + " not found"}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, info)
}
