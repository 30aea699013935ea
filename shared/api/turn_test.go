package api_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/google/go-cmp/cmp"
)

// failingProvider fails as a provider adapter does: with a *model.ProviderError whose own text
// carries the provider's words.
type failingProvider struct{ status int }

func (m failingProvider) Stream(context.Context, *model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		yield(model.Event{}, &model.ProviderError{Provider: "anthropic", Status: m.status, RequestID: "req_1",
			Err: errors.New("prompt echo: the user's private text")})
	}
}

func TestProviderErrorsReachTheClientSafely(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{429, "the anthropic model is rate limited; try again shortly"},
		{529, "the anthropic model is unavailable (HTTP 529); try again shortly"},
		{401, "the anthropic model refused the harness's credentials"},
		{400, "the anthropic model rejected the request (HTTP 400)"},
		{0, "the anthropic model could not be reached"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			f := newFixture(t, failingProvider{status: tt.status})
			cs := chunks(t, f.post(t, f.secret, `{"agentId":"demo","id":"c","message":"hi"}`))
			if diff := cmp.Diff([]string{"start", "start-step", "error", "finish"}, types(cs)); diff != "" {
				t.Fatalf("chunk types (-want +got):\n%s", diff)
			}
			text := cs[2]["errorText"].(string)
			if !strings.HasPrefix(text, tt.want) || strings.Contains(text, "private text") {
				t.Errorf("errorText = %q, want it to start with %q and not to echo the provider's words", text, tt.want)
			}
			if got := cs[3]["finishReason"]; got != "error" {
				t.Errorf("finishReason = %v, want error", got)
			}
		})
	}
}

// The tokens a turn used are stored with it: on each assistant message and in the
// conversation's totals, matching the finish chunk's metadata.
func TestTurnUsageIsStored(t *testing.T) {
	f := newFixture(t, nil)
	var sent []model.Usage
	for _, msg := range []string{"what time is it?", "and now?"} {
		cs := chunks(t, f.post(t, f.secret, `{"agentId":"demo","id":"c","message":"`+msg+`"}`))
		meta := cs[len(cs)-1]["messageMetadata"].(map[string]any)["usage"].(map[string]any)
		sent = append(sent, model.Usage{InputTokens: int(meta["inputTokens"].(float64)), OutputTokens: int(meta["outputTokens"].(float64))})
		if sent[len(sent)-1].InputTokens == 0 {
			t.Fatalf("finish metadata usage = %v, want the scripted model's token counts", meta)
		}
	}
	total := sent[0].Add(sent[1])
	got, err := f.store.ConversationUsage(context.Background(), f.acc.ID, "c")
	if err != nil {
		t.Fatal(err)
	}
	if got.Turns != 2 || got.Usage != total {
		t.Errorf("stored totals = %+v, want 2 turns and %+v", got, total)
	}
	var perMessage model.Usage
	for _, m := range history(t, f, "c") {
		if m.Role == model.RoleAssistant {
			if m.Usage == nil {
				t.Fatalf("assistant message %s has no usage", m.ID)
			}
			perMessage = perMessage.Add(*m.Usage)
		}
	}
	if perMessage != total {
		t.Errorf("usage summed over the stored assistant messages = %+v, want %+v", perMessage, total)
	}
}
