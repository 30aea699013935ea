package anthropicmodel_test

import (
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
)

// input_tokens leaves out the tokens the prompt cache read and wrote (Anthropic's prompt
// caching docs): the usage counts them all, split by the cache (cache_usage.json is text.json
// with the usage of a call that read and wrote the cache).
func TestCacheUsage(t *testing.T) {
	m, _ := serve(t, "cache_usage.json", false, model.Settings{TopP: ptr(0.9)})
	got, err := modeltest.Collect(t.Context(), m, &model.Request{System: "Answer in one short sentence.", Messages: []model.Message{modeltest.User("What is the capital of Norway?")}})
	if err != nil {
		t.Fatal(err)
	}
	want := model.Usage{InputTokens: 21 + 312 + 1804, OutputTokens: 10, InputTokenDetails: model.InputTokenDetails{NoCacheTokens: 21, CacheReadTokens: 1804, CacheWriteTokens: 312}}
	if last := got[len(got)-1]; last.Type != model.EventFinish || last.Usage != want {
		t.Errorf("usage %+v, want %+v", last.Usage, want)
	}
}
