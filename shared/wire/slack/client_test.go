package slack_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentharness/harness/infra/fakeslack"
	"github.com/agentharness/harness/shared/wire/slack"
)

const token = "xoxb-test-token"

// jsonEqual compares JSON by value, not by its spelling.
var jsonEqual = cmp.Transformer("json", func(raw json.RawMessage) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return v
})

// newFake serves a Slack stand-in and returns it, a client of it and its base URL.
func newFake(t *testing.T) (*fakeslack.Server, *slack.Client, string) {
	t.Helper()
	fake := fakeslack.New(&fakeslack.Options{BotToken: token, BotUserID: botUserID, BotID: botID})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, slack.New(srv.URL+"/api", token, nil), srv.URL + "/api"
}

func TestPostUpdateEphemeral(t *testing.T) {
	fake, c, _ := newFake(t)
	ctx := context.Background()

	ts, err := c.PostMessage(ctx, slack.Message{Channel: "C1", ThreadTS: "1515449522.000016", Text: "Thinking…"})
	if err != nil {
		t.Fatal(err)
	}
	blocks := slack.ApprovalBlocks("Approve *tavilySearch*?", `{"query":"go"}`, "apr_1", "apr_1")
	approval, err := c.PostMessage(ctx, slack.Message{Channel: "C1", ThreadTS: "1515449522.000016", Text: "Approve tavilySearch?", Blocks: blocks})
	if err != nil {
		t.Fatal(err)
	}
	if ts == "" || approval <= ts {
		t.Fatalf("ts %q then %q, want increasing", ts, approval)
	}
	if err := c.UpdateMessage(ctx, "C1", ts, slack.Message{Text: "The answer."}); err != nil {
		t.Fatal(err)
	}
	decided := slack.DecidedBlocks("Approve *tavilySearch*?", `{"query":"go"}`, "Approved by <@U061F7AUR>")
	if err := c.UpdateMessage(ctx, "C1", approval, slack.Message{Text: "Approved", Blocks: decided}); err != nil {
		t.Fatal(err)
	}
	if err := c.PostEphemeral(ctx, "C1", "U061F7AUR", "1515449522.000016", "Only you can see this."); err != nil {
		t.Fatal(err)
	}

	decidedJSON, _ := json.Marshal(decided)
	got := fake.Messages("C1")
	want := []fakeslack.Message{
		{TS: ts, ThreadTS: "1515449522.000016", Text: "The answer."},
		{TS: approval, ThreadTS: "1515449522.000016", Text: "Approved", Blocks: decidedJSON},
		{TS: got[len(got)-1].TS, ThreadTS: "1515449522.000016", Text: "Only you can see this.", User: "U061F7AUR"},
	}
	if diff := cmp.Diff(want, got, jsonEqual); diff != "" {
		t.Errorf("Messages (-want +got):\n%s", diff)
	}
	var methods []string
	for _, call := range fake.Calls() {
		methods = append(methods, call.Method)
		if call.Status != http.StatusOK || call.Error != "" {
			t.Errorf("%s answered %d %q", call.Method, call.Status, call.Error)
		}
	}
	if diff := cmp.Diff([]string{"chat.postMessage", "chat.postMessage", "chat.update", "chat.update", "chat.postEphemeral"}, methods); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestAuthTest(t *testing.T) {
	_, c, _ := newFake(t)
	user, bot, err := c.AuthTest(context.Background())
	if err != nil || user != botUserID || bot != botID {
		t.Errorf("AuthTest = %q, %q, %v; want %q, %q", user, bot, err, botUserID, botID)
	}
}

func TestAPIError(t *testing.T) {
	_, right, base := newFake(t)
	ctx := context.Background()

	wrong := slack.New(base, "xoxb-wrong-token", nil)
	_, err := wrong.PostMessage(ctx, slack.Message{Channel: "C1", Text: "hi"})
	var apiErr *slack.APIError
	if !errors.As(err, &apiErr) || *apiErr != (slack.APIError{Method: "chat.postMessage", Code: "invalid_auth"}) {
		t.Fatalf("with a wrong token: %v, want an APIError invalid_auth", err)
	}
	if strings.Contains(err.Error(), "xoxb") {
		t.Errorf("the error names the token: %v", err)
	}

	err = right.UpdateMessage(ctx, "C1", "1700000000.999999", slack.Message{Text: "x"})
	if !errors.As(err, &apiErr) || apiErr.Code != "message_not_found" || err.Error() != "slack chat.update: message_not_found" {
		t.Errorf("updating an unknown message: %v", err)
	}
}

// Slack's missing_scope refusal names the scope to add.
func TestAPIErrorNeeded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"ok":false,"error":"missing_scope","needed":"chat:write","provided":"users:read"}`))
	}))
	defer srv.Close()
	_, err := slack.New(srv.URL, token, nil).PostMessage(context.Background(), slack.Message{Channel: "C1", Text: "hi"})
	if err == nil || err.Error() != "slack chat.postMessage: missing_scope (needed: chat:write)" {
		t.Errorf("err = %v", err)
	}
}

func TestRateLimitHonoured(t *testing.T) {
	fake, c, _ := newFake(t)
	fake.RateLimit("chat.postMessage", 1, time.Second)
	start := time.Now()
	if _, err := c.PostMessage(context.Background(), slack.Message{Channel: "C1", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("retried after %s, before the 1s Retry-After", waited)
	}
	calls := fake.Calls()
	if len(calls) != 2 || calls[0].Status != http.StatusTooManyRequests || calls[1].Status != http.StatusOK {
		t.Errorf("calls = %+v, want a 429 then a 200", calls)
	}
	if n := len(fake.Messages("C1")); n != 1 {
		t.Errorf("%d messages posted, want 1", n)
	}
}

func TestRateLimitGivesUp(t *testing.T) {
	t.Run("after three attempts", func(t *testing.T) {
		fake, c, _ := newFake(t)
		fake.RateLimit("chat.postMessage", 5, 0)
		_, err := c.PostMessage(context.Background(), slack.Message{Channel: "C1", Text: "hi"})
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) || rl.Method != "chat.postMessage" {
			t.Fatalf("err = %v, want a RateLimitedError", err)
		}
		if n := len(fake.Calls()); n != 3 {
			t.Errorf("%d attempts, want 3", n)
		}
	})
	t.Run("when the wait would pass the deadline", func(t *testing.T) {
		fake, c, _ := newFake(t)
		fake.RateLimit("chat.update", 1, 30*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err := c.UpdateMessage(ctx, "C1", "1700000000.000100", slack.Message{Text: "x"})
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) || rl.RetryAfter != 30*time.Second {
			t.Fatalf("err = %v, want a RateLimitedError with Slack's 30s", err)
		}
		if waited := time.Since(start); waited > time.Second {
			t.Errorf("gave up after %s, want at once", waited)
		}
		if n := len(fake.Calls()); n != 1 {
			t.Errorf("%d attempts, want 1", n)
		}
	})
}

func TestServerErrorRetriedOnce(t *testing.T) {
	for _, tt := range []struct {
		name     string
		failures int32
		wantErr  bool
	}{
		{"one 5xx is retried", 1, false},
		{"a second 5xx is not", 2, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) <= tt.failures {
					w.WriteHeader(http.StatusBadGateway)
					return
				}
				w.Write([]byte(`{"ok":true,"channel":"C1","ts":"1700000000.000100"}`))
			}))
			defer srv.Close()
			ts, err := slack.New(srv.URL, token, nil).PostMessage(context.Background(), slack.Message{Channel: "C1", Text: "hi"})
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
			if !tt.wantErr && ts != "1700000000.000100" {
				t.Errorf("ts = %q", ts)
			}
			if tt.wantErr && !strings.Contains(err.Error(), "HTTP 502") {
				t.Errorf("err = %v, want it to name the status", err)
			}
			if n := calls.Load(); n != 2 {
				t.Errorf("%d attempts, want 2", n)
			}
		})
	}
}

// The client sends what Slack's JSON methods expect; the fake refuses anything else, so the
// tests above passing shows most of it. These are what the fake does not check.
func TestRequestShape(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	if err := slack.New(srv.URL+"/", token, nil).UpdateMessage(context.Background(), "C1", "1.2", slack.Message{Channel: "ignored", Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if got.Method != http.MethodPost || got.URL.Path != "/chat.update" {
		t.Errorf("%s %s, want POST /chat.update", got.Method, got.URL.Path)
	}
	if h := got.Header.Get("Authorization"); h != "Bearer "+token {
		t.Errorf("Authorization = %q", h)
	}
	if h := got.Header.Get("Content-Type"); h != "application/json; charset=utf-8" {
		t.Errorf("Content-Type = %q", h)
	}
	// An update without blocks removes the message's old ones (an approval's buttons).
	if want := `{"channel":"C1","ts":"1.2","text":"x","blocks":[]}`; string(body) != want {
		t.Errorf("body = %s, want %s", body, want)
	}
}
