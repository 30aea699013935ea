package telegram

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/faketelegram"
)

// stubbed is a client of srv whose waits are recorded instead of slept. A tenth wait fails
// the call: the policy never waits that often.
func stubbed(srv *httptest.Server, waits *[]time.Duration) *Client {
	c := New(srv.URL, "t:1", nil)
	c.wait = func(_ context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		if len(*waits) >= 10 {
			return errors.New("retrying without end")
		}
		return nil
	}
	return c
}

func TestRateLimitedThreeTimes(t *testing.T) {
	fake := faketelegram.New(&faketelegram.Options{Token: "t:1"})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	var waits []time.Duration
	c := stubbed(srv, &waits)

	fake.RateLimit("sendChatAction", 3, 2*time.Second)
	err := c.SendChatAction(context.Background(), 1, 0, ActionTyping)
	if e, ok := errors.AsType[*RateLimitedError](err); !ok || e.RetryAfter != 2*time.Second || e.Method != "sendChatAction" {
		t.Fatalf("err = %v, want RateLimitedError after 2s", err)
	}
	if want := []time.Duration{2 * time.Second, 2 * time.Second}; !reflect.DeepEqual(waits, want) {
		t.Errorf("waits = %v, want %v (three attempts)", waits, want)
	}
	if n := len(fake.Calls()); n != maxAttempts {
		t.Errorf("%d calls, want %d", n, maxAttempts)
	}

	waits = nil
	fake.RateLimit("sendChatAction", 2, time.Second)
	if err := c.SendChatAction(context.Background(), 1, 0, ActionTyping); err != nil {
		t.Errorf("the third attempt: %v", err)
	}
}

func TestServerErrors(t *testing.T) {
	tests := []struct {
		name    string
		answers []func(http.ResponseWriter)
		want    error
		waits   []time.Duration
	}{
		{
			name:    "a 5xx is retried once",
			answers: []func(http.ResponseWriter){respond(502, `{"ok":false,"error_code":502,"description":"Bad Gateway"}`), respond(200, `{"ok":true,"result":true}`)},
			waits:   []time.Duration{serverBackoff},
		},
		{
			name:    "not twice",
			answers: []func(http.ResponseWriter){respond(500, `{"ok":false,"error_code":500,"description":"Internal Server Error"}`), respond(502, "<html>proxy</html>")},
			want:    &APIError{Method: "sendChatAction", Code: 502, Description: "Bad Gateway"},
			waits:   []time.Duration{serverBackoff},
		},
		{
			name:    "a 429 without retry_after is an APIError",
			answers: []func(http.ResponseWriter){respond(429, `{"ok":false,"error_code":429,"description":"Too Many Requests"}`)},
			want:    &APIError{Method: "sendChatAction", Code: 429, Description: "Too Many Requests"},
		},
		{
			name:    "a 400 is not retried",
			answers: []func(http.ResponseWriter){respond(400, `{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`)},
			want:    &APIError{Method: "sendChatAction", Code: 400, Description: "Bad Request: chat not found"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tt.answers[min(int(n.Add(1))-1, len(tt.answers)-1)](w)
			}))
			defer srv.Close()
			var waits []time.Duration
			err := stubbed(srv, &waits).SendChatAction(context.Background(), 1, 0, ActionTyping)
			if e, ok := errors.AsType[*APIError](err); (tt.want == nil) != (err == nil) || (ok && !reflect.DeepEqual(e, tt.want)) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if !reflect.DeepEqual(waits, tt.waits) {
				t.Errorf("waits = %v, want %v", waits, tt.waits)
			}
		})
	}
}

func respond(status int, body string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.WriteHeader(status)
		w.Write([]byte(body))
	}
}
