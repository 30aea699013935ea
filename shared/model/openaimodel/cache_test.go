// prompt_cache_key.json and prompt_cache_key_off.json are hand-written after OpenAI's prompt
// caching docs and replayed even under -record: a cache hit cannot be ordered from the API. The
// model calls them as OpenAI's own API (no base URL), through a transport that reaches the
// fixture server instead.
package openaimodel_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/agentharness/harness/shared/model/openaimodel"
	"github.com/google/go-cmp/cmp"
)

// prompt_tokens counts the cached ones too (prompt_tokens_details.cached_tokens, OpenAI's
// prompt caching docs): cache_usage.json is text.json with the usage of a call that read 1536
// tokens from the cache.
func TestCacheUsage(t *testing.T) {
	m, _ := serve(t, "cache_usage.json", false, model.Settings{})
	got, err := modeltest.Collect(t.Context(), m, &model.Request{System: "Answer in one short sentence.", Messages: []model.Message{modeltest.User("What is the capital of Norway?")}})
	if err != nil {
		t.Fatal(err)
	}
	want := model.Usage{InputTokens: 1560, OutputTokens: 7, InputTokenDetails: model.InputTokenDetails{NoCacheTokens: 24, CacheReadTokens: 1536}}
	if last := got[len(got)-1]; last.Type != model.EventFinish || last.Usage != want {
		t.Errorf("usage %+v, want %+v", last.Usage, want)
	}
}

// asOpenAI replays testdata/name to a model of cfg that calls OpenAI's own API: its HTTPS
// connections to api.openai.com reach the fixture server.
func asOpenAI(t *testing.T, name string, cfg openaimodel.Config) (*openaimodel.Model, *wirefixture.Server) {
	t.Helper()
	srv := wirefixture.Replay(t, name)
	addr := strings.TrimPrefix(srv.URL, "http://")
	cfg.Provider, cfg.APIKey = "openai", "test-key"
	cfg.Transport = &http.Transport{DialTLSContext: func(ctx context.Context, _, host string) (net.Conn, error) {
		if host != "api.openai.com:443" {
			return nil, fmt.Errorf("dialled %s, want api.openai.com:443", host)
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}}
	m, err := openaimodel.New(cfg, "")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, srv
}

// orderRules is a system prompt long enough for OpenAI to cache (1024 tokens or more).
func orderRules() string {
	var b strings.Builder
	for i := 1; i <= 80; i++ {
		fmt.Fprintf(&b, "%d. Quote the order number, the item and the date of every order you mention, exactly as the order tool returned them.\n", i)
	}
	return b.String()
}

// Two calls of one agent carry the same prompt_cache_key, a hash of its CacheKey (never the
// key itself), so that OpenAI routes them to the same cache; the second, whose prompt starts as
// the first's did, reads most of it from the cache.
func TestPromptCacheKey(t *testing.T) {
	m, srv := asOpenAI(t, "prompt_cache_key.json", openaimodel.Config{Model: testModel})
	req := &model.Request{System: orderRules(), Messages: []model.Message{modeltest.User("Where is order 4411?")}, CacheKey: "acme/support"}

	first, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: "Order 4411 shipped on 2 March."}}},
		modeltest.User("And order 4412?"))
	second, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("second call: %v", err)
	}

	usage := func(events []model.Event) model.Usage { return events[len(events)-1].Usage }
	if got, want := usage(first), (model.Usage{InputTokens: 1834, OutputTokens: 8}); got != want {
		t.Errorf("first call usage %+v, want %+v: nothing cached yet", got, want)
	}
	want := model.Usage{InputTokens: 1855, OutputTokens: 8, InputTokenDetails: model.InputTokenDetails{NoCacheTokens: 63, CacheReadTokens: 1792}}
	if diff := cmp.Diff(want, usage(second)); diff != "" {
		t.Errorf("second call usage (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	checkSent(t, reqs, 2)
	for i, r := range reqs {
		if strings.Contains(string(r.Body), "acme/support") {
			t.Errorf("request %d carries the cache key itself: %s", i, r.Body)
		}
	}
}

// "cache": false sends no prompt_cache_key. OpenAI's caching itself cannot be turned off.
func TestPromptCacheKeyOff(t *testing.T) {
	m, srv := asOpenAI(t, "prompt_cache_key_off.json", openaimodel.Config{Model: testModel, Cache: ptr(false)})
	req := &model.Request{System: orderRules(), Messages: []model.Message{modeltest.User("Where is order 4411?")}, CacheKey: "acme/support"}
	if _, err := modeltest.Collect(t.Context(), m, req); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	checkSent(t, srv.Requests(), 1)
}

// Another server that speaks Chat Completions gets no prompt_cache_key, which it may refuse:
// text.json pins a request without one.
func TestPromptCacheKeyOnlyToOpenAI(t *testing.T) {
	for _, cache := range []*bool{nil, ptr(true)} {
		m, srv := replay(t, "text.json", openaimodel.Config{Model: testModel, Cache: cache})
		req := &model.Request{System: "Answer in one short sentence.", Messages: []model.Message{modeltest.User("What is the capital of Norway?")}, CacheKey: "acme/support"}
		if _, err := modeltest.Collect(t.Context(), m, req); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		checkSent(t, srv.Requests(), 1)
	}
}
