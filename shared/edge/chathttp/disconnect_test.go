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

// A client that disconnects does not cancel its SSE turn: the turn runs to its end (its output
// stays readable at the resume route), the event reads "completed" with the whole answer, and
// the conversation is free for the next turn.
func TestSSEDisconnectLeavesTheTurnRunning(t *testing.T) {
	m := &heldModel{entered: make(chan struct{}), release: make(chan struct{})}
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
	time.Sleep(100 * time.Millisecond) // the server sees the disconnect
	close(m.release)

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
		status, body := f.call(t, "GET", "/status/ev-gone", f.secret, "")
		if status != http.StatusOK {
			t.Fatalf("GET /status = %d %s", status, body)
		}
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
	}
	if st.Status != "completed" || st.Error != "" {
		t.Errorf("status %q error %q, want completed", st.Status, st.Error)
	}
	if len(st.Messages) != 2 || st.Messages[0].Text() != "hello?" || st.Messages[1].Text() != "released" {
		t.Errorf("messages %+v, want the user message and the whole answer", st.Messages)
	}
	if got := history(t, f, "gone"); len(got) != 2 {
		t.Errorf("the conversation holds %d messages, want the user message and the answer", len(got))
	}
}
