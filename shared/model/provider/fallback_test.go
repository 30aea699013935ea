package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/provider"
)

// collect runs one step of the block's model and returns what it streamed: the fallback's
// EventModel as "model:<name>", then the text, and the error.
func collect(t *testing.T, block string) (string, error) {
	t.Helper()
	m, err := provider.New(json.RawMessage(block), provider.Config{PrivateEndpoints: "allow"})
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for ev, err := range m.Stream(context.Background(), &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "hi"}}}}}) {
		if err != nil {
			return got.String(), err
		}
		switch ev.Type {
		case model.EventModel:
			got.WriteString("model:" + ev.Text + "|")
		case model.EventTextDelta:
			got.WriteString(ev.Text)
		}
	}
	return got.String(), nil
}

// server answers every chat completion with status; it counts the calls.
func server(t *testing.T, status int) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"status %d","type":"server_error"}}`, status)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// A step whose model is overloaded, rate limited or failing, after the adapter's own retries,
// goes to the next model, which the stream names; a request the model refuses (4xx other than
// 429) does not, nor does the last model's failure.
func TestFallbacks(t *testing.T) {
	scripted := `{"provider":"scripted","script":[{"text":"from the fallback"}]}`
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable, 529} {
		srv, calls := server(t, status)
		primary := `{"provider":"openai","model":"gpt-x","baseURL":"` + srv.URL + `","apiKey":"k","fallbacks":[` + scripted + `]}`
		got, err := collect(t, primary)
		if err != nil || got != "model:scripted|from the fallback" {
			t.Errorf("HTTP %d: streamed %q, %v; want the fallback's answer, named", status, got, err)
		}
		if calls.Load() < 1 {
			t.Errorf("HTTP %d: the primary was never called", status)
		}
	}

	srv, _ := server(t, http.StatusBadRequest)
	got, err := collect(t, `{"provider":"openai","model":"gpt-x","baseURL":"`+srv.URL+`","apiKey":"k","fallbacks":[`+scripted+`]}`)
	var pe *model.ProviderError
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || got != "" {
		t.Errorf("a refused request: %q, %v; want the primary's 400 and no fallback", got, err)
	}

	down, _ := server(t, http.StatusServiceUnavailable)
	alsoDown, _ := server(t, http.StatusBadGateway)
	got, err = collect(t, `{"provider":"openai","model":"gpt-x","baseURL":"`+down.URL+`","apiKey":"k","fallbacks":[
		{"provider":"openai","model":"gpt-y","baseURL":"`+alsoDown.URL+`","apiKey":"k"}]}`)
	if !errors.As(err, &pe) || pe.Status != http.StatusBadGateway || got != "" {
		t.Errorf("every model down: %q, %v; want the last one's failure", got, err)
	}

	// The agent's own model answering says nothing of models.
	if got, err := collect(t, `{"provider":"scripted","script":[{"text":"mine"}],"fallbacks":[`+scripted+`]}`); err != nil || got != "mine" {
		t.Errorf("the first model answering: %q %v", got, err)
	}
}

// A step that has begun to stream stays with its model: its client has seen part of it.
func TestAStartedStepDoesNotFallBack(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"partial"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		// The connection drops mid-answer.
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	got, err := collect(t, `{"provider":"openai","model":"gpt-x","baseURL":"`+srv.URL+`","apiKey":"k","fallbacks":[{"provider":"scripted","script":[{"text":"fallback"}]}]}`)
	if err == nil || got != "partial" {
		t.Errorf("a step cut mid-stream: %q, %v; want its part and its failure, no fallback", got, err)
	}
}

// Each provider's overload, answered the way its documentation shows it (after the adapter's
// own retries), sends the step to the fallback: Anthropic's 529 overloaded_error, Google's 503
// UNAVAILABLE, Bedrock's 429 ThrottlingException, OpenAI's 429 rate limit. A failure of any
// other kind (a refused connection) would not fall back.
func TestFallbacksOnEveryProvider(t *testing.T) {
	overloaded := func(status int, header, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if header != "" {
				w.Header().Set("X-Amzn-ErrorType", header)
			}
			w.WriteHeader(status)
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	scripted := `{"provider":"scripted","script":[{"text":"from the fallback"}]}`
	anthropic := overloaded(529, "", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	google := overloaded(503, "", `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`)
	openai := overloaded(429, "", `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
	bedrock := overloaded(429, "ThrottlingException", `{"message":"Too many requests, please wait before trying again."}`)
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	for name, block := range map[string]string{
		"anthropic": `{"provider":"anthropic","model":"claude-haiku-4-5","baseURL":"` + anthropic + `","apiKey":"k","fallbacks":[` + scripted + `]}`,
		"google":    `{"provider":"google","model":"gemini-2.5-flash","baseURL":"` + google + `","apiKey":"k","fallbacks":[` + scripted + `]}`,
		"openai":    `{"provider":"openai","model":"gpt-4.1-mini","baseURL":"` + openai + `","apiKey":"k","fallbacks":[` + scripted + `]}`,
		"bedrock":   `{"provider":"bedrock","model":"us.amazon.nova-lite-v1:0","fallbacks":[` + scripted + `]}`,
	} {
		if got, err := collect(t, block); err != nil || got != "model:scripted|from the fallback" {
			t.Errorf("%s overloaded: streamed %q, %v; want the fallback's answer, named", name, got, err)
		}
	}
}
