// Command channels talks to an agent the way Slack or Telegram would, against the local stand-in
// of the platform's API that `make dev` serves: it posts a signed message to a channel binding's
// webhook, shows each call the harness makes to the chat (read from the stand-in's GET /calls),
// presses Approve on the approval prompt as the binding's approver, and waits for the answer.
//
// `make dev` binds one channel per platform to its approver agent and prints the command for
// each with every flag filled in, such as
//
//	go run ./examples/channels -platform slack -webhook http://127.0.0.1:3000/channels/chb_… \
//	  -api http://127.0.0.1:PORT -signing-secret … -approver U0DEVUSER -message "Run the nightly build"
//
// Slack's message is an Events API message event in a direct message, signed with the app's
// signing secret, and its press a signed block_actions request. Telegram's message is a private
// chat's message update and its press a callback_query update, both carrying the webhook's
// secret token, which it reads from the stand-in's record of setWebhook. It exits non-zero when
// the webhook refuses a request, or when no prompt or no answer starting "Done:" (the scripted
// approver's) comes within -timeout.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentharness/harness/examples/internal/harnessapi"
	"github.com/agentharness/harness/shared/wire/slack"
	"github.com/agentharness/harness/shared/wire/telegram"
)

// config is what run needs; main fills it from flags.
type config struct {
	Platform      string
	Webhook       string
	API           string
	SigningSecret string
	Approver      string
	Message       string
	Timeout       time.Duration
}

// slackDM is the direct message the Slack messages are in: one conversation, like a real DM.
const slackDM = "D0DEVCHAT"

func main() {
	var cfg config
	flag.StringVar(&cfg.Platform, "platform", "", "slack or telegram")
	flag.StringVar(&cfg.Webhook, "webhook", "", "the binding's webhook URL (its webhookUrl)")
	flag.StringVar(&cfg.API, "api", "", "URL of the platform's local stand-in, whose GET /calls shows what the harness sent")
	flag.StringVar(&cfg.SigningSecret, "signing-secret", "", "Slack: the app's signing secret the binding holds")
	flag.StringVar(&cfg.Approver, "approver", "", "user id of one of the binding's approvers, who sends the message and presses Approve")
	flag.StringVar(&cfg.Message, "message", "Run the nightly build", "the message to send")
	flag.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "how long to wait for the prompt and the answer")
	flag.Parse()
	harnessapi.Main("channels", func(ctx context.Context) error { return run(ctx, cfg, os.Stdout) })
}

// chat is what differs between the platforms: how a message and a press reach the webhook.
type chat interface {
	message(ctx context.Context, text string) error
	// press presses the button carrying data on the message the call prompt posted.
	press(ctx context.Context, prompt call, data string) error
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.Webhook == "" || cfg.API == "" || cfg.Approver == "" || cfg.Message == "" {
		return errors.New("pass -platform, -webhook, -api and -approver (make dev prints the whole command)")
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	calls, err := readCalls(ctx, cfg.API)
	if err != nil {
		return err
	}
	var c chat
	switch cfg.Platform {
	case "slack":
		if cfg.SigningSecret == "" {
			return errors.New("pass -signing-secret: Slack's requests are signed with it")
		}
		c = slackChat{cfg}
	case "telegram":
		if c, err = newTelegramChat(cfg, calls); err != nil {
			return err
		}
	default:
		return fmt.Errorf("-platform is %q, want slack or telegram", cfg.Platform)
	}

	fmt.Fprintf(out, "%s sends %q to %s\n", cfg.Approver, cfg.Message, cfg.Webhook)
	if err := c.message(ctx, cfg.Message); err != nil {
		return err
	}
	// Only the calls that come after the message are this run's.
	seen, pressed, waiting := len(calls), false, "approval prompt"
	for {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("no %s within %s", waiting, cfg.Timeout)
			}
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if calls, err = readCalls(ctx, cfg.API); err != nil {
			continue // the deadline, or a hiccup the next poll gets past
		}
		for _, call := range calls[seen:] {
			s := call.sent()
			fmt.Fprintln(out, call.line(s))
			switch {
			case !pressed && s.approve() != "":
				fmt.Fprintf(out, "%s presses Approve\n", cfg.Approver)
				if err := c.press(ctx, call, s.approve()); err != nil {
					return err
				}
				pressed, waiting = true, `answer starting "Done:"`
			case pressed && strings.Contains(s.Text, "Done:"):
				return nil
			}
		}
		seen = len(calls)
	}
}

type slackChat struct{ cfg config }

func (c slackChat) message(ctx context.Context, text string) error {
	now := time.Now()
	body, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T0FAKE",
		// Slack keeps an event's id on its retries; a new message has a new one.
		"event_id": fmt.Sprintf("Ev%d", now.UnixNano()), "event_time": now.Unix(),
		"event": map[string]any{"type": "message", "channel_type": "im", "channel": slackDM, "user": c.cfg.Approver, "text": text,
			"ts": fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)}})
	return c.post(ctx, "application/json", body)
}

func (c slackChat) press(ctx context.Context, prompt call, value string) error {
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]string{"id": c.cfg.Approver},
		"channel": map[string]string{"id": slackDM}, "message": map[string]string{"ts": prompt.TS},
		"container": map[string]string{"type": "message", "message_ts": prompt.TS, "channel_id": slackDM},
		"actions":   []map[string]string{{"action_id": slack.ActionApprove, "value": value}}})
	return c.post(ctx, "application/x-www-form-urlencoded", []byte("payload="+url.QueryEscape(string(payload))))
}

func (c slackChat) post(ctx context.Context, contentType string, body []byte) error {
	return deliver(ctx, c.cfg.Webhook, contentType, body, slack.Sign(c.cfg.SigningSecret, body, time.Now()))
}

type telegramChat struct {
	cfg config
	// user is the approver's id, and the id of their private chat with the bot.
	user   int64
	secret string
}

// newTelegramChat reads the webhook's secret token from the stand-in's record of the setWebhook
// that registered it.
func newTelegramChat(cfg config, calls []call) (telegramChat, error) {
	user, err := strconv.ParseInt(cfg.Approver, 10, 64)
	if err != nil {
		return telegramChat{}, fmt.Errorf("-approver %q is not a Telegram user id (digits)", cfg.Approver)
	}
	c := telegramChat{cfg: cfg, user: user}
	for _, call := range calls {
		if s := call.sent(); strings.EqualFold(call.Method, "setWebhook") && s.URL == cfg.Webhook {
			c.secret = s.SecretToken
		}
	}
	if c.secret == "" {
		return c, fmt.Errorf("the stand-in at %s saw no setWebhook of %s: call POST /accounts/me/channels/{id}/set-webhook first", cfg.API, cfg.Webhook)
	}
	return c, nil
}

func (c telegramChat) message(ctx context.Context, text string) error {
	id := time.Now().UnixMilli() // a new update_id, which the harness deduplicates by
	return c.update(ctx, map[string]any{"update_id": id, "message": map[string]any{"message_id": id, "date": time.Now().Unix(),
		"text": text, "from": c.from(), "chat": c.chat()}})
}

func (c telegramChat) press(ctx context.Context, prompt call, data string) error {
	id := time.Now().UnixMilli()
	return c.update(ctx, map[string]any{"update_id": id, "callback_query": map[string]any{"id": fmt.Sprint("cq", id), "data": data,
		"from": c.from(), "message": map[string]any{"message_id": prompt.MessageID, "date": time.Now().Unix(), "chat": c.chat()}}})
}

func (c telegramChat) from() map[string]any {
	return map[string]any{"id": c.user, "is_bot": false, "first_name": "Dev"}
}

func (c telegramChat) chat() map[string]any { return map[string]any{"id": c.user, "type": "private"} }

func (c telegramChat) update(ctx context.Context, update map[string]any) error {
	body, _ := json.Marshal(update)
	return deliver(ctx, c.cfg.Webhook, "application/json", body, http.Header{telegram.SecretHeader: {c.secret}})
}

// deliver posts a platform's request to the webhook, which answers 200 once it took it.
func deliver(ctx context.Context, webhook, contentType string, body []byte, h http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, webhook, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = h
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("the webhook answered %d %s", resp.StatusCode, bytes.TrimSpace(answer))
	}
	return nil
}

// call is one call the stand-in recorded.
type call struct {
	Method string          `json:"method"`
	Body   json.RawMessage `json:"body"`
	Status int             `json:"status"`
	Error  string          `json:"error"` // Slack's error code
	// TS (Slack) and MessageID (Telegram) name the message the call posted or edited.
	TS        string `json:"ts"`
	MessageID int    `json:"message_id"`
}

func readCalls(ctx context.Context, api string) ([]call, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(api, "/")+"/calls", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var calls []call
	if err := json.NewDecoder(resp.Body).Decode(&calls); err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/calls = %d: %v", api, resp.StatusCode, err)
	}
	return calls, nil
}

// sent is what the harness sent in a call, of the fields shown here.
type sent struct {
	Text   string `json:"text"`
	Action string `json:"action"` // sendChatAction
	Blocks []struct {
		Elements []button `json:"elements"`
	} `json:"blocks"` // Slack
	ReplyMarkup struct {
		InlineKeyboard [][]button `json:"inline_keyboard"`
	} `json:"reply_markup"` // Telegram
	URL         string `json:"url"`          // setWebhook
	SecretToken string `json:"secret_token"` // setWebhook
}

// button is a Slack block element or a Telegram inline button.
type button struct {
	Text         label  `json:"text"`
	ActionID     string `json:"action_id"`
	Value        string `json:"value"`
	CallbackData string `json:"callback_data"`
}

// label is a button's text: a string (Telegram) or a text object (Slack).
type label string

func (l *label) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*l = label(s)
		return nil
	}
	var obj struct{ Text string }
	err := json.Unmarshal(b, &obj)
	*l = label(obj.Text)
	return err
}

func (c call) sent() sent {
	var s sent
	_ = json.Unmarshal(c.Body, &s) // a body that is not an object shows as nothing
	return s
}

// buttons are the message's buttons: Slack's actions, Telegram's inline keyboard.
func (s sent) buttons() []button {
	var out []button
	for _, b := range s.Blocks {
		for _, e := range b.Elements {
			if e.ActionID != "" {
				out = append(out, e)
			}
		}
	}
	for _, row := range s.ReplyMarkup.InlineKeyboard {
		out = append(out, row...)
	}
	return out
}

// approve is what the message's Approve button carries, "" when it has none: the value of
// Slack's approve action, the callback data of Telegram's first button.
func (s sent) approve() string {
	for _, b := range s.buttons() {
		if b.ActionID == slack.ActionApprove {
			return b.Value
		}
	}
	if k := s.ReplyMarkup.InlineKeyboard; len(k) > 0 && len(k[0]) > 0 {
		return k[0][0].CallbackData
	}
	return ""
}

// line shows a call compactly: its method, the text or action sent, the buttons, a refusal.
func (c call) line(s sent) string {
	detail := s.Action
	if s.Text != "" {
		detail = strconv.Quote(s.Text)
	}
	for _, b := range s.buttons() {
		detail += " [" + string(b.Text) + "]"
	}
	if c.Status != http.StatusOK || c.Error != "" {
		detail += fmt.Sprintf(" (refused: %d %s)", c.Status, c.Error)
	}
	return fmt.Sprintf("%-19s %s", c.Method, detail)
}
