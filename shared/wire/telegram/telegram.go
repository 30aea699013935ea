// Package telegram is the harness's side of a Telegram bot: a thin client of the six Bot API
// methods it calls, the check of a webhook's secret token, the updates it reads, and the
// conversion of the Markdown a model writes to Telegram's HTML. It links only the standard
// library, so async-worker stays small.
package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentharness/harness/shared/wire/retryafter"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

const (
	defaultBaseURL = "https://api.telegram.org"
	defaultTimeout = 10 * time.Second
	// maxResponse caps the body read; the answers of the methods we call are a few KB.
	maxResponse = 1 << 20
	// maxAttempts bounds the calls one method makes while Telegram asks it to slow down.
	maxAttempts = 3
	// serverBackoff is the wait before the one retry of a 5xx answer.
	serverBackoff = 500 * time.Millisecond
)

// ActionTyping is the chat action shown while a turn runs.
const ActionTyping = "typing"

// Client calls the Bot API as one bot. Its methods are safe for concurrent use.
type Client struct {
	base  string
	token string
	hc    *http.Client
	// wait sleeps between attempts; tests replace it.
	wait func(ctx context.Context, d time.Duration) error
}

// New returns a Client of the bot with token at baseURL ("" means https://api.telegram.org;
// tests and local runs point it at a stand-in). hc nil means a client with a 10 s timeout.
func New(baseURL, token string, hc *http.Client) *Client {
	if baseURL == "" {
		baseURL = defaultBaseURL
	}
	if hc == nil {
		hc = &http.Client{Timeout: defaultTimeout}
	}
	return &Client{base: strings.TrimSuffix(baseURL, "/"), token: token, hc: hc, wait: retryafter.Sleep}
}

// Message is a message to send, or the new content of one to edit.
type Message struct {
	ChatID int64
	// ThreadID is the forum topic (message_thread_id); 0 is none.
	ThreadID int
	Text     string
	// ParseMode is "HTML" for text made by HTML, or "" for plain text.
	ParseMode string
	Keyboard  *InlineKeyboard
	// ReplyTo is the id of the message this one answers; 0 is none.
	ReplyTo int
}

// User is a Telegram user or bot.
type User struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
}

// APIError is a call Telegram refused. Description is Telegram's, e.g. "Bad Request: chat not
// found"; no error of this package holds the bot's token.
type APIError struct {
	Method      string
	Code        int
	Description string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("telegram %s: %d %s", e.Method, e.Code, e.Description)
}

// RateLimitedError is a call Telegram still refused with 429 when the client stopped trying:
// after its last attempt, or because waiting RetryAfter would pass the context's deadline.
type RateLimitedError struct {
	Method     string
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("telegram %s: rate limited, retry after %s", e.Method, e.RetryAfter)
}

// SendMessage sends m and returns its message id.
func (c *Client) SendMessage(ctx context.Context, m Message) (int, error) {
	p := textParams{
		ChatID:    m.ChatID,
		ThreadID:  m.ThreadID,
		Text:      m.Text,
		ParseMode: m.ParseMode,
		Keyboard:  m.Keyboard,
	}
	if m.ReplyTo != 0 {
		// A reply to a message deleted meanwhile is still sent, as a plain message.
		p.ReplyParameters = &replyParameters{MessageID: m.ReplyTo, AllowSendingWithoutReply: true}
	}
	var sent struct {
		MessageID int `json:"message_id"`
	}
	if err := c.send(ctx, "sendMessage", p, m.Keyboard, &sent); err != nil {
		return 0, err
	}
	return sent.MessageID, nil
}

// EditMessageText replaces the text and keyboard of the bot's message messageID in chatID
// with m's (m's ChatID, ThreadID and ReplyTo are not used). A nil m.Keyboard removes the
// message's keyboard. An edit that changes nothing is not an error: a retried delivery edits
// with what the message already shows.
func (c *Client) EditMessageText(ctx context.Context, chatID int64, messageID int, m Message) error {
	p := textParams{ChatID: chatID, MessageID: messageID, Text: m.Text, ParseMode: m.ParseMode, Keyboard: m.Keyboard}
	err := c.send(ctx, "editMessageText", p, m.Keyboard, nil)
	if e, ok := errors.AsType[*APIError](err); ok && e.Code == http.StatusBadRequest && strings.Contains(e.Description, "message is not modified") {
		return nil
	}
	return err
}

// SendChatAction shows action (ActionTyping) in the chat, or in its topic threadID when not 0,
// for five seconds or until the bot's next message.
func (c *Client) SendChatAction(ctx context.Context, chatID int64, threadID int, action string) error {
	return c.call(ctx, "sendChatAction", struct {
		ChatID   int64  `json:"chat_id"`
		ThreadID int    `json:"message_thread_id,omitempty"`
		Action   string `json:"action"`
	}{chatID, threadID, action}, nil)
}

// AnswerCallbackQuery acknowledges the button press id, showing text ("" shows nothing) as a
// notice, or as an alert the user dismisses when alert is set.
func (c *Client) AnswerCallbackQuery(ctx context.Context, id, text string, alert bool) error {
	return c.call(ctx, "answerCallbackQuery", struct {
		ID    string `json:"callback_query_id"`
		Text  string `json:"text,omitempty"`
		Alert bool   `json:"show_alert,omitempty"`
	}{id, text, alert}, nil)
}

// SetWebhook has Telegram post the bot's messages and button presses to url, each with
// secretToken in SecretHeader. Updates pending from before are still delivered.
func (c *Client) SetWebhook(ctx context.Context, url, secretToken string) error {
	return c.call(ctx, "setWebhook", struct {
		URL                string   `json:"url"`
		SecretToken        string   `json:"secret_token,omitempty"`
		AllowedUpdates     []string `json:"allowed_updates"`
		DropPendingUpdates bool     `json:"drop_pending_updates"`
	}{url, secretToken, []string{"message", "callback_query"}, false}, nil)
}

// GetMe returns the bot's own user, whose Username is what mentions of it name.
func (c *Client) GetMe(ctx context.Context) (User, error) {
	var u User
	err := c.call(ctx, "getMe", struct{}{}, &u)
	return u, err
}

// textParams are the parameters sendMessage and editMessageText share.
type textParams struct {
	ChatID          int64            `json:"chat_id"`
	MessageID       int              `json:"message_id,omitempty"`
	ThreadID        int              `json:"message_thread_id,omitempty"`
	Text            string           `json:"text"`
	ParseMode       string           `json:"parse_mode,omitempty"`
	Keyboard        *InlineKeyboard  `json:"reply_markup,omitempty"`
	ReplyParameters *replyParameters `json:"reply_parameters,omitempty"`
}

type replyParameters struct {
	MessageID                int  `json:"message_id"`
	AllowSendingWithoutReply bool `json:"allow_sending_without_reply"`
}

// send checks a message's keyboard before calling method, so that data Telegram would refuse
// never leaves.
func (c *Client) send(ctx context.Context, method string, params any, k *InlineKeyboard, result any) error {
	if err := k.Check(); err != nil {
		return fmt.Errorf("telegram %s: %w", method, err)
	}
	return c.call(ctx, method, params, result)
}

// answer is the Bot API's envelope around every result and error.
type answer struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

// call posts params to method and decodes the result into result (nil ignores it). While
// Telegram answers 429 with retry_after it waits and tries again, at most maxAttempts calls
// and never past ctx's deadline; a 5xx answer is retried once after serverBackoff.
func (c *Client) call(ctx context.Context, method string, params, result any) error {
	body, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("telegram %s: encoding the request: %w", method, err)
	}
	retriedServer := false
	for attempt := 1; ; attempt++ {
		status, a, err := c.post(ctx, method, body)
		if err != nil {
			return err
		}
		if a.OK {
			if result == nil {
				return nil
			}
			if err := json.Unmarshal(a.Result, result); err != nil {
				return fmt.Errorf("telegram %s: decoding the result: %w", method, err)
			}
			return nil
		}
		code := a.ErrorCode
		if code == 0 {
			code = status
		}
		var wait time.Duration
		switch {
		case code == http.StatusTooManyRequests && a.Parameters.RetryAfter > 0:
			wait = time.Duration(a.Parameters.RetryAfter) * time.Second
			if attempt >= maxAttempts || !retryafter.Fits(ctx, wait) {
				return &RateLimitedError{Method: method, RetryAfter: wait}
			}
		case code >= 500 && !retriedServer && retryafter.Fits(ctx, serverBackoff):
			retriedServer = true
			wait = serverBackoff
		default:
			desc := a.Description
			if desc == "" {
				desc = http.StatusText(code)
			}
			return &APIError{Method: method, Code: code, Description: c.redact(desc)}
		}
		if err := c.wait(ctx, wait); err != nil {
			return fmt.Errorf("telegram %s: %w", method, err)
		}
	}
}

// post makes one call. The token is in the URL's path, so a transport error is returned
// without the *url.Error around it, which would print the URL.
func (c *Client) post(ctx context.Context, method string, body []byte) (int, answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/bot"+c.token+"/"+method, bytes.NewReader(body))
	if err != nil {
		return 0, answer{}, c.transportError(method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, answer{}, c.transportError(method, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return 0, answer{}, c.transportError(method, err)
	}
	var a answer
	if json.Unmarshal(data, &a) != nil {
		// Not the Bot API's envelope (a proxy's error page): the status speaks for it.
		a = answer{OK: false, ErrorCode: resp.StatusCode}
		if resp.StatusCode < 300 {
			a.Description = "the answer is not the Bot API's JSON"
		}
	}
	return resp.StatusCode, a, nil
}

func (c *Client) transportError(method string, err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if c.token != "" && strings.Contains(err.Error(), c.token) {
		return fmt.Errorf("telegram %s: %s", method, c.redact(err.Error()))
	}
	return fmt.Errorf("telegram %s: %w", method, err)
}

func (c *Client) redact(s string) string {
	if c.token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.token, "[redacted]")
}
