package chathttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/google/go-cmp/cmp"
)

// helperConfig is an agent whose scripted model answers "hi".
const helperConfig = `{"name":"helper","system":"You help.","model":{"provider":"scripted","script":[{"text":"hi"}]},"tools":{"current_time":{"enabled":true}}}`

// A rotated secret fails at once, though the harness knew its account from an earlier turn;
// the new one works, and a deleted account's secret fails too.
func TestRotatedSecretIsRefusedAtOnce(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.agent(t, f.acc.ID, "helper", helperConfig)
	if got := f.mustTurn(t, f.secret, `{"agentId":"helper","message":"hi"}`); got != "hi" {
		t.Errorf("turn before the rotation said %q, want hi", got)
	}
	newSecret, err := f.store.RotateSecret(ctx, f.acc.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := f.turn(t, f.secret, `{"agentId":"helper","message":"hi"}`); status != http.StatusUnauthorized {
		t.Errorf("old secret after rotation: turn = %d %s, want 401", status, body)
	}
	if got := f.mustTurn(t, newSecret, `{"agentId":"helper","message":"hi"}`); got != "hi" {
		t.Errorf("turn with the new secret said %q, want hi", got)
	}
	if err := f.store.DeleteAccount(ctx, f.acc.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if status, _, body := f.turn(t, newSecret, `{"agentId":"helper","message":"hi"}`); status != http.StatusUnauthorized {
		t.Errorf("deleted account's secret: turn = %d %s, want 401", status, body)
	}
}

// The auth scheme is case-insensitive (RFC 7235 §2.1): "bearer x" and "BEARER x" run a turn
// like "Bearer x".
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	f := newFixture(t, nil)
	f.agent(t, f.acc.ID, "helper", helperConfig)
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		status, body := testenv.Call(t, "POST", f.srv.URL+"/", scheme+" "+f.secret, `{"agentId":"helper","message":"hi"}`)
		if status != http.StatusOK || !bytes.Contains(body, []byte(`"type":"finish"`)) {
			t.Errorf("POST / with %q = %d %s, want a turn that finishes", scheme+" <account secret>", status, body)
		}
	}
}

// One account's agents and conversations are out of another's reach, whatever ids it names.
func TestAccountsAreIsolated(t *testing.T) {
	f := newFixture(t, nil)
	a, aSecret := f.account(t, "alice")
	b, bSecret := f.account(t, "bob")
	f.agent(t, a.ID, "private", `{"name":"alice private agent","system":"alice system prompt","model":{"provider":"scripted","script":[{"text":"alice answer"}]}}`)
	f.agent(t, b.ID, "mine", `{"name":"bob agent","model":{"provider":"scripted","script":[{"text":"bob answer"}]}}`)
	if got := f.mustTurn(t, aSecret, `{"agentId":"private","id":"conv-1","message":"alice private message"}`); got != "alice answer" {
		t.Fatalf("alice's turn said %q, want alice answer", got)
	}

	t.Run("another account's agent is not found", func(t *testing.T) {
		status, _, body := f.turn(t, bSecret, `{"agentId":"private","id":"conv-x","message":"hi"}`)
		if status != http.StatusNotFound || bytes.Contains(body, []byte("alice")) {
			t.Errorf("bob's turn on alice's agent = %d %s, want 404 without alice's data", status, body)
		}
	})

	t.Run("another account's conversation id starts a new conversation", func(t *testing.T) {
		f.mu.Lock()
		f.prompts = nil
		f.mu.Unlock()
		status, cs, body := f.turn(t, bSecret, `{"agentId":"mine","id":"conv-1","message":"bob message"}`)
		if status != http.StatusOK {
			t.Fatalf("bob's turn on conversation conv-1 = %d %s, want 200", status, body)
		}
		stream, err := json.Marshal(cs)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(stream, []byte("alice")) {
			t.Errorf("bob's stream shows alice's conversation: %s", stream)
		}
		f.mu.Lock()
		var seen []string
		for _, p := range f.prompts {
			seen = append(seen, messageTexts(p)...)
		}
		f.mu.Unlock()
		if diff := cmp.Diff([]string{"user:bob message"}, seen); diff != "" {
			t.Errorf("messages bob's model was given (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"user:bob message", "assistant:bob answer"}, messageTexts(f.conversationOf(t, b.ID, "mine", "conv-1"))); diff != "" {
			t.Errorf("bob's conv-1 (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"user:alice private message", "assistant:alice answer"}, messageTexts(f.conversationOf(t, a.ID, "private", "conv-1"))); diff != "" {
			t.Errorf("alice's conv-1 (-want +got):\n%s", diff)
		}
	})
}
