package googlemodel_test

import (
	"testing"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
)

// promptTokenCount counts the cached ones too (cachedContentTokenCount, Gemini's implicit
// caching): cache_usage.json is text.json with the usage of a call that read 1024 tokens from
// the cache.
func TestCacheUsage(t *testing.T) {
	srv := wirefixture.Replay(t, "cache_usage.json")
	m := newModel(t, srv.URL, "test-key", model.Settings{})
	got, err := modeltest.Collect(t.Context(), m, &model.Request{System: "Answer in one sentence.", Messages: []model.Message{modeltest.User("What is the capital of Norway?")}})
	if err != nil {
		t.Fatal(err)
	}
	want := model.Usage{InputTokens: 1038, OutputTokens: 16 + 187, InputTokenDetails: model.InputTokenDetails{NoCacheTokens: 14, CacheReadTokens: 1024}}.WithReasoning(187)
	if last := got[len(got)-1]; last.Type != model.EventFinish || last.Usage != want {
		t.Errorf("usage %+v, want %+v", last.Usage, want)
	}
}
