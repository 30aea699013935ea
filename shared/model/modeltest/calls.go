package modeltest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
)

// User is a user message of one text part.
func User(text string) model.Message {
	return model.Message{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: text}}}
}

// Collect ranges over one Stream call and returns its events and the error that ended it.
func Collect(ctx context.Context, m agent.Model, req *model.Request) ([]model.Event, error) {
	var events []model.Event
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			return events, err
		}
		events = append(events, ev)
	}
	return events, nil
}

// CheckBreaks ranges over req's stream n times, breaking after 1, 2, … n events: each must stop
// where its consumer broke, without an error (a yield after a break panics).
func CheckBreaks(t *testing.T, m agent.Model, req *model.Request, n int) {
	t.Helper()
	for stop := 1; stop <= n; stop++ {
		seen := 0
		for _, err := range m.Stream(t.Context(), req) {
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			seen++
			if seen == stop {
				break
			}
		}
		if seen != stop {
			t.Errorf("consumer breaking after %d events saw %d", stop, seen)
		}
	}
}

// ProviderError asserts that err is a *model.ProviderError of provider, and returns it.
func ProviderError(t *testing.T, err error, provider string) *model.ProviderError {
	t.Helper()
	var pe *model.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("Stream error = %v (%T), want a *model.ProviderError", err, err)
	}
	if pe.Provider != provider {
		t.Errorf("Provider = %q, want %s", pe.Provider, provider)
	}
	return pe
}

// ContextLengthError asserts that err is provider's refusal of a request longer than its
// model's context window: a *model.ProviderError of status 400 that is model.ErrContextLength
// and says so without the provider's words. It returns it.
func ContextLengthError(t *testing.T, err error, provider string) *model.ProviderError {
	t.Helper()
	pe := ProviderError(t, err, provider)
	if !errors.Is(err, model.ErrContextLength) || pe.Status != http.StatusBadRequest {
		t.Errorf("ContextLength, Status = %v, %d; want true, 400 (error: %v)", pe.ContextLength, pe.Status, err)
	}
	if got, want := pe.Public(), "the conversation is longer than the "+provider+" model's context window"; got != want {
		t.Errorf("Public() = %q, want %q", got, want)
	}
	return pe
}

// CheckRefused runs req, which the adapter cannot express: it must fail with an error containing
// want, with no event, before srv sees a request.
func CheckRefused(t *testing.T, m agent.Model, srv *Server, req *model.Request, want string) {
	t.Helper()
	events, err := Collect(t.Context(), m, req)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Stream error = %v, want one containing %q", err, want)
	}
	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("server saw %d requests, want none", n)
	}
}

// CheckNew checks what an adapter's New returned: a model when wantErr is empty, else no model
// and an error containing wantErr.
func CheckNew[M any](t *testing.T, m *M, err error, wantErr string) {
	t.Helper()
	if wantErr == "" {
		if err != nil || m == nil {
			t.Errorf("New() = %v, %v; want a model", m, err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Errorf("New() error = %v, want one containing %q", err, wantErr)
	}
	if m != nil {
		t.Errorf("New() model = %v, want nil on error", m)
	}
}

// APIKey is the provider's real key, read from variable, when the test records its fixtures
// (wirefixture.Recording), and "test-key" when it replays them. A recording without the key
// stops the test before it can rewrite a fixture.
func APIKey(t *testing.T, variable string) string {
	t.Helper()
	if !wirefixture.Recording() {
		return "test-key"
	}
	key := os.Getenv(variable)
	if key == "" {
		t.Fatalf("-record calls the provider's real API: set %s", variable)
	}
	return key
}

// Decode decodes JSON text into the maps and slices cmp compares.
func Decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
	return v
}

// Assistant is the assistant message the agent loop keeps of an answer's events, for adapters'
// tests of a second step: each piece of reasoning a part at its start (a piece ends at its
// EventReasoningEnd or when other content streams), then the text, then the tool calls, with
// the signatures and providers the events carried.
func Assistant(events []model.Event) model.Message {
	var reasoning, calls []model.Part
	var text strings.Builder
	open := false
	for _, ev := range events {
		switch ev.Type {
		case model.EventReasoningDelta:
			if !open {
				reasoning = append(reasoning, model.Part{Type: model.PartReasoning})
				open = true
			}
			reasoning[len(reasoning)-1].Text += ev.Text
		case model.EventReasoningEnd:
			if !open {
				reasoning = append(reasoning, model.Part{Type: model.PartReasoning})
			}
			r := &reasoning[len(reasoning)-1]
			r.Signature, r.Redacted, r.Provider = ev.Signature, ev.Redacted, ev.Provider
			open = false
		case model.EventTextDelta:
			open = false
			text.WriteString(ev.Text)
		case model.EventToolCall:
			open = false
			calls = append(calls, model.Part{Type: model.PartToolCall, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Input: ev.Input, Signature: ev.Signature, Provider: ev.Provider})
		}
	}
	parts := reasoning
	if text.Len() > 0 {
		parts = append(parts, model.Part{Type: model.PartText, Text: text.String()})
	}
	return model.Message{Role: model.RoleAssistant, Parts: append(parts, calls...)}
}
