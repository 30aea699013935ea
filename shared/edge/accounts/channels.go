package accounts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// channelStore is the deployment's channel bindings, or the refusal of a deployment that keeps
// none.
func (h *Handler) channelStore() (*channels.Store, error) {
	if h.opts.Channels == nil {
		return nil, &httpjson.Error{Status: http.StatusNotImplemented, Message: "this deployment keeps no channel bindings (it sets no CHANNELS_TABLE)"}
	}
	return h.opts.Channels, nil
}

// channelError answers a binding's refusals: a field that cannot be stored, a binding that is not
// the account's (one body for every such binding, so none can be told apart), a lost race.
func channelError(err error) error {
	var inv *channels.InvalidError
	switch {
	case errors.As(err, &inv):
		return httpjson.FieldError(inv.Field, inv.Problem)
	case errors.Is(err, channels.ErrNotFound):
		return &httpjson.Error{Status: http.StatusNotFound, Message: "channel binding not found"}
	case errors.Is(err, channels.ErrConflict):
		return &httpjson.Error{Status: http.StatusConflict, Message: "the channel binding was changed by another request; read it again and retry"}
	}
	return err
}

// platformError answers a platform call that failed: a refused token is the client's to fix,
// anything else is the platform's (502, logged).
func (h *Handler) platformError(ctx context.Context, typ, doing string, err error) error {
	var refused *channels.TokenRefusedError
	if errors.As(err, &refused) {
		return httpjson.FieldError("botToken", channels.Platform(typ)+" refused the token: "+refused.Reason)
	}
	h.opts.Logger.WarnContext(ctx, "a channel platform call failed", "platform", typ, "doing", doing, "err", err)
	return &httpjson.Error{Status: http.StatusBadGateway, Message: doing + " with " + channels.Platform(typ) + " failed; try again", Cause: err}
}

// channelView is a binding as the API shows it: which secrets it holds (never their values), its
// status, and where its webhook is.
type channelView struct {
	channels.Binding
	channels.Secrets
	// Status is "active", or "disabled: " and why its messages cannot be answered.
	Status string `json:"status"`
	// WebhookURL is where the platform sends the binding's requests; WebhookPath (and Note)
	// stand in for it when the deployment's public URL is unknown.
	WebhookURL  string `json:"webhookUrl,omitempty"`
	WebhookPath string `json:"webhookPath,omitempty"`
	Note        string `json:"note,omitempty"`
}

// views shows bindings of the account, each agent looked up once: a binding whose agent is gone
// is disabled at once, whatever the order of the deletions.
func (h *Handler) views(ctx context.Context, accountID string, bs ...channels.Binding) ([]channelView, error) {
	exists := map[string]bool{}
	out := make([]channelView, 0, len(bs))
	for _, b := range bs {
		ok, seen := exists[b.AgentID]
		if !seen {
			_, err := h.opts.Store.Agent(ctx, accountID, b.AgentID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
			ok = err == nil
			exists[b.AgentID] = ok
		}
		v := channelView{Binding: b, Secrets: channels.Redacted(b), Status: "active"}
		if !ok {
			v.Status = "disabled: agent " + b.AgentID + " no longer exists; PATCH agentId to bind another"
		}
		if h.opts.ServiceURL == "" {
			v.WebhookPath = channels.WebhookPath(b.ID)
			v.Note = "this deployment's public URL is unknown (AGENT_SERVICE_URL is not set): the webhook URL is that URL followed by webhookPath"
		} else {
			v.WebhookURL = h.opts.ServiceURL + channels.WebhookPath(b.ID)
		}
		out = append(out, v)
	}
	return out, nil
}

// answerChannel answers with the binding, or with err's refusal.
func (h *Handler) answerChannel(w http.ResponseWriter, r *http.Request, status int, b channels.Binding, err error) {
	var vs []channelView
	if err == nil {
		vs, err = h.views(r.Context(), accountID(r), b)
	}
	if err != nil {
		h.errs.Fail(w, r, channelError(err))
		return
	}
	httpjson.WriteJSON(w, status, vs[0])
}

// channelFields are the keys of a binding's body, in the order their refusals are checked;
// "type" is only for POST.
var channelFields = []string{"type", "agentId", "botToken", "signingSecret", "approvers", "mentionsOnly"}

// applyChannelBody merges a binding's body into b as RFC 7396 does: a key left out keeps b's
// value, null resets it (no approvers, mentions only). A secret sent back as the redaction
// placeholder keeps b's, and b, when new, has none to keep (Check then refuses it).
func applyChannelBody(body []byte, b *channels.Binding, creating bool) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return &httpjson.Error{Status: http.StatusBadRequest, Message: "the request body must be a JSON object"}
	}
	unknown := []string{}
	for k := range fields {
		if !slices.Contains(channelFields, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return httpjson.FieldError(unknown[0], "is not a field of this request")
	}
	for _, k := range channelFields {
		raw, ok := fields[k]
		if !ok {
			continue
		}
		null := bytes.Equal(raw, []byte("null"))
		var err error
		switch k {
		case "type":
			if !creating {
				return httpjson.FieldError(k, "cannot change: delete the binding and create another")
			}
			err = decodeField(raw, null, &b.Type, "", "a string")
		case "agentId":
			err = decodeField(raw, null, &b.AgentID, "", "a string")
		case "botToken":
			err = decodeSecret(raw, null, &b.Secrets.BotToken)
		case "signingSecret":
			err = decodeSecret(raw, null, &b.Secrets.SigningSecret)
		case "approvers":
			err = decodeField(raw, null, &b.Approvers, []string{}, "an array of strings")
		case "mentionsOnly":
			err = decodeField(raw, null, &b.MentionsOnly, true, "true or false")
		}
		if err != nil {
			return httpjson.FieldError(k, err.Error())
		}
	}
	return nil
}

// decodeField sets *dst from raw, which must be JSON's want, or to reset when raw is null.
func decodeField[T any](raw json.RawMessage, null bool, dst *T, reset T, want string) error {
	if null {
		*dst = reset
		return nil
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return errors.New("must be " + want)
	}
	*dst = v
	return nil
}

// decodeSecret is decodeField for a secret: the redaction placeholder keeps *dst, when it has one.
func decodeSecret(raw json.RawMessage, null bool, dst *string) error {
	var v string
	if err := decodeField(raw, null, &v, "", "a string"); err != nil {
		return err
	}
	if v != agentconfig.Redacted || *dst == "" {
		*dst = v
	}
	return nil
}

// checkChannel refuses a binding that cannot be stored, or whose agent (when it changed) is not
// the account's; a new token (tokenChanged) is shown to the platform, which tells whose bot it is.
func (h *Handler) checkChannel(ctx context.Context, b *channels.Binding, agentChanged, tokenChanged bool) error {
	if err := channels.Check(*b); err != nil {
		return channelError(err)
	}
	if agentChanged {
		_, err := h.opts.Store.Agent(ctx, b.AccountID, b.AgentID)
		if errors.Is(err, store.ErrNotFound) {
			return httpjson.FieldError("agentId", "names no agent of this account: "+b.AgentID)
		}
		if err != nil {
			return err
		}
	}
	if tokenChanged && h.opts.Identify != nil {
		id, err := h.opts.Identify(ctx, b.Type, b.Secrets.BotToken)
		if err != nil {
			return h.platformError(ctx, b.Type, "checking the bot token", err)
		}
		b.BotUserID, b.BotID, b.BotUsername = id.BotUserID, id.BotID, id.BotUsername
	}
	return nil
}

// createChannel is POST /accounts/me/channels.
func (h *Handler) createChannel(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st, err := h.channelStore()
	var body []byte
	if err == nil {
		body, err = readBody(w, r)
	}
	b := channels.Binding{AccountID: accountID(r), Approvers: []string{}, MentionsOnly: true}
	if err == nil {
		err = applyChannelBody(body, &b, true)
	}
	if err == nil {
		if b.Type == channels.Telegram {
			b.Secrets.WebhookSecret = channels.NewWebhookSecret()
		}
		err = h.checkChannel(ctx, &b, true, true)
	}
	if err == nil {
		b, err = st.Create(ctx, b, h.opts.Now())
	}
	h.answerChannel(w, r, http.StatusCreated, b, err)
}

func (h *Handler) listChannels(w http.ResponseWriter, r *http.Request) {
	st, err := h.channelStore()
	var all []channels.Binding
	if err == nil {
		all, err = st.List(r.Context(), accountID(r))
	}
	var vs []channelView
	if err == nil {
		vs, err = h.views(r.Context(), accountID(r), all...)
	}
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"channels": vs})
}

// ownedChannel is the binding the route names, if it is the account's.
func (h *Handler) ownedChannel(r *http.Request) (*channels.Store, channels.Binding, error) {
	st, err := h.channelStore()
	if err != nil {
		return nil, channels.Binding{}, err
	}
	b, err := st.Owned(r.Context(), accountID(r), r.PathValue("bindingId"))
	return st, b, err
}

func (h *Handler) getChannel(w http.ResponseWriter, r *http.Request) {
	_, b, err := h.ownedChannel(r)
	h.answerChannel(w, r, http.StatusOK, b, err)
}

// updateChannel is PATCH /accounts/me/channels/{bindingId}: a merge patch of the binding's
// fields; a new botToken or signingSecret rotates it.
func (h *Handler) updateChannel(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, err := readBody(w, r)
	var st *channels.Store
	var b channels.Binding
	if err == nil {
		st, b, err = h.ownedChannel(r)
	}
	if err == nil {
		agent, token := b.AgentID, b.Secrets.BotToken
		if err = applyChannelBody(body, &b, false); err == nil {
			err = h.checkChannel(ctx, &b, b.AgentID != agent, b.Secrets.BotToken != token)
		}
	}
	if err == nil {
		b, err = st.Update(ctx, b, h.opts.Now())
	}
	h.answerChannel(w, r, http.StatusOK, b, err)
}

func (h *Handler) deleteChannel(w http.ResponseWriter, r *http.Request) {
	st, err := h.channelStore()
	if err == nil {
		err = st.Delete(r.Context(), accountID(r), r.PathValue("bindingId"))
	}
	if err != nil {
		h.errs.Fail(w, r, channelError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// setWebhook is POST /accounts/me/channels/{bindingId}/set-webhook: a Telegram binding gets a
// fresh webhook secret, stored before Telegram is told it, so the first update Telegram sends
// with it is already accepted.
func (h *Handler) setWebhook(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st, b, err := h.ownedChannel(r)
	switch {
	case err != nil:
	case b.Type != channels.Telegram:
		err = &httpjson.Error{Status: http.StatusBadRequest, Message: "set-webhook is for Telegram bindings: a " + channels.Platform(b.Type) +
			" app takes its request URL in its own configuration (Event Subscriptions and Interactivity); set it there to the binding's webhookUrl"}
	case h.opts.ServiceURL == "":
		err = &httpjson.Error{Status: http.StatusBadRequest, Message: "this deployment's public URL is unknown (AGENT_SERVICE_URL is not set), so there is no webhook URL to give Telegram; set the template parameter AgentServiceUrl"}
	case h.opts.SetWebhook == nil:
		err = &httpjson.Error{Status: http.StatusNotImplemented, Message: "this deployment cannot call Telegram's setWebhook"}
	}
	if err == nil {
		b.Secrets.WebhookSecret = channels.NewWebhookSecret()
		b, err = st.Update(ctx, b, h.opts.Now())
	}
	if err == nil {
		if err = h.opts.SetWebhook(ctx, b.Secrets.BotToken, h.opts.ServiceURL+channels.WebhookPath(b.ID), b.Secrets.WebhookSecret); err != nil {
			err = h.platformError(ctx, b.Type, "setting the webhook", err)
		}
	}
	h.answerChannel(w, r, http.StatusOK, b, err)
}
