package openaimodel_test

import (
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
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
