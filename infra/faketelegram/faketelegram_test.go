package faketelegram_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/faketelegram"
)

const token = "123:abc"

// call posts body to method with the JSON content type and returns the status and the answer.
func call(t *testing.T, url, method, body string) (int, map[string]any) {
	t.Helper()
	return do(t, http.MethodPost, url+"/bot"+token+"/"+method, "application/json", body)
}

func do(t *testing.T, httpMethod, url, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(httpMethod, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("answer %s is not a JSON object: %v", raw, err)
	}
	return resp.StatusCode, got
}

func newServer(t *testing.T) (*faketelegram.Server, string) {
	t.Helper()
	s := faketelegram.New(&faketelegram.Options{Token: token, BotID: 123, BotUsername: "HarnessBot"})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func TestRefusals(t *testing.T) {
	_, url := newServer(t)
	call(t, url, "sendMessage", `{"chat_id":5,"text":"first"}`)
	tests := []struct {
		name, method, contentType, body string
		path                            string // instead of /bot<token>/<method>
		status                          int
		description                     string
	}{
		{name: "wrong token", path: "/bot123:wrong/getMe", status: 401, description: "Unauthorized"},
		{name: "no token", path: "/getMe", status: 404, description: "Not Found"},
		{name: "unknown method", method: "sendPhoto", body: `{"chat_id":5}`, status: 404, description: "Not Found"},
		{name: "not JSON", method: "sendMessage", contentType: "application/x-www-form-urlencoded", body: "chat_id=5&text=hi", status: 400, description: "Bad Request: the fake takes JSON bodies only (Content-Type: application/json)"},
		{name: "bad JSON", method: "sendMessage", body: `{"chat_id":5,`, status: 400, description: "Bad Request: can't parse JSON object: unexpected end of JSON input"},
		{name: "no chat", method: "sendMessage", body: `{"text":"hi"}`, status: 400, description: "Bad Request: chat_id is empty"},
		{name: "channel name", method: "sendMessage", body: `{"chat_id":"@news","text":"hi"}`, status: 400, description: "Bad Request: chat not found"},
		{name: "no text", method: "sendMessage", body: `{"chat_id":5}`, status: 400, description: "Bad Request: message text is empty"},
		{name: "only tags", method: "sendMessage", body: `{"chat_id":5,"text":"<b> </b>","parse_mode":"HTML"}`, status: 400, description: "Bad Request: message text is empty"},
		{name: "too long", method: "sendMessage", body: `{"chat_id":5,"text":"` + strings.Repeat("é", 4097) + `"}`, status: 400, description: "Bad Request: message is too long"},
		{name: "bad parse mode", method: "sendMessage", body: `{"chat_id":5,"text":"x","parse_mode":"BBCode"}`, status: 400, description: "Bad Request: unsupported parse_mode"},
		{name: "unknown tag", method: "sendMessage", body: `{"chat_id":5,"text":"a <br> b","parse_mode":"HTML"}`, status: 400, description: `Bad Request: can't parse entities: Unsupported start tag "br" at byte offset 2`},
		{name: "unclosed tag", method: "sendMessage", body: `{"chat_id":5,"text":"<b>x","parse_mode":"HTML"}`, status: 400, description: `Bad Request: can't parse entities: Can't find end tag corresponding to start tag "b"`},
		{name: "long callback data", method: "sendMessage", body: `{"chat_id":5,"text":"x","reply_markup":{"inline_keyboard":[[{"text":"ok","callback_data":"` + strings.Repeat("d", 65) + `"}]]}}`, status: 400, description: "Bad Request: BUTTON_DATA_INVALID"},
		{name: "text button", method: "sendMessage", body: `{"chat_id":5,"text":"x","reply_markup":{"inline_keyboard":[[{"text":"ok"}]]}}`, status: 400, description: "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"},
		{name: "reply to nothing", method: "sendMessage", body: `{"chat_id":5,"text":"x","reply_parameters":{"message_id":9}}`, status: 400, description: "Bad Request: message to be replied not found"},
		{name: "edit unknown", method: "editMessageText", body: `{"chat_id":5,"message_id":9,"text":"x"}`, status: 400, description: "Bad Request: message to edit not found"},
		{name: "edit in another chat", method: "editMessageText", body: `{"chat_id":6,"message_id":1,"text":"x"}`, status: 400, description: "Bad Request: message to edit not found"},
		{name: "edit unchanged", method: "editMessageText", body: `{"chat_id":5,"message_id":1,"text":"first"}`, status: 400, description: "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"},
		{name: "bad action", method: "sendChatAction", body: `{"chat_id":5,"action":"dancing"}`, status: 400, description: "Bad Request: wrong parameter action in request"},
		{name: "no query id", method: "answerCallbackQuery", body: `{"text":"x"}`, status: 400, description: "Bad Request: query is too old and response timeout expired or query ID is invalid"},
		{name: "bad secret token", method: "setWebhook", body: `{"url":"https://e.com","secret_token":"a b"}`, status: 400, description: "Bad Request: secret token contains unallowed characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path
			if path == "" {
				path = "/bot" + token + "/" + tt.method
			}
			ct := tt.contentType
			if ct == "" {
				ct = "application/json"
			}
			status, got := do(t, http.MethodPost, url+path, ct, tt.body)
			want := map[string]any{"ok": false, "error_code": float64(tt.status), "description": tt.description}
			if status != tt.status || !reflect.DeepEqual(got, want) {
				t.Errorf("answer %d %v\nwant %d %v", status, got, tt.status, want)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	s, url := newServer(t)
	keyboard := `{"inline_keyboard":[[{"text":"✅ Approve","callback_data":"apv:1"},{"text":"❌ Deny","callback_data":"dny:1"}]]}`
	status, got := call(t, url, "sendMessage", `{"chat_id":-100123,"message_thread_id":7,"text":"Run <b>send_email</b>? &lt;ok&gt;","parse_mode":"HTML","reply_markup":`+keyboard+`}`)
	if status != 200 {
		t.Fatalf("sendMessage: %d %v", status, got)
	}
	result := got["result"].(map[string]any)
	delete(result, "date")
	want := map[string]any{
		"message_id": float64(1), "message_thread_id": float64(7),
		"from": map[string]any{"id": float64(123), "is_bot": true, "first_name": "HarnessBot", "username": "HarnessBot"},
		"chat": map[string]any{"id": float64(-100123), "type": "group"},
		"text": "Run send_email? <ok>",
		"reply_markup": map[string]any{"inline_keyboard": []any{[]any{
			map[string]any{"text": "✅ Approve", "callback_data": "apv:1"},
			map[string]any{"text": "❌ Deny", "callback_data": "dny:1"},
		}}},
	}
	if !reflect.DeepEqual(result, want) {
		t.Errorf("sendMessage result = %v\nwant %v", result, want)
	}
	call(t, url, "sendMessage", `{"chat_id":"-100123","text":"second"}`)
	call(t, url, "sendMessage", `{"chat_id":42,"text":"elsewhere"}`)
	// An edit without reply_markup removes the keyboard.
	if status, got := call(t, url, "editMessageText", `{"chat_id":-100123,"message_id":1,"text":"<i>approved</i>","parse_mode":"HTML"}`); status != 200 {
		t.Fatalf("editMessageText: %d %v", status, got)
	}

	wantMsgs := []faketelegram.Message{
		{MessageID: 1, ThreadID: 7, Text: "<i>approved</i>", ParseMode: "HTML"},
		{MessageID: 2, Text: "second"},
	}
	if got := s.Messages(-100123); !reflect.DeepEqual(got, wantMsgs) {
		t.Errorf("Messages = %+v\nwant %+v", got, wantMsgs)
	}
	if got := s.Messages(42); len(got) != 1 || got[0].MessageID != 1 {
		t.Errorf("another chat's messages = %+v, want its own ids from 1", got)
	}
}

func TestOtherMethods(t *testing.T) {
	s, url := newServer(t)
	for _, c := range []struct{ method, body, result string }{
		{"sendChatAction", `{"chat_id":5,"message_thread_id":3,"action":"typing"}`, "true"},
		{"answerCallbackQuery", `{"callback_query_id":"q1","text":"Approved"}`, "true"},
		{"setWebhook", `{"url":"https://e.com/hook","secret_token":"s-1_A","allowed_updates":["message","callback_query"]}`, "true"},
		{"getMe", ``, `{"first_name":"HarnessBot","id":123,"is_bot":true,"username":"HarnessBot"}`},
		{"GETME", `{}`, `{"first_name":"HarnessBot","id":123,"is_bot":true,"username":"HarnessBot"}`},
	} {
		status, got := call(t, url, c.method, c.body)
		result, _ := json.Marshal(got["result"])
		if status != 200 || string(result) != c.result {
			t.Errorf("%s: %d %v, want 200 with result %s", c.method, status, got, c.result)
		}
	}
	want := faketelegram.Webhook{URL: "https://e.com/hook", SecretToken: "s-1_A", AllowedUpdates: []string{"message", "callback_query"}}
	if got := s.Webhook(); !reflect.DeepEqual(got, want) {
		t.Errorf("Webhook = %+v, want %+v", got, want)
	}
}

func TestRateLimit(t *testing.T) {
	s, url := newServer(t)
	// 1.2s is asked for in whole seconds, rounded up.
	s.RateLimit("sendMessage", 2, 1200*time.Millisecond)
	want := map[string]any{"ok": false, "error_code": float64(429), "description": "Too Many Requests: retry after 2", "parameters": map[string]any{"retry_after": float64(2)}}
	for range 2 {
		if status, got := call(t, url, "sendMessage", `{"chat_id":5,"text":"x"}`); status != 429 || !reflect.DeepEqual(got, want) {
			t.Errorf("limited call: %d %v, want 429 %v", status, got, want)
		}
	}
	if status, _ := call(t, url, "sendChatAction", `{"chat_id":5,"action":"typing"}`); status != 200 {
		t.Errorf("another method was limited too: %d", status)
	}
	if status, _ := call(t, url, "sendMessage", `{"chat_id":5,"text":"x"}`); status != 200 {
		t.Errorf("the third call: %d, want 200", status)
	}
	s.RateLimit("getMe", 1, 0)
	if _, got := call(t, url, "getMe", ``); got["description"] != "Too Many Requests: retry after 1" {
		t.Errorf("a zero wait: %v, want retry after 1, the least", got)
	}
}

func TestCalls(t *testing.T) {
	s, url := newServer(t)
	call(t, url, "sendMessage", `{"chat_id":5,"text":"hi"}`)
	do(t, http.MethodPost, url+"/bot"+token+"/sendMessage", "text/plain", "not json")
	do(t, http.MethodPost, url+"/botwrong/getMe", "", "")

	calls := s.Calls()
	type short struct {
		Method string
		Body   string
		Status int
	}
	var got []short
	for _, c := range calls {
		if c.At.IsZero() {
			t.Errorf("call %s has no time", c.Method)
		}
		got = append(got, short{c.Method, string(c.Body), c.Status})
	}
	want := []short{{"sendMessage", `{"chat_id":5,"text":"hi"}`, 200}, {"sendMessage", `"not json"`, 400}, {"getMe", "", 401}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Calls = %+v\nwant %+v", got, want)
	}
	if calls[0].MessageID != 1 || calls[1].MessageID != 0 {
		t.Errorf("the calls name messages %d and %d, want the one sent (1) and none", calls[0].MessageID, calls[1].MessageID)
	}

	// GET /calls needs no token and answers the same calls.
	req, _ := http.NewRequest(http.MethodGet, url+"/calls", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var listed []faketelegram.Call
	if err := json.NewDecoder(resp.Body).Decode(&listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 3 || listed[0].Method != "sendMessage" || string(listed[1].Body) != `"not json"` || listed[2].Status != 401 {
		t.Errorf("GET /calls = %+v", listed)
	}
}

func TestTokenRequired(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New without a token did not panic")
		}
	}()
	faketelegram.New(&faketelegram.Options{})
}
