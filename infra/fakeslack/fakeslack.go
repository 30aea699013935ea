// Package fakeslack is a local stand-in of the Slack Web API methods the harness calls
// (chat.postMessage, chat.update, chat.postEphemeral, auth.test), for tests and local runs. It
// serves them under /api/, so a client's base URL is <server>/api, and answers as Slack does:
// HTTP 200 with {"ok":true,...} or {"ok":false,"error":"<code>"}, and 429 with Retry-After for a
// method RateLimit was told to limit. It checks what the harness sends (the bearer token, JSON,
// the fields each method needs, the Block Kit limits the harness could break), keeps the
// messages it was sent as a channel would show them, and records every call, also served
// without auth as GET /calls so a dev command can show what the harness posted.
package fakeslack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/wire/slack"
)

// Options configure a Server; the zero value accepts any bot token.
type Options struct {
	// BotToken is the token accepted in "Authorization: Bearer <token>"; empty accepts any
	// non-empty token. A wrong token answers invalid_auth, none not_authed.
	BotToken string
	// BotUserID, BotID and TeamID are what auth.test answers, and who posted the messages;
	// empty ones take the defaults below.
	BotUserID string
	BotID     string
	TeamID    string
	// SigningSecret is what Sign signs inbound requests with.
	SigningSecret string
}

// The identities a Server answers with when Options leave them out.
const (
	DefaultBotUserID = "U0FAKEBOT"
	DefaultBotID     = "B0FAKEBOT"
	DefaultTeamID    = "T0FAKE"
)

// Call is one call the server received, answered or refused.
type Call struct {
	Method string          `json:"method"`
	Body   json.RawMessage `json:"body"`
	At     time.Time       `json:"at"`
	// Status is the HTTP status answered; Error the Slack error code, "" when ok.
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
	// TS is the message a chat.postMessage or chat.update answered with, so a dev command can
	// press a button on the message it reads here.
	TS string `json:"ts,omitempty"`
}

// Message is a message as its channel shows it now, after updates.
type Message struct {
	TS       string          `json:"ts"`
	ThreadTS string          `json:"thread_ts,omitempty"`
	Text     string          `json:"text"`
	Blocks   json.RawMessage `json:"blocks,omitempty"`
	// User is the one user who sees an ephemeral message; "" for a message everyone sees.
	User string `json:"user,omitempty"`
}

// Server is an http.Handler serving POST /api/{method} and GET /calls.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu       sync.Mutex
	calls    []Call
	channels map[string][]Message
	seq      int
	limits   map[string]rateLimit
}

type rateLimit struct {
	n          int
	retryAfter time.Duration
}

// Slack's limits the fake holds messages to.
const (
	maxMessageText = 40000
	maxBlocks      = 50
	maxElements    = 25
	maxActionID    = 255
	maxBody        = 1 << 20
)

// tsPattern is a message ts: Unix seconds, a dot, microseconds.
var tsPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

// New returns a Server; opts may be nil.
func New(opts *Options) *Server {
	s := &Server{mux: http.NewServeMux(), channels: map[string][]Message{}, limits: map[string]rateLimit{}}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.BotUserID == "" {
		s.opts.BotUserID = DefaultBotUserID
	}
	if s.opts.BotID == "" {
		s.opts.BotID = DefaultBotID
	}
	if s.opts.TeamID == "" {
		s.opts.TeamID = DefaultTeamID
	}
	s.mux.HandleFunc("POST /api/{method}", s.api)
	s.mux.HandleFunc("GET /calls", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, append([]Call{}, s.Calls()...))
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Calls returns a copy of the calls received so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Messages returns channel's messages, oldest first, each with its current text and blocks.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.channels[channel])
}

// RateLimit makes the next n calls of method answer 429 with Retry-After: retryAfter, rounded up
// to whole seconds as Slack sends it.
func (s *Server) RateLimit(method string, n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits[method] = rateLimit{n: n, retryAfter: retryAfter}
}

// Sign returns the headers Slack would send with an inbound request of body at now, signed with
// Options.SigningSecret.
func (s *Server) Sign(body []byte, now time.Time) http.Header {
	return slack.Sign(s.opts.SigningSecret, body, now)
}

// answer is a Web API answer: its HTTP status, body and, for a 429, its wait.
type answer struct {
	status     int
	body       map[string]any
	retryAfter time.Duration
}

func ok(fields map[string]any) answer {
	fields["ok"] = true
	return answer{status: http.StatusOK, body: fields}
}

// refuse is Slack's refusal; detail, when given, goes in "errors" as Slack explains bad blocks.
func refuse(code string, detail ...string) answer {
	body := map[string]any{"ok": false, "error": code}
	if len(detail) > 0 {
		body["errors"] = detail
	}
	return answer{status: http.StatusOK, body: body}
}

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	method := r.PathValue("method")

	s.mu.Lock()
	a := s.handle(method, r.Header, body)
	errCode, _ := a.body["error"].(string)
	ts, _ := a.body["ts"].(string)
	s.calls = append(s.calls, Call{Method: method, Body: jsonOrString(body), At: time.Now(), Status: a.status, Error: errCode, TS: ts})
	s.mu.Unlock()

	if a.status == http.StatusTooManyRequests {
		secs := (a.retryAfter + time.Second - 1) / time.Second
		w.Header().Set("Retry-After", fmt.Sprint(int64(secs)))
	}
	writeJSON(w, a.status, a.body)
}

// handle answers one call; s.mu is held.
func (s *Server) handle(method string, h http.Header, body []byte) answer {
	if l, limited := s.limits[method]; limited && l.n > 0 {
		l.n--
		s.limits[method] = l
		return answer{status: http.StatusTooManyRequests, body: map[string]any{"ok": false, "error": "ratelimited"}, retryAfter: l.retryAfter}
	}
	var handler func(request) answer
	switch method {
	case "chat.postMessage":
		handler = s.postMessage
	case "chat.update":
		handler = s.update
	case "chat.postEphemeral":
		handler = s.postEphemeral
	case "auth.test":
		handler = s.authTest
	default:
		return refuse("unknown_method")
	}
	token, hasToken := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	switch {
	case !hasToken || token == "":
		return refuse("not_authed")
	case s.opts.BotToken != "" && token != s.opts.BotToken:
		return refuse("invalid_auth")
	}
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "application/json" {
		return refuse("invalid_post_type")
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return refuse("invalid_json")
	}
	return handler(req)
}

// request holds the arguments of every method served; each uses its own.
type request struct {
	Channel  string          `json:"channel"`
	TS       string          `json:"ts"`
	ThreadTS string          `json:"thread_ts"`
	User     string          `json:"user"`
	Text     string          `json:"text"`
	Blocks   json.RawMessage `json:"blocks"`
}

// content checks a message's text and blocks: text or blocks present, within Slack's limits.
func content(req request) (answer, bool) {
	hasBlocks := blocksOrNil(req.Blocks) != nil
	switch {
	case req.Text == "" && !hasBlocks:
		return refuse("no_text"), false
	case utf8.RuneCountInString(req.Text) > maxMessageText:
		return refuse("msg_too_long"), false
	case req.ThreadTS != "" && !tsPattern.MatchString(req.ThreadTS):
		// Slack would post at the top level; the fake refuses, so a wrong value shows.
		return refuse("invalid_thread_ts"), false
	}
	if len(req.Blocks) > 0 {
		if err := checkBlocks(req.Blocks); err != nil {
			return refuse("invalid_blocks", err.Error()), false
		}
	}
	return answer{}, true
}

func (s *Server) postMessage(req request) answer {
	if req.Channel == "" {
		return refuse("channel_not_found")
	}
	if a, valid := content(req); !valid {
		return a
	}
	m := Message{TS: s.nextTS(), ThreadTS: req.ThreadTS, Text: req.Text, Blocks: blocksOrNil(req.Blocks)}
	s.channels[req.Channel] = append(s.channels[req.Channel], m)
	return ok(map[string]any{"channel": req.Channel, "ts": m.TS, "message": s.wire(m)})
}

func (s *Server) update(req request) answer {
	if req.Channel == "" {
		return refuse("channel_not_found")
	}
	i := slices.IndexFunc(s.channels[req.Channel], func(m Message) bool { return m.TS == req.TS && m.User == "" })
	if req.TS == "" || i < 0 {
		return refuse("message_not_found")
	}
	req.ThreadTS = ""
	if a, valid := content(req); !valid {
		return a
	}
	m := &s.channels[req.Channel][i]
	m.Text = req.Text
	if req.Blocks != nil {
		m.Blocks = blocksOrNil(req.Blocks)
	}
	return ok(map[string]any{"channel": req.Channel, "ts": m.TS, "text": m.Text, "message": s.wire(*m)})
}

func (s *Server) postEphemeral(req request) answer {
	switch {
	case req.Channel == "":
		return refuse("channel_not_found")
	case req.User == "":
		return refuse("user_not_found")
	}
	if a, valid := content(req); !valid {
		return a
	}
	m := Message{TS: s.nextTS(), ThreadTS: req.ThreadTS, Text: req.Text, Blocks: blocksOrNil(req.Blocks), User: req.User}
	s.channels[req.Channel] = append(s.channels[req.Channel], m)
	return ok(map[string]any{"message_ts": m.TS})
}

func (s *Server) authTest(request) answer {
	return ok(map[string]any{
		"url": "https://fake.slack.test/", "team": "Fake", "user": "harness",
		"team_id": s.opts.TeamID, "user_id": s.opts.BotUserID, "bot_id": s.opts.BotID,
	})
}

// nextTS is a new message's ts, increasing from 1700000000.000100.
func (s *Server) nextTS() string {
	s.seq++
	return fmt.Sprintf("%d.%06d", 1700000000+s.seq/10000, s.seq%10000*100)
}

// wire is a message as Slack answers it, posted by the bot.
func (s *Server) wire(m Message) map[string]any {
	out := map[string]any{"type": "message", "user": s.opts.BotUserID, "bot_id": s.opts.BotID, "text": m.Text, "ts": m.TS}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if m.Blocks != nil {
		out["blocks"] = m.Blocks
	}
	return out
}

// blocksOrNil keeps a message's blocks; an empty list, which removes them, is kept as none.
func blocksOrNil(raw json.RawMessage) json.RawMessage {
	if s := string(bytes.TrimSpace(raw)); s == "" || s == "null" || s == "[]" {
		return nil
	}
	return slices.Clone(raw)
}

// jsonOrString records a body as JSON, or as a JSON string when it is not JSON.
func jsonOrString(body []byte) json.RawMessage {
	if json.Valid(body) {
		return slices.Clone(body)
	}
	quoted, _ := json.Marshal(string(body))
	return quoted
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
