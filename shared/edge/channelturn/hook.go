package channelturn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/agentharness/harness/shared/wire/ids"
	"github.com/agentharness/harness/shared/wire/slack"
	"github.com/agentharness/harness/shared/wire/telegram"
)

// Hook serves POST /channels/{bindingId}, where a binding's platform posts: Slack's Events API
// and interactivity requests, Telegram's updates. Each request is checked (Slack's signature
// and timestamp, Telegram's secret token) before anything is read from it; a message becomes a
// turn queued for async-worker under an event named after the platform's delivery, so a retry
// or a replay finds it taken and changes nothing; a decision button's press is checked against
// the binding's approvers and the stored approval, then queued the same way. The webhook answers
// at once (Slack wants an answer within 3 s); the turn answers in the chat.
type Hook struct {
	Bindings *channels.Store
	Store    *store.Store
	Engine   *turn.Engine
	APIs     channels.APIs
	Now      func() time.Time
	Logger   *slog.Logger
}

// maxHookBody bounds a platform's request: Slack's and Telegram's are a few KiB.
const maxHookBody = 1 << 20

func (h *Hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHookBody))
	if err != nil {
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusRequestEntityTooLarge, Message: "the request body is too large"})
		return
	}
	b, err := h.Bindings.Get(ctx, r.PathValue("bindingId"))
	if errors.Is(err, channels.ErrNotFound) {
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusNotFound, Message: "no channel binding here"})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p, err := platformOf(h.APIs, b)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	switch b.Type {
	case channels.Slack:
		err = h.slack(ctx, w, r, b, p, body)
	case channels.Telegram:
		err = h.telegram(ctx, w, r, b, p, body)
	}
	if err != nil {
		h.fail(w, r, err)
	}
}

// fail answers a refusal (an *httpjson.Error) as it is, anything else 500, which both
// platforms retry.
func (h *Hook) fail(w http.ResponseWriter, r *http.Request, err error) {
	httpjson.ErrorWriter{Logger: h.Logger}.Fail(w, r, err)
}

// unauthorized answers a request whose signature or secret failed, naming nothing about why
// beyond the kind (logged in full).
func (h *Hook) unauthorized(w http.ResponseWriter, r *http.Request, b channels.Binding, err error) {
	h.Logger.WarnContext(r.Context(), "channel request refused", "bindingId", b.ID, "type", b.Type, "err", err)
	httpjson.WriteError(w, &httpjson.Error{Status: http.StatusUnauthorized, Message: "the request is not signed for this binding"})
}

func (h *Hook) slack(ctx context.Context, w http.ResponseWriter, r *http.Request, b channels.Binding, p platform, body []byte) error {
	if err := slack.Verify(b.Secrets.SigningSecret, r.Header, body, h.Now()); err != nil {
		h.unauthorized(w, r, b, err)
		return nil
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/x-www-form-urlencoded" {
		in, err := slack.ParseInteraction(body)
		if err != nil || in.Type != slack.BlockActions || len(in.Actions) == 0 {
			w.WriteHeader(http.StatusOK) // another kind of interaction: nothing to do
			return nil
		}
		c := p.(slackChat)
		route := Route{Binding: b.ID, Type: b.Type, Chat: in.Channel.ID, Thread: in.Message.ThreadTS, User: in.User.ID}
		respond := func(text string) {
			if err := c.c.PostEphemeral(ctx, route.Chat, in.User.ID, route.Thread, text); err != nil {
				h.Logger.WarnContext(ctx, "answering a press", "err", err)
			}
		}
		settle := func(pr prompt, outcome string) error { return c.decided(ctx, route, in.Message.TS, pr, outcome) }
		err = h.press(ctx, b, route, "<@"+in.User.ID+">", "actions[0].value", in.Actions[0].Value, respond, settle)
		if err == nil {
			w.WriteHeader(http.StatusOK)
		}
		return err
	}
	env, err := slack.ParseEvent(body)
	if err != nil {
		httpjson.WriteError(w, httpjson.FieldError("body", err.Error()))
		return nil
	}
	if env.Type == slack.URLVerification {
		httpjson.WriteJSON(w, http.StatusOK, map[string]string{"challenge": env.Challenge})
		return nil
	}
	e := env.Event
	if env.Type != slack.EventCallback || e == nil {
		w.WriteHeader(http.StatusOK) // another kind of request (app_rate_limited…)
		return nil
	}
	im := e.ChannelType == "im"
	// In a channel a mention comes as both message and app_mention: one of them is taken.
	take := (e.Type == "message" && (im || !b.MentionsOnly)) || (e.Type == "app_mention" && !im && b.MentionsOnly)
	if !take || e.Subtype != "" || e.FromBot(b.BotUserID, b.BotID) {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	route := Route{Binding: b.ID, Type: b.Type, Chat: e.Channel, Thread: e.Thread(), User: e.User}
	if err := h.message(ctx, b, route, "event:"+env.EventID, slack.StripMention(e.Text, b.BotUserID)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (h *Hook) telegram(ctx context.Context, w http.ResponseWriter, r *http.Request, b channels.Binding, p platform, body []byte) error {
	if err := telegram.VerifySecret(r.Header, b.Secrets.WebhookSecret); err != nil {
		h.unauthorized(w, r, b, err)
		return nil
	}
	u, err := telegram.ParseUpdate(body)
	if err != nil {
		httpjson.WriteError(w, httpjson.FieldError("body", err.Error()))
		return nil
	}
	c := p.(telegramChat)
	if q := u.CallbackQuery; q != nil && q.Message != nil {
		route := Route{Binding: b.ID, Type: b.Type, Chat: strconv.FormatInt(q.Message.Chat.ID, 10), Thread: topic(q.Message.Thread()), User: strconv.FormatInt(q.From.ID, 10)}
		answered := false
		respond := func(text string) {
			answered = true
			if err := c.c.AnswerCallbackQuery(ctx, q.ID, text, true); err != nil {
				h.Logger.WarnContext(ctx, "answering a press", "err", err)
			}
		}
		settle := func(pr prompt, outcome string) error {
			return c.decided(ctx, route, strconv.Itoa(q.Message.MessageID), pr, outcome)
		}
		who := q.From.FirstName
		if q.From.Username != "" {
			who = "@" + q.From.Username
		}
		if err := h.press(ctx, b, route, who, "callback_query.data", q.Data, respond, settle); err != nil {
			return err
		}
		if !answered {
			_ = c.c.AnswerCallbackQuery(ctx, q.ID, "Recorded", false) // stops the button's spinner
		}
		w.WriteHeader(http.StatusOK)
		return nil
	}
	m := u.Message
	if m == nil || m.From == nil || m.From.IsBot || strings.TrimSpace(m.Text) == "" ||
		(m.Chat.Type != "private" && b.MentionsOnly && !m.Mentions(b.BotUsername)) {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	route := Route{Binding: b.ID, Type: b.Type, Chat: strconv.FormatInt(m.Chat.ID, 10), Thread: topic(m.Thread()), User: strconv.FormatInt(m.From.ID, 10)}
	if err := h.message(ctx, b, route, "update:"+strconv.FormatInt(u.UpdateID, 10), telegram.StripMention(m.Text, b.BotUsername)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func topic(id int) string {
	if id == 0 {
		return ""
	}
	return strconv.Itoa(id)
}

// live reports whether the binding's account and agent still exist: a binding of a deleted
// account or agent is disabled at once, and its requests write nothing.
func (h *Hook) live(ctx context.Context, b channels.Binding) (bool, error) {
	if _, err := h.Store.Account(ctx, b.AccountID); errors.Is(err, store.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if _, err := h.Store.Agent(ctx, b.AccountID, b.AgentID); errors.Is(err, store.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, nil
}

// deliveryID names what a platform delivery becomes (its event, its message) after the
// binding and the platform's own id of the delivery, so a retry or a replay finds it taken.
func deliveryID(prefix, bindingID, key string) string { return ids.Derived(prefix, bindingID, key) }

// message queues a turn of the binding's agent for a chat message (key: the platform's id of
// the delivery). A binding that is disabled, or a delivery seen before, changes nothing.
func (h *Hook) message(ctx context.Context, b channels.Binding, route Route, key, text string) error {
	ok, err := h.live(ctx, b)
	if err != nil || !ok {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return nil
	}
	req := turn.Request{
		ConversationID: ConversationID(b.ID, b.AgentID, route.Chat, route.Thread), AgentID: b.AgentID,
		EventID: deliveryID("evt_ch_", b.ID, key),
		// In a chat a new message means the user moved on: calls still held are denied first.
		OnPendingApprovals: "deny",
	}
	msg := &model.Message{ID: deliveryID("msg_ch_", b.ID, key), Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: text}}}
	// The worker checks it when it runs, and tells the chat of a refusal.
	_, err = h.queue(ctx, b, turn.Queued{Request: req, Input: turn.Input{Message: msg}, CheckLater: true}, route)
	return err
}

// queue accepts the turn q and puts it on async-worker's queue as a turn of the chat route. An
// event taken already (a retried or replayed delivery, a second press) queues nothing: queued
// is false.
func (h *Hook) queue(ctx context.Context, b channels.Binding, q turn.Queued, route Route) (queued bool, err error) {
	q.AccountID, q.Edge, q.Route = b.AccountID, Edge, route.encode()
	err = h.Engine.Queue(ctx, q)
	var dup *store.DuplicateEventError
	if errors.As(err, &dup) {
		h.Logger.InfoContext(ctx, "channel delivery seen before; ignored", "bindingId", b.ID, "eventId", q.Request.EventID)
		return false, nil
	}
	return err == nil, err
}

// press decides a held call from a decision button pressed by who (shown as name), whose data
// came in field: only the binding's approvers may, only on a call still pending in this chat's
// conversation, with the arguments the button was shown for, once. Refusals go to the presser
// alone (respond) and change nothing; a decision is queued like a message, and its prompt shows
// who decided. An approval id that breaks the id grammar is refused with 400 naming field.
func (h *Hook) press(ctx context.Context, b channels.Binding, route Route, name, field, data string, respond func(string), settle func(prompt, string) error) error {
	p, ok := parsePress(data)
	if !ok {
		respond("This button is not one of this bot's.")
		return nil
	}
	if problem := ids.Problem(p.ApprovalID); problem != "" {
		return httpjson.FieldError(field, "approval id "+problem)
	}
	if !slices.Contains(b.Approvers, route.User) {
		respond("You may not decide tool calls in this chat: ask one of its approvers.")
		return nil
	}
	if ok, err := h.live(ctx, b); err != nil || !ok {
		return err
	}
	rows, err := h.Store.Approvals(ctx, b.AccountID, []string{p.ApprovalID})
	if err != nil {
		return err
	}
	a, found := rows[p.ApprovalID]
	now := h.Now()
	conv := ConversationID(b.ID, b.AgentID, route.Chat, route.Thread)
	switch {
	case !found || a.ConversationID != conv:
		respond("This approval is not one of this chat's.")
		return nil
	case !strings.HasPrefix(a.ArgsHash, p.Hash):
		respond("This button was for other arguments of the call; it decides nothing.")
		return nil
	case a.Status != store.ApprovalPending:
		respond("Already decided (" + a.Status + ").")
		return nil
	case a.Expired(now):
		respond("This approval expired: the call was not decided in time.")
		return nil
	}
	verb := map[bool]string{true: "approved", false: "denied"}[p.Approved]
	req := turn.Request{ConversationID: conv, AgentID: b.AgentID, EventID: deliveryID("evt_ch_", b.ID, "press:"+p.ApprovalID)}
	d := turn.Decision{ApprovalID: a.ID, Approved: &p.Approved, Reason: verb + " by " + name + " in " + b.Type, ToolCallID: a.ToolCallID, Input: a.Input}
	in := turn.Input{Decisions: []turn.Decision{d}}
	queued, err := h.queue(ctx, b, turn.Queued{Request: req, Input: in}, route)
	var refused *turn.Refusal
	if errors.As(err, &refused) {
		respond("This call cannot be decided now: " + refused.Message)
		return nil
	}
	if err != nil {
		return err
	}
	if !queued {
		respond("Already decided.")
		return nil
	}
	mark := map[bool]string{true: "✅ Approved", false: "❌ Denied"}[p.Approved]
	outcome := fmt.Sprintf("%s by %s at %s", mark, name, now.UTC().Format("15:04 UTC, 2 Jan"))
	pr := prompt{ApprovalID: a.ID, Tool: a.ToolName, Args: shownArgs(a.Input), Hash: a.ArgsHash}
	if err := settle(pr, outcome); err != nil {
		h.Logger.WarnContext(ctx, "showing a decision on its prompt", "approvalId", a.ID, "err", err)
	}
	return nil
}
