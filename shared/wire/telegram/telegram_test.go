package telegram_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/faketelegram"
	"github.com/agentharness/harness/shared/wire/telegram"
)

const (
	token = "7012345678:AAH-test_token-0123456789abcdefghij"
	chat  = int64(-1002233445566)
)

func newFake(t *testing.T) (*faketelegram.Server, *telegram.Client) {
	t.Helper()
	fake := faketelegram.New(&faketelegram.Options{Token: token, BotID: 7012345678, BotUsername: bot})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, telegram.New(srv.URL, token, nil)
}

func TestSendAndEdit(t *testing.T) {
	fake, c := newFake(t)
	ctx := context.Background()
	kb := telegram.ApprovalKeyboard("apv:a1b2c3", "dny:a1b2c3")

	first, err := c.SendMessage(ctx, telegram.Message{ChatID: chat, ThreadID: 42, Text: telegram.HTML("**send_email** wants to run"), ParseMode: telegram.ParseModeHTML, Keyboard: kb})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.SendMessage(ctx, telegram.Message{ChatID: chat, ThreadID: 42, Text: "plain", ReplyTo: first})
	if err != nil {
		t.Fatal(err)
	}
	if first != 1 || second != 2 {
		t.Errorf("message ids = %d, %d; want 1, 2", first, second)
	}
	// The decision replaces the buttons; the same edit again (a retried delivery) is no error.
	decided := telegram.Message{Text: "<b>send_email</b> approved", ParseMode: telegram.ParseModeHTML}
	for range 2 {
		if err := c.EditMessageText(ctx, chat, first, decided); err != nil {
			t.Fatalf("EditMessageText: %v", err)
		}
	}
	want := []faketelegram.Message{
		{MessageID: 1, ThreadID: 42, Text: "<b>send_email</b> approved", ParseMode: "HTML"},
		{MessageID: 2, ThreadID: 42, Text: "plain"},
	}
	if got := fake.Messages(chat); !reflect.DeepEqual(got, want) {
		t.Errorf("Messages = %+v\nwant %+v", got, want)
	}

	calls := fake.Calls()
	var sent struct {
		ReplyMarkup     json.RawMessage `json:"reply_markup"`
		ReplyParameters json.RawMessage `json:"reply_parameters"`
	}
	json.Unmarshal(calls[0].Body, &sent)
	if w := `{"inline_keyboard":[[{"text":"✅ Approve","callback_data":"apv:a1b2c3"},{"text":"❌ Deny","callback_data":"dny:a1b2c3"}]]}`; string(sent.ReplyMarkup) != w {
		t.Errorf("reply_markup = %s, want %s", sent.ReplyMarkup, w)
	}
	json.Unmarshal(calls[1].Body, &sent)
	if w := `{"message_id":1,"allow_sending_without_reply":true}`; string(sent.ReplyParameters) != w {
		t.Errorf("reply_parameters = %s, want %s", sent.ReplyParameters, w)
	}
	if got := calls[len(calls)-1].Status; got != http.StatusBadRequest {
		t.Errorf("the repeated edit answered %d, want the 400 of an unmodified message", got)
	}

	err = c.EditMessageText(ctx, chat, 99, decided)
	if e, ok := errors.AsType[*telegram.APIError](err); !ok || e.Code != 400 || e.Description != "Bad Request: message to edit not found" {
		t.Errorf("editing an unknown message: %v, want APIError 400 message to edit not found", err)
	}
}

func TestSendRefusals(t *testing.T) {
	fake, c := newFake(t)
	ctx := context.Background()
	long := telegram.ApprovalKeyboard(strings.Repeat("x", telegram.MaxCallbackData+1), "d")
	if _, err := c.SendMessage(ctx, telegram.Message{ChatID: chat, Text: "x", Keyboard: long}); err == nil || !strings.Contains(err.Error(), "callback data") {
		t.Errorf("callback data over %d bytes: %v, want it refused", telegram.MaxCallbackData, err)
	}
	if n := len(fake.Calls()); n != 0 {
		t.Errorf("%d calls reached Telegram, want the keyboard refused before", n)
	}
	_, err := c.SendMessage(ctx, telegram.Message{ChatID: chat, Text: "<b>x", ParseMode: telegram.ParseModeHTML})
	if e, ok := errors.AsType[*telegram.APIError](err); !ok || e.Method != "sendMessage" || !strings.HasPrefix(e.Description, "Bad Request: can't parse entities") {
		t.Errorf("invalid HTML: %v, want Telegram's APIError", err)
	}
}

func TestChatActionCallbackWebhookGetMe(t *testing.T) {
	fake, c := newFake(t)
	ctx := context.Background()
	if err := c.SendChatAction(ctx, chat, 42, telegram.ActionTyping); err != nil {
		t.Fatal(err)
	}
	if err := c.AnswerCallbackQuery(ctx, "4382bfdwdsb323b2d9", "Approved", false); err != nil {
		t.Fatal(err)
	}
	secret := telegram.NewSecret()
	if err := c.SetWebhook(ctx, "https://example.com/telegram/bnd_1", secret); err != nil {
		t.Fatal(err)
	}
	me, err := c.GetMe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if me != (telegram.User{ID: 7012345678, IsBot: true, Username: bot, FirstName: bot}) {
		t.Errorf("GetMe = %+v", me)
	}
	wantHook := faketelegram.Webhook{URL: "https://example.com/telegram/bnd_1", SecretToken: secret, AllowedUpdates: []string{"message", "callback_query"}}
	if got := fake.Webhook(); !reflect.DeepEqual(got, wantHook) {
		t.Errorf("Webhook = %+v, want %+v", got, wantHook)
	}
	var bodies []string
	for _, call := range fake.Calls() {
		bodies = append(bodies, call.Method+" "+string(call.Body))
	}
	want := []string{
		`sendChatAction {"chat_id":-1002233445566,"message_thread_id":42,"action":"typing"}`,
		`answerCallbackQuery {"callback_query_id":"4382bfdwdsb323b2d9","text":"Approved"}`,
		`setWebhook {"url":"https://example.com/telegram/bnd_1","secret_token":"` + secret + `","allowed_updates":["message","callback_query"],"drop_pending_updates":false}`,
		`getMe {}`,
	}
	if !reflect.DeepEqual(bodies, want) {
		t.Errorf("calls:\n%s\nwant\n%s", strings.Join(bodies, "\n"), strings.Join(want, "\n"))
	}
}

// The token is in the URL's path: no error may carry it, Telegram's or the transport's.
func TestErrorsHoldNoToken(t *testing.T) {
	fake := faketelegram.New(&faketelegram.Options{Token: "another:token"})
	srv := httptest.NewServer(fake)
	_, err := telegram.New(srv.URL, token, nil).GetMe(context.Background())
	if e, ok := errors.AsType[*telegram.APIError](err); !ok || e.Code != http.StatusUnauthorized || e.Description != "Unauthorized" {
		t.Errorf("wrong token: %v, want APIError 401 Unauthorized", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, errCanceled := telegram.New(srv.URL, token, nil).GetMe(ctx)
	if !errors.Is(errCanceled, context.Canceled) {
		t.Errorf("a canceled call: %v, want context.Canceled kept", errCanceled)
	}
	srv.Close()
	_, errClosed := telegram.New(srv.URL, token, nil).GetMe(context.Background())
	_, errBadURL := telegram.New("http://bad host", token, nil).GetMe(context.Background())
	for _, err := range []error{err, errCanceled, errClosed, errBadURL} {
		if err == nil || strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "AAH-test") {
			t.Errorf("error %q holds the token", err)
		}
	}
}

func TestRateLimitWaitsAndRetries(t *testing.T) {
	fake, c := newFake(t)
	fake.RateLimit("sendMessage", 1, time.Second)
	start := time.Now()
	if _, err := c.SendMessage(context.Background(), telegram.Message{ChatID: chat, Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("retried after %v, want the 1s Telegram asked for", waited)
	}
	var statuses []int
	for _, call := range fake.Calls() {
		statuses = append(statuses, call.Status)
	}
	if !reflect.DeepEqual(statuses, []int{429, 200}) {
		t.Errorf("statuses = %v, want [429 200]", statuses)
	}
}

func TestRateLimitPastTheDeadline(t *testing.T) {
	fake, c := newFake(t)
	fake.RateLimit("sendMessage", 1, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.SendMessage(ctx, telegram.Message{ChatID: chat, Text: "hi"})
	if e, ok := errors.AsType[*telegram.RateLimitedError](err); !ok || e.RetryAfter != 5*time.Second {
		t.Fatalf("err = %v, want RateLimitedError after 5s", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v: a wait past the deadline must not be started", took)
	}
}

func TestVerifySecret(t *testing.T) {
	secret := telegram.NewSecret()
	header := func(v string) http.Header {
		h := http.Header{}
		if v != "" {
			h.Set(telegram.SecretHeader, v)
		}
		return h
	}
	tests := []struct {
		name   string
		h      http.Header
		secret string
		want   error
	}{
		{"good", header(secret), secret, nil},
		{"missing", header(""), secret, telegram.ErrUnsigned},
		{"wrong", header(telegram.NewSecret()), secret, telegram.ErrBadSecret},
		{"prefix", header(secret[:10]), secret, telegram.ErrBadSecret},
		{"binding without a secret", header("x"), "", telegram.ErrBadSecret},
	}
	for _, tt := range tests {
		if got := telegram.VerifySecret(tt.h, tt.secret); got != tt.want {
			t.Errorf("%s: VerifySecret = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNewSecret(t *testing.T) {
	a, b := telegram.NewSecret(), telegram.NewSecret()
	if a == b {
		t.Errorf("two secrets are the same: %q", a)
	}
	for _, s := range []string{a, b} {
		if len(s) < 20 || len(s) > 256 || strings.ContainsFunc(s, func(r rune) bool {
			return !(r == '_' || r == '-' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
		}) {
			t.Errorf("secret %q is not one setWebhook takes", s)
		}
	}
}

func TestKeyboardCheck(t *testing.T) {
	if err := telegram.ApprovalKeyboard(strings.Repeat("a", telegram.MaxCallbackData), "d").Check(); err != nil {
		t.Errorf("%d bytes of callback data: %v", telegram.MaxCallbackData, err)
	}
	// 22 three-byte runes are 66 bytes: the limit is of bytes, not characters.
	for _, data := range []string{"", strings.Repeat("€", 22)} {
		if err := telegram.ApprovalKeyboard("a", data).Check(); err == nil {
			t.Errorf("callback data %q passed", data)
		}
	}
	var none *telegram.InlineKeyboard
	if err := none.Check(); err != nil {
		t.Errorf("nil keyboard: %v", err)
	}
}
