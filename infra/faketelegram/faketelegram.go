// Package faketelegram is a local stand-in of Telegram's Bot API for tests and local runs. It
// serves the methods the harness calls (sendMessage, editMessageText, sendChatAction,
// answerCallbackQuery, setWebhook, getMe) at POST /bot<token>/<method>, with JSON bodies, and
// refuses what Telegram would, in its envelope ({"ok":false,"error_code":N,"description":…}):
// a wrong token, a missing chat, text that is empty, too long or not valid HTML, callback data
// over 64 bytes, an edit of an unknown message or one that changes nothing. It keeps each
// chat's messages as edits leave them, records every call (also at GET /calls, for a dev
// command to show what the harness sent), and answers 429 when told to.
package faketelegram

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/wire/httpjson"
)

// Telegram's limits, as the Bot API documents them.
const (
	maxText         = 4096
	maxCallbackData = 64
	maxCallbackText = 200
	maxSecretToken  = 256
	maxBody         = 1 << 20
)

// chatActions are the actions sendChatAction takes.
var chatActions = []string{
	"typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
	"upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note",
}

// Options configure a Server.
type Options struct {
	// Token is the bot's token, required: the only one the server accepts.
	Token string
	// BotID and BotUsername are what getMe answers.
	BotID       int64
	BotUsername string
}

// Call is one request the server received under /bot, valid or not.
type Call struct {
	Method string `json:"method"`
	// Body is the request's JSON body (a JSON string when the body was not JSON).
	Body   json.RawMessage `json:"body"`
	At     time.Time       `json:"at"`
	Status int             `json:"status"`
	// MessageID is the message a sendMessage or editMessageText answered with, so a dev command
	// can press a button on the message it reads here.
	MessageID int `json:"message_id,omitempty"`
}

// Message is one of the bot's messages as it stands after its edits.
type Message struct {
	MessageID int
	ThreadID  int
	// Text is as last sent, markup included; ParseMode is how it was sent.
	Text      string
	ParseMode string
	Keyboard  [][]Button
}

// Webhook is what the last setWebhook set.
type Webhook struct {
	URL                string
	SecretToken        string
	AllowedUpdates     []string
	DropPendingUpdates bool
}

// Server is an http.Handler serving the Bot API methods and GET /calls.
type Server struct {
	opts Options

	mu      sync.Mutex
	calls   []Call
	chats   map[int64][]Message
	webhook Webhook
	limited map[string]rateLimit
}

type rateLimit struct {
	n          int
	retryAfter int
}

// New returns a Server; opts.Token is required.
func New(opts *Options) *Server {
	if opts == nil || opts.Token == "" {
		panic("faketelegram: Options.Token is required")
	}
	return &Server{opts: *opts, chats: map[int64][]Message{}, limited: map[string]rateLimit{}}
}

// Calls returns a copy of the calls received so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Messages returns the bot's messages in chatID, oldest first, as edits left them.
func (s *Server) Messages(chatID int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.chats[chatID])
	for i := range out {
		out[i].Keyboard = cloneKeyboard(out[i].Keyboard)
	}
	return out
}

// Webhook returns what the last setWebhook set, the zero Webhook before any.
func (s *Server) Webhook() Webhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.webhook
	w.AllowedUpdates = slices.Clone(w.AllowedUpdates)
	return w
}

// RateLimit makes the next n calls of method answer 429 "Too Many Requests: retry after S",
// S being retryAfter in whole seconds, at least 1.
func (s *Server) RateLimit(method string, n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limited[strings.ToLower(method)] = rateLimit{n: n, retryAfter: max(1, int((retryAfter+time.Second-1)/time.Second))}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/calls" && r.Method == http.MethodGet {
		httpjson.WriteJSON(w, http.StatusOK, s.Calls())
		return
	}
	token, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/bot"), "/")
	if !strings.HasPrefix(r.URL.Path, "/bot") || !ok || method == "" || strings.Contains(method, "/") {
		httpjson.WriteJSON(w, http.StatusNotFound, fail(http.StatusNotFound, "Not Found"))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		httpjson.WriteJSON(w, http.StatusBadRequest, fail(http.StatusBadRequest, "Bad Request: can't read the body"))
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	resp := s.serve(token, method, r.Header.Get("Content-Type"), body)
	status := http.StatusOK
	if !resp.OK {
		status = resp.ErrorCode
	}
	m, _ := resp.Result.(wireMessage)
	s.calls = append(s.calls, Call{Method: method, Body: recorded(body), At: time.Now(), Status: status, MessageID: m.MessageID})
	httpjson.WriteJSON(w, status, resp)
}

// serve answers one call, with s.mu held.
func (s *Server) serve(token, method, contentType string, body []byte) Response {
	if token != s.opts.Token {
		return fail(http.StatusUnauthorized, "Unauthorized")
	}
	handle, ok := map[string]func([]byte) Response{
		"sendmessage":         s.sendMessage,
		"editmessagetext":     s.editMessageText,
		"sendchataction":      s.sendChatAction,
		"answercallbackquery": s.answerCallbackQuery,
		"setwebhook":          s.setWebhook,
		"getme":               s.getMe,
	}[strings.ToLower(method)]
	if !ok {
		return fail(http.StatusNotFound, "Not Found")
	}
	if l := s.limited[strings.ToLower(method)]; l.n > 0 {
		l.n--
		s.limited[strings.ToLower(method)] = l
		resp := fail(http.StatusTooManyRequests, fmt.Sprintf("Too Many Requests: retry after %d", l.retryAfter))
		resp.Parameters = &ResponseParameters{RetryAfter: l.retryAfter}
		return resp
	}
	if len(body) > 0 {
		if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != "application/json" {
			return badRequest("the fake takes JSON bodies only (Content-Type: application/json)")
		}
	} else {
		body = []byte("{}")
	}
	return handle(body)
}

func (s *Server) sendMessage(body []byte) Response {
	var req textRequest
	if resp, ok := decode(body, &req); !ok {
		return resp
	}
	chatID, resp, ok := chatIDOf(req.ChatID)
	if !ok {
		return resp
	}
	text, resp, ok := checkText(req)
	if !ok {
		return resp
	}
	msgs := s.chats[chatID]
	replyTo, allowMissing := req.ReplyToMessageID, false
	if p := req.ReplyParameters; p != nil {
		replyTo, allowMissing = p.MessageID, p.AllowSendingWithoutReply
	}
	if replyTo != 0 && !allowMissing && !slices.ContainsFunc(msgs, func(m Message) bool { return m.MessageID == replyTo }) {
		return badRequest("message to be replied not found")
	}
	m := Message{MessageID: len(msgs) + 1, ThreadID: req.ThreadID, Text: req.Text, ParseMode: req.ParseMode, Keyboard: keyboardOf(req)}
	s.chats[chatID] = append(msgs, m)
	return success(s.wire(chatID, m, text, false))
}

func (s *Server) editMessageText(body []byte) Response {
	var req textRequest
	if resp, ok := decode(body, &req); !ok {
		return resp
	}
	if req.InlineMessageID != "" {
		return badRequest("the fake has no inline messages")
	}
	chatID, resp, ok := chatIDOf(req.ChatID)
	if !ok {
		return resp
	}
	if req.MessageID == 0 {
		return badRequest("message identifier is not specified")
	}
	text, resp, ok := checkText(req)
	if !ok {
		return resp
	}
	msgs := s.chats[chatID]
	i := slices.IndexFunc(msgs, func(m Message) bool { return m.MessageID == req.MessageID })
	if i < 0 {
		return badRequest("message to edit not found")
	}
	m := msgs[i]
	kb := keyboardOf(req)
	if m.Text == req.Text && m.ParseMode == req.ParseMode && equalKeyboards(m.Keyboard, kb) {
		return badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
	}
	// Without reply_markup, an edit removes the keyboard, as Telegram's does.
	m.Text, m.ParseMode, m.Keyboard = req.Text, req.ParseMode, kb
	msgs[i] = m
	return success(s.wire(chatID, m, text, true))
}

func (s *Server) sendChatAction(body []byte) Response {
	var req chatActionRequest
	if resp, ok := decode(body, &req); !ok {
		return resp
	}
	if _, resp, ok := chatIDOf(req.ChatID); !ok {
		return resp
	}
	if !slices.Contains(chatActions, req.Action) {
		return badRequest("wrong parameter action in request")
	}
	return success(true)
}

func (s *Server) answerCallbackQuery(body []byte) Response {
	var req callbackAnswerRequest
	if resp, ok := decode(body, &req); !ok {
		return resp
	}
	switch {
	case req.CallbackQueryID == "":
		return badRequest("query is too old and response timeout expired or query ID is invalid")
	case utf8.RuneCountInString(req.Text) > maxCallbackText:
		return badRequest("MESSAGE_TOO_LONG")
	}
	return success(true)
}

func (s *Server) setWebhook(body []byte) Response {
	var req webhookRequest
	if resp, ok := decode(body, &req); !ok {
		return resp
	}
	if len(req.SecretToken) > maxSecretToken || strings.ContainsFunc(req.SecretToken, func(r rune) bool {
		return !(r == '_' || r == '-' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
	}) {
		return badRequest("secret token contains unallowed characters")
	}
	s.webhook = Webhook{URL: req.URL, SecretToken: req.SecretToken, AllowedUpdates: req.AllowedUpdates, DropPendingUpdates: req.DropPendingUpdates}
	resp := success(true)
	resp.Description = "Webhook was set"
	return resp
}

func (s *Server) getMe([]byte) Response {
	return success(wireUser{ID: s.opts.BotID, IsBot: true, FirstName: s.opts.BotUsername, Username: s.opts.BotUsername})
}

// wire is m as the Bot API answers it, text being what it shows.
func (s *Server) wire(chatID int64, m Message, text string, edited bool) wireMessage {
	now := time.Now().Unix()
	w := wireMessage{
		MessageID: m.MessageID,
		ThreadID:  m.ThreadID,
		From:      wireUser{ID: s.opts.BotID, IsBot: true, FirstName: s.opts.BotUsername, Username: s.opts.BotUsername},
		Chat:      wireChat{ID: chatID, Type: chatType(chatID)},
		Date:      now,
		Text:      text,
	}
	if edited {
		w.EditDate = now
	}
	if m.Keyboard != nil {
		w.ReplyMarkup = &keyboard{InlineKeyboard: m.Keyboard}
	}
	return w
}

// chatType follows Telegram's ids: users are positive, supergroups -100…, groups negative.
func chatType(id int64) string {
	switch {
	case id > 0:
		return "private"
	case id <= -1000000000000:
		return "supergroup"
	}
	return "group"
}

// chatIDOf reads chat_id, a number or a string of one; a @channel name is a chat the fake has not.
func chatIDOf(raw json.RawMessage) (int64, Response, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, badRequest("chat_id is empty"), false
	}
	var n int64
	if json.Unmarshal(raw, &n) == nil && n != 0 {
		return n, Response{}, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n != 0 {
			return n, Response{}, true
		}
		if s == "" {
			return 0, badRequest("chat_id is empty"), false
		}
	}
	return 0, badRequest("chat not found"), false
}

// checkText checks a message's text, parse mode and keyboard, and returns what it shows.
func checkText(req textRequest) (string, Response, bool) {
	text := req.Text
	switch {
	case req.Text == "":
		return "", badRequest("message text is empty"), false
	case strings.EqualFold(req.ParseMode, "HTML"):
		var err error
		if text, err = ParseHTML(req.Text); err != nil {
			return "", badRequest("can't parse entities: " + err.Error()), false
		}
	case req.ParseMode != "" && !strings.EqualFold(req.ParseMode, "MarkdownV2") && !strings.EqualFold(req.ParseMode, "Markdown"):
		return "", badRequest("unsupported parse_mode"), false
	}
	switch {
	case strings.TrimSpace(text) == "":
		return "", badRequest("message text is empty"), false
	case utf8.RuneCountInString(text) > maxText:
		return "", badRequest("message is too long"), false
	}
	for _, row := range keyboardOf(req) {
		for _, b := range row {
			switch {
			case b.Text == "":
				return "", badRequest("can't parse inline keyboard button: button text must be non-empty"), false
			case b.CallbackData == "" && b.URL == "":
				return "", badRequest("can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"), false
			case len(b.CallbackData) > maxCallbackData:
				return "", badRequest("BUTTON_DATA_INVALID"), false
			}
		}
	}
	return text, Response{}, true
}

func keyboardOf(req textRequest) [][]Button {
	if req.ReplyMarkup == nil {
		return nil
	}
	return req.ReplyMarkup.InlineKeyboard
}

func equalKeyboards(a, b [][]Button) bool {
	return slices.EqualFunc(a, b, func(x, y []Button) bool { return slices.Equal(x, y) })
}

func cloneKeyboard(k [][]Button) [][]Button {
	if k == nil {
		return nil
	}
	out := make([][]Button, len(k))
	for i, row := range k {
		out[i] = slices.Clone(row)
	}
	return out
}

func decode(body []byte, v any) (Response, bool) {
	if err := json.Unmarshal(body, v); err != nil {
		return badRequest("can't parse JSON object: " + err.Error()), false
	}
	return Response{}, true
}

// recorded is a body as Call keeps it: JSON as it came, anything else as a JSON string.
func recorded(body []byte) json.RawMessage {
	if len(body) == 0 {
		return nil
	}
	if json.Valid(body) {
		return bytes.Clone(body)
	}
	s, _ := json.Marshal(string(body))
	return s
}

func success(result any) Response { return Response{OK: true, Result: result} }

func fail(code int, description string) Response {
	return Response{OK: false, ErrorCode: code, Description: description}
}

func badRequest(description string) Response {
	return fail(http.StatusBadRequest, "Bad Request: "+description)
}
