package chathttp_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/chathttp"
)

// A user message is stored whole up to the size one stored message may hold; a larger one is
// refused with 413 naming the field before anything is written (it used to pass the 1 MiB
// body limit and fail inside a 200 stream, leaving the conversation bound to the agent).
// POST /async shares the check; its refusal table covers it.
func TestMessageSizeLimits(t *testing.T) {
	f := newFixtureWith(t, fixtureOptions{maxBodyBytes: chathttp.DefaultMaxBodyBytes})
	f.agent(t, f.acc.ID, "helper", helperConfig)
	text := func(kib int) string { return strings.Repeat("x", kib<<10) }

	status, _, body := f.turn(t, f.secret, `{"agentId":"helper","id":"c300","message":"`+text(300)+`"}`)
	if status != http.StatusOK {
		t.Fatalf("a 300 KiB message = %d %s, want 200", status, body)
	}
	if got := messageTexts(f.conversation(t, "helper", "c300")); len(got) != 2 || got[0] != "user:"+text(300) {
		t.Errorf("the 300 KiB message was not stored whole: %d messages", len(got))
	}

	aisdk, _ := json.Marshal(map[string]any{"agentId": "helper", "id": "c450sdk", "messages": []any{
		map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": text(450)}}}}})
	for _, tt := range []struct {
		name, path, body, field string
		status                  int
	}{
		{"450 KiB", "/", `{"agentId":"helper","id":"c450","message":"` + text(450) + `"}`, "message", http.StatusRequestEntityTooLarge},
		{"450 KiB in AI SDK messages", "/", string(aisdk), "messages[0]", http.StatusRequestEntityTooLarge},
		{"1 MiB", "/", `{"agentId":"helper","id":"c1024","message":"` + text(1024) + `"}`, "", http.StatusRequestEntityTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := f.call(t, "POST", tt.path, f.secret, tt.body)
			var got struct{ Error, Field string }
			_ = json.Unmarshal(body, &got)
			if status != tt.status || got.Field != tt.field || got.Error == "" {
				t.Errorf("= %d %s, want %d naming field %q", status, body[:min(len(body), 300)], tt.status, tt.field)
			}
		})
	}
	items := testenv.ConversationItems(t, f.db, f.tables.Conversations, f.acc.ID)
	for _, k := range items {
		if !strings.HasPrefix(k, f.acc.ID+"#c300/") {
			t.Errorf("a refused message wrote %s", k)
		}
	}
}
