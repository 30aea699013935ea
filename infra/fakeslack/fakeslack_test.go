package fakeslack_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentharness/harness/infra/fakeslack"
	"github.com/agentharness/harness/shared/wire/slack"
)

const token = "xoxb-fake"

// call posts body to the method with the content type and token given (none when empty) and
// returns the HTTP status, the Retry-After header and the decoded answer.
func call(t *testing.T, base, method, contentType, tok, body string) (int, string, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/api/"+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("answer %s is not JSON: %v", raw, err)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), got
}

const jsonType = "application/json; charset=utf-8"

func TestRefusals(t *testing.T) {
	fake := fakeslack.New(&fakeslack.Options{BotToken: token})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	_, _, posted := call(t, srv.URL, "chat.postMessage", jsonType, token, `{"channel":"C1","text":"hi"}`)
	ts := posted["ts"].(string)
	_, _, shown := call(t, srv.URL, "chat.postEphemeral", jsonType, token, `{"channel":"C1","user":"U1","text":"psst"}`)
	ephemeral := shown["message_ts"].(string)

	button := func(value string) string {
		return `{"channel":"C1","text":"t","blocks":[{"type":"actions","elements":[{"type":"button","text":{"type":"plain_text","text":"OK"},"action_id":"approve","value":"` + value + `"}]}]}`
	}
	tests := []struct {
		name, method, contentType, token, body, want string
	}{
		{"no token", "chat.postMessage", jsonType, "", `{"channel":"C1","text":"hi"}`, "not_authed"},
		{"wrong token", "chat.postMessage", jsonType, "xoxb-other", `{"channel":"C1","text":"hi"}`, "invalid_auth"},
		{"unknown method", "chat.delete", jsonType, token, `{}`, "unknown_method"},
		{"form body", "chat.postMessage", "application/x-www-form-urlencoded", token, `channel=C1&text=hi`, "invalid_post_type"},
		{"no content type", "chat.postMessage", "", token, `{"channel":"C1","text":"hi"}`, "invalid_post_type"},
		{"bad JSON", "chat.postMessage", jsonType, token, `{"channel":`, "invalid_json"},
		{"no channel", "chat.postMessage", jsonType, token, `{"text":"hi"}`, "channel_not_found"},
		{"no text", "chat.postMessage", jsonType, token, `{"channel":"C1"}`, "no_text"},
		{"empty blocks are no text", "chat.postMessage", jsonType, token, `{"channel":"C1","blocks":[]}`, "no_text"},
		{"text too long", "chat.postMessage", jsonType, token, `{"channel":"C1","text":"` + strings.Repeat("x", 40001) + `"}`, "msg_too_long"},
		{"thread_ts not a ts", "chat.postMessage", jsonType, token, `{"channel":"C1","text":"hi","thread_ts":"C1"}`, "invalid_thread_ts"},
		{"section over 3000", "chat.postMessage", jsonType, token, `{"channel":"C1","text":"t","blocks":[{"type":"section","text":{"type":"mrkdwn","text":"` + strings.Repeat("x", 3001) + `"}}]}`, "invalid_blocks"},
		{"section without text", "chat.postMessage", jsonType, token, `{"channel":"C1","text":"t","blocks":[{"type":"section"}]}`, "invalid_blocks"},
		{"button value over 2000", "chat.postMessage", jsonType, token, button(strings.Repeat("v", 2001)), "invalid_blocks"},
		{"blocks not a list", "chat.postMessage", jsonType, token, `{"channel":"C1","text":"t","blocks":{"type":"section"}}`, "invalid_blocks"},
		{"update without ts", "chat.update", jsonType, token, `{"channel":"C1","text":"x"}`, "message_not_found"},
		{"update of another channel's ts", "chat.update", jsonType, token, `{"channel":"C2","ts":"` + ts + `","text":"x"}`, "message_not_found"},
		{"update of an ephemeral message", "chat.update", jsonType, token, `{"channel":"C1","ts":"` + ephemeral + `","text":"x"}`, "message_not_found"},
		{"update without text", "chat.update", jsonType, token, `{"channel":"C1","ts":"` + ts + `"}`, "no_text"},
		{"ephemeral without user", "chat.postEphemeral", jsonType, token, `{"channel":"C1","text":"hi"}`, "user_not_found"},
		{"ephemeral without channel", "chat.postEphemeral", jsonType, token, `{"user":"U1","text":"hi"}`, "channel_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, got := call(t, srv.URL, tt.method, tt.contentType, tt.token, tt.body)
			if status != http.StatusOK || got["ok"] != false || got["error"] != tt.want {
				t.Errorf("answered %d %v, want 200 with error %s", status, got, tt.want)
			}
		})
	}
	if n := len(fake.Messages("C1")); n != 2 {
		t.Errorf("%d messages kept, want only the first two", n)
	}
	if n := len(fake.Calls()); n != len(tests)+2 {
		t.Errorf("%d calls recorded, want %d", n, len(tests)+2)
	}
}

func TestAnswers(t *testing.T) {
	fake := fakeslack.New(&fakeslack.Options{BotToken: token, BotUserID: "U0BOT", BotID: "B0BOT", TeamID: "T0TEAM"})
	srv := httptest.NewServer(fake)
	defer srv.Close()

	_, _, got := call(t, srv.URL, "chat.postMessage", jsonType, token, `{"channel":"C1","thread_ts":"1.5","text":"hi"}`)
	want := map[string]any{"ok": true, "channel": "C1", "ts": "1700000000.000100", "message": map[string]any{
		"type": "message", "user": "U0BOT", "bot_id": "B0BOT", "text": "hi", "ts": "1700000000.000100", "thread_ts": "1.5",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chat.postMessage (-want +got):\n%s", diff)
	}
	_, _, got = call(t, srv.URL, "chat.update", jsonType, token, `{"channel":"C1","ts":"1700000000.000100","text":"bye"}`)
	if got["ok"] != true || got["ts"] != "1700000000.000100" || got["text"] != "bye" {
		t.Errorf("chat.update = %v", got)
	}
	_, _, got = call(t, srv.URL, "chat.postEphemeral", jsonType, token, `{"channel":"C1","user":"U1","text":"psst"}`)
	if diff := cmp.Diff(map[string]any{"ok": true, "message_ts": "1700000000.000200"}, got); diff != "" {
		t.Errorf("chat.postEphemeral (-want +got):\n%s", diff)
	}
	_, _, got = call(t, srv.URL, "auth.test", jsonType, token, `{}`)
	if got["ok"] != true || got["user_id"] != "U0BOT" || got["bot_id"] != "B0BOT" || got["team_id"] != "T0TEAM" {
		t.Errorf("auth.test = %v", got)
	}
}

// An update with blocks replaces them, an empty list removes them, none keeps them, as on Slack.
func TestUpdateBlocks(t *testing.T) {
	fake := fakeslack.New(nil)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	section := func(text string) string {
		return `[{"type":"section","text":{"type":"mrkdwn","text":"` + text + `"}}]`
	}
	call(t, srv.URL, "chat.postMessage", jsonType, "any-token", `{"channel":"C1","text":"a","blocks":`+section("a")+`}`)
	ts := "1700000000.000100"
	for _, step := range []struct{ body, want string }{
		{`{"channel":"C1","ts":"` + ts + `","text":"b","blocks":` + section("b") + `}`, section("b")},
		{`{"channel":"C1","ts":"` + ts + `","text":"c"}`, section("b")},
		{`{"channel":"C1","ts":"` + ts + `","text":"d","blocks":[]}`, ""},
	} {
		if _, _, got := call(t, srv.URL, "chat.update", jsonType, "any-token", step.body); got["ok"] != true {
			t.Fatalf("update %s: %v", step.body, got)
		}
		if got := string(fake.Messages("C1")[0].Blocks); got != step.want {
			t.Errorf("after %s: blocks %s, want %s", step.body, got, step.want)
		}
	}
}

func TestRateLimit(t *testing.T) {
	fake := fakeslack.New(nil)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	fake.RateLimit("chat.postMessage", 2, 1500*time.Millisecond)
	body := `{"channel":"C1","text":"hi"}`
	for i, want := range []int{429, 429, 200} {
		status, retryAfter, got := call(t, srv.URL, "chat.postMessage", jsonType, "t", body)
		if status != want {
			t.Errorf("call %d: %d, want %d", i, status, want)
		}
		if want == 429 && (retryAfter != "2" || got["error"] != "ratelimited") {
			t.Errorf("call %d: Retry-After %q and %v, want 2 (whole seconds, rounded up) and ratelimited", i, retryAfter, got)
		}
	}
	if status, _, _ := call(t, srv.URL, "chat.update", jsonType, "t", `{}`); status != 200 {
		t.Errorf("another method was limited too: %d", status)
	}
}

func TestCallsEndpoint(t *testing.T) {
	fake := fakeslack.New(nil)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	call(t, srv.URL, "chat.postMessage", jsonType, "t", `{"channel":"C1","text":"hi"}`)
	call(t, srv.URL, "chat.postMessage", "text/plain", "t", `not json`)

	resp, err := http.Get(srv.URL + "/calls")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []fakeslack.Call
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i].At.IsZero() {
			t.Errorf("call %d has no time", i)
		}
		got[i].At = time.Time{}
	}
	want := []fakeslack.Call{
		{Method: "chat.postMessage", Body: json.RawMessage(`{"channel":"C1","text":"hi"}`), Status: 200, TS: fake.Messages("C1")[0].TS},
		{Method: "chat.postMessage", Body: json.RawMessage(`"not json"`), Status: 200, Error: "invalid_post_type"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET /calls (-want +got):\n%s", diff)
	}
}

// Sign signs as Slack does, with the configured secret, so slack.Verify accepts it.
func TestSign(t *testing.T) {
	fake := fakeslack.New(&fakeslack.Options{SigningSecret: "shh"})
	body := []byte(`{"type":"url_verification","challenge":"c"}`)
	now := time.Now()
	if err := slack.Verify("shh", fake.Sign(body, now), body, now); err != nil {
		t.Error(err)
	}
}
