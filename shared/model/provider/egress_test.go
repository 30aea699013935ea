package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/mockopenai"
	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/agentharness/harness/shared/model/provider"
	"github.com/agentharness/harness/shared/wire/egress"
)

// turn runs one model call and returns its text and its error.
func turn(m agent.Model) (string, error) {
	var text strings.Builder
	events, err := modeltest.Collect(context.Background(), m, &model.Request{Messages: []model.Message{modeltest.User("hi")}})
	for _, ev := range events {
		text.WriteString(ev.Text)
	}
	return text.String(), err
}

// TestOwnBaseURLOnlyPublic points an openai agent's baseURL at a server on 127.0.0.1: refused at
// connect, before the server sees anything, unless the operator allows private endpoints or the
// URL is the operator's own OPENAI_BASE_URL.
func TestOwnBaseURLOnlyPublic(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string // %s is the agent's base URL
		refused bool
	}{
		{name: "an agent's own base URL", refused: true},
		{name: "another OPENAI_BASE_URL does not make it trusted", env: map[string]string{"OPENAI_BASE_URL": "https://llm.example/v1"}, refused: true},
		{name: "the operator allows anything but allow", env: map[string]string{"MODEL_PRIVATE_ENDPOINTS": "yes"}, refused: true},
		{name: "the operator allows private endpoints", env: map[string]string{"MODEL_PRIVATE_ENDPOINTS": "allow"}},
		{name: "the operator's OPENAI_BASE_URL", env: map[string]string{"OPENAI_BASE_URL": "%s/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(t, mockopenai.New(nil))
			base := srv.URL + "/v1"
			vars := map[string]string{}
			for k, v := range tt.env {
				vars[k] = strings.ReplaceAll(v, "%s", base)
			}
			m, err := provider.New(json.RawMessage(fmt.Sprintf(`{"provider":"openai","model":"mock","baseURL":%q}`, base)), config(vars))
			if err != nil {
				t.Fatalf("provider.New: %v", err)
			}
			text, err := turn(m)
			if !tt.refused {
				if err != nil || text == "" || len(srv.Requests()) == 0 {
					t.Fatalf("turn = %q, %v (server saw %d requests); want an answer from the server", text, err, len(srv.Requests()))
				}
				return
			}
			var pe *model.ProviderError
			var be *egress.BlockedError
			if !errors.As(err, &pe) || !errors.As(err, &be) {
				t.Fatalf("turn = %q, %v (%T); want a *model.ProviderError caused by an *egress.BlockedError", text, err, err)
			}
			if be.Addr.String() != "127.0.0.1" || !strings.Contains(err.Error(), "resolves to 127.0.0.1, a loopback address") {
				t.Errorf("error = %v, want it to name 127.0.0.1 as a loopback address", err)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("the server saw %d requests, want 0", n)
			}
		})
	}
}

// TestOwnBaseURLOnlyPublicEveryProvider checks each adapter's wiring: anthropic and google
// have no operator base URL, so any base URL in the block is the agent's own.
func TestOwnBaseURLOnlyPublicEveryProvider(t *testing.T) {
	blocks := map[string]string{
		"openai":    `{"provider":"openai","model":"m","baseURL":%q}`,
		"anthropic": `{"provider":"anthropic","model":"m","apiKey":"k","baseURL":%q}`,
		"google":    `{"provider":"google","model":"m","apiKey":"k","baseURL":%q}`,
	}
	for name, block := range blocks {
		for _, allow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, allowed %v", name, allow), func(t *testing.T) {
				t.Parallel()
				srv := modeltest.NewServer(t, wirefixture.Response{Status: http.StatusBadRequest, Body: `{"error":{"message":"no"}}`})
				var c provider.Config
				if allow {
					c.PrivateEndpoints = "allow"
				}
				m, err := provider.New(json.RawMessage(fmt.Sprintf(block, srv.URL)), c)
				if err != nil {
					t.Fatalf("provider.New: %v", err)
				}
				_, err = turn(m)
				var be *egress.BlockedError
				if blocked := errors.As(err, &be); blocked == allow {
					t.Errorf("turn error = %v; want a *egress.BlockedError: %v", err, !allow)
				}
				if reached := len(srv.Requests()) > 0; reached != allow {
					t.Errorf("the server saw %d requests; want some: %v", len(srv.Requests()), allow)
				}
			})
		}
	}
}

// A warm function builds its agent's model anew for every turn; the models share the process's
// connections, so turn after turn reuses one connection to the model server instead of opening
// one (and a TLS handshake) per turn and leaving it idle.
func TestModelsBuiltPerTurnShareConnections(t *testing.T) {
	srv := httptest.NewUnstartedServer(mockopenai.New(&mockopenai.Options{NoRecord: true}))
	var mu sync.Mutex
	states := map[net.Conn]http.ConnState{}
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		states[c] = s
		mu.Unlock()
	}
	// idle waits until the server has seen every connection go back to idle (or close): a
	// connection returns to the client's pool a moment after its stream ends.
	idle := func() int {
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			busy := 0
			for _, s := range states {
				if s != http.StateIdle && s != http.StateClosed && s != http.StateHijacked {
					busy++
				}
			}
			n := len(states)
			mu.Unlock()
			if busy == 0 || time.Now().After(deadline) {
				return n
			}
			time.Sleep(time.Millisecond)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	block := json.RawMessage(fmt.Sprintf(`{"provider":"openai","model":"m","baseURL":%q}`, srv.URL+"/v1"))
	for i := range 5 {
		m, err := provider.New(block, provider.Config{OpenAIBaseURL: srv.URL + "/v1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := turn(m); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		idle()
		// The client puts the connection back in its pool a moment after the server is done.
		time.Sleep(100 * time.Millisecond)
	}
	// A model built per turn with a transport of its own opens one connection per turn: five.
	if n := idle(); n > 2 {
		t.Fatalf("five turns opened %d connections to the model server, want one (two if the pool was slow once)", n)
	}
}
