package main

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCheckTurn(t *testing.T) {
	const (
		output = `data: {"type":"tool-output-available","toolCallId":"call_1","output":"12:00"}` + "\n\n"
		finish = `data: {"type":"finish","finishReason":"stop"}` + "\n\n"
		done   = "data: [DONE]\n\n"
	)
	const compaction = `data: {"type":"data-compaction","id":"msg_1","data":{"summary":"s"}}` + "\n\n"
	tests := []struct {
		name            string
		body            string
		wantErr         string // empty: the turn passes
		wantCompactions int
	}{
		{"whole turn", output + finish + done, "", 0},
		{"compacted twice", compaction + output + compaction + finish + done, "", 2},
		{"no tool output", finish + done, "no tool-output-available", 0},
		{"no finish", output + done, "no finish", 0},
		{"no terminator", output + finish, "[DONE]", 0},
		{"error chunk", output + `data: {"type":"error","errorText":"boom"}` + "\n\n" + finish + done, "boom", 0},
		{"finished with an error", output + `data: {"type":"finish","finishReason":"error"}` + "\n\n" + done, "finished with an error", 0},
		{"finish-step is not finish", output + `data: {"type":"finish-step"}` + "\n\n" + done, "no finish", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			compactions, err := checkTurn(strings.NewReader(tt.body))
			if compactions != tt.wantCompactions {
				t.Errorf("checkTurn() = %d compactions, want %d", compactions, tt.wantCompactions)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkTurn() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("checkTurn() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// doerFunc is a DynamoDB HTTP client made of a function.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func TestStorageClockCountsRoundTrips(t *testing.T) {
	release := make(chan struct{})
	c := &storageClock{next: doerFunc(func(*http.Request) (*http.Response, error) {
		<-release
		return &http.Response{StatusCode: 200}, nil
	})}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	var wg sync.WaitGroup
	for range 2 { // sent together: one round trip
		wg.Go(func() { _, _ = c.Do(req) })
	}
	for c.inFlightNow() < 2 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	_, _ = c.Do(req) // then one more on its own
	if _, rounds := c.total(); rounds != 2 {
		t.Errorf("rounds = %d, want 2: two requests in flight together, then one", rounds)
	}
}

// inFlightNow is how many requests are in flight.
func (c *storageClock) inFlightNow() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight
}
