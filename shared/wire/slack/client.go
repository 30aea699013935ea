// Package slack is the harness's side of a Slack app: a thin Web API client for the few methods
// it calls (chat.postMessage, chat.update, chat.postEphemeral, auth.test), the v0 signature check
// of the requests Slack sends, the Events API and interactivity payloads it reads, and the
// conversion of a model's Markdown to Slack's mrkdwn. It uses only the standard library, by
// decision: five endpoints do not justify an SDK in every function binary that delivers turns.
package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/wire/retryafter"
)

const (
	// DefaultBaseURL is where the Web API's methods live; a test or a proxy passes its own.
	DefaultBaseURL = "https://slack.com/api"
	defaultTimeout = 10 * time.Second
	// maxAttempts bounds the tries of one call, rate-limited or failed with a 5xx.
	maxAttempts = 3
	// serverBackoff is the wait before the one retry of a 5xx: long enough for a blip to pass,
	// short enough for a turn that is waiting on it.
	serverBackoff = 250 * time.Millisecond
	// defaultRateWait stands in for a 429 without a usable Retry-After (Slack always sends one).
	defaultRateWait = time.Second
	maxResponse     = 1 << 20
)

// Client calls the Slack Web API with a bot token (xoxb-…).
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// New returns a client of the Web API at baseURL ("" means DefaultBaseURL) with the bot token;
// hc nil means a client with a 10 s timeout.
func New(baseURL, botToken string, hc *http.Client) *Client {
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	if hc == nil {
		hc = &http.Client{Timeout: defaultTimeout}
	}
	return &Client{base: strings.TrimSuffix(baseURL, "/"), token: botToken, hc: hc}
}

// Message is a message to post. Text is always set: it is the notification and the fallback of
// a message with blocks.
type Message struct {
	Channel  string  `json:"channel"`
	ThreadTS string  `json:"thread_ts,omitempty"`
	Text     string  `json:"text"`
	Blocks   []Block `json:"blocks,omitempty"`
}

// APIError is Slack's refusal of a call: HTTP 200 with {"ok":false,"error":Code}.
type APIError struct {
	Method string
	Code   string
	// Needed is the scope a missing_scope refusal names, so the operator knows what to add.
	Needed string
}

func (e *APIError) Error() string {
	if e.Needed != "" {
		return fmt.Sprintf("slack %s: %s (needed: %s)", e.Method, e.Code, e.Needed)
	}
	return fmt.Sprintf("slack %s: %s", e.Method, e.Code)
}

// RateLimitedError is a call Slack kept answering 429, or whose wait would end past the
// context's deadline: the caller may try again after RetryAfter.
type RateLimitedError struct {
	Method     string
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("slack %s: rate limited, retry after %s", e.Method, e.RetryAfter)
}

// PostMessage posts m (chat.postMessage) and returns the new message's ts.
func (c *Client) PostMessage(ctx context.Context, m Message) (ts string, err error) {
	var out struct {
		TS string `json:"ts"`
	}
	err = c.call(ctx, "chat.postMessage", m, &out)
	return out.TS, err
}

// UpdateMessage replaces the text and blocks of the message ts in channel with m's (chat.update);
// m.Channel and m.ThreadTS are not used. A message without blocks is sent with an empty list,
// which removes the ones it had: left out, Slack would keep them (an approval's buttons, say).
func (c *Client) UpdateMessage(ctx context.Context, channel, ts string, m Message) error {
	blocks := m.Blocks
	if blocks == nil {
		blocks = []Block{}
	}
	return c.call(ctx, "chat.update", struct {
		Channel string  `json:"channel"`
		TS      string  `json:"ts"`
		Text    string  `json:"text"`
		Blocks  []Block `json:"blocks"`
	}{channel, ts, m.Text, blocks}, nil)
}

// PostEphemeral shows text to user alone in channel, in the thread threadTS when it is set
// (chat.postEphemeral).
func (c *Client) PostEphemeral(ctx context.Context, channel, user, threadTS, text string) error {
	return c.call(ctx, "chat.postEphemeral", struct {
		Channel  string `json:"channel"`
		User     string `json:"user"`
		ThreadTS string `json:"thread_ts,omitempty"`
		Text     string `json:"text"`
	}{channel, user, threadTS, text}, nil)
}

// AuthTest says who the token's bot is (auth.test): its user id, which mentions and messages
// carry, and its bot id, which its own messages carry, so the harness can ignore them.
func (c *Client) AuthTest(ctx context.Context) (botUserID, botID string, err error) {
	var out struct {
		UserID string `json:"user_id"`
		BotID  string `json:"bot_id"`
	}
	err = c.call(ctx, "auth.test", struct{}{}, &out)
	return out.UserID, out.BotID, err
}

// call posts body to method and decodes an ok answer into out (when not nil). A 429 is retried
// after its Retry-After and a 5xx once after serverBackoff, maxAttempts in all, and never into
// ctx's deadline. Errors name the method, never the token.
func (c *Client) call(ctx context.Context, method string, body, out any) error {
	payload, err := marshal(body)
	if err != nil {
		return fmt.Errorf("slack %s: encoding the request: %w", method, err)
	}
	retried5xx := false
	for attempt := 1; ; attempt++ {
		status, header, data, err := c.post(ctx, method, payload)
		if err != nil {
			return err
		}
		var wait time.Duration
		switch {
		case status == http.StatusTooManyRequests:
			var ok bool
			if wait, ok = retryafter.Wait(header); !ok {
				wait = defaultRateWait
			}
			if attempt == maxAttempts || !retryafter.Fits(ctx, wait) {
				return &RateLimitedError{Method: method, RetryAfter: wait}
			}
		case status >= 500:
			if retried5xx || attempt == maxAttempts || !retryafter.Fits(ctx, serverBackoff) {
				return fmt.Errorf("slack %s: HTTP %d", method, status)
			}
			retried5xx, wait = true, serverBackoff
		default:
			return decode(method, status, data, out)
		}
		if err := retryafter.Sleep(ctx, wait); err != nil {
			return fmt.Errorf("slack %s: %w", method, err)
		}
	}
}

// marshal is json.Marshal leaving <, > and & as they are, so that the bodies read as the
// mrkdwn they carry.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// post sends one attempt and reads its answer.
func (c *Client) post(ctx context.Context, method string, payload []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/"+method, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("slack %s: %w", method, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("slack %s: %w", method, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("slack %s: reading the answer: %w", method, err)
	}
	return resp.StatusCode, resp.Header, data, nil
}

// decode reads Slack's answer envelope: {"ok":true,...} into out, {"ok":false,"error":...} as
// an APIError, whatever the HTTP status; anything else is an error naming the status.
func decode(method string, status int, data []byte, out any) error {
	var env struct {
		OK     bool   `json:"ok"`
		Error  string `json:"error"`
		Needed string `json:"needed"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return fmt.Errorf("slack %s: HTTP %d, not a Web API answer: %w", method, status, err)
	}
	switch {
	case !env.OK && env.Error != "":
		return &APIError{Method: method, Code: env.Error, Needed: env.Needed}
	case !env.OK || status != http.StatusOK:
		return fmt.Errorf("slack %s: HTTP %d without ok", method, status)
	case out != nil:
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("slack %s: decoding the answer: %w", method, err)
		}
	}
	return nil
}
