package chathttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/model"
)

// A client that disconnects cancels its SSE turn: the event reads "cancelled" with an error
// that says so, its messages are what the turn saved (the user message), and the conversation
// is free for the next turn.
func TestSSEDisconnectCancelsTheTurn(t *testing.T) {
	m := &heldModel{entered: make(chan struct{}), release: make(chan struct{})}
	defer close(m.release)
	f := newFixture(t, m)

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/", strings.NewReader(`{"agentId":"demo","id":"gone","eventId":"ev-gone","message":"hello?"}`))
	req.Header.Set("Authorization", "Bearer "+f.secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the model was never called")
	}
	cancel()
	res.Body.Close()

	var st struct {
		Status   string
		Error    string
		Messages []model.Message
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.Status == "" || st.Status == "processing" {
		if time.Now().After(deadline) {
			t.Fatalf("the event never left processing: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
		status, body := call(t, f.srv, "GET", "/status/ev-gone", f.secret, "")
		if status != http.StatusOK {
			t.Fatalf("GET /status = %d %s", status, body)
		}
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
	}
	if st.Status != "cancelled" || !strings.Contains(st.Error, "disconnected") {
		t.Errorf("status %q error %q, want cancelled with an error naming the disconnect", st.Status, st.Error)
	}
	if len(st.Messages) != 1 || st.Messages[0].Role != model.RoleUser || st.Messages[0].Text() != "hello?" {
		t.Errorf("messages %+v, want the saved user message", st.Messages)
	}
	if got := history(t, f, "gone"); len(got) != 1 {
		t.Errorf("the conversation holds %d messages, want the user message", len(got))
	}
}
