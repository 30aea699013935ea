package bedrockmodel_test

import (
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/bedrockmodel"
	"github.com/agentharness/harness/shared/model/modeltest"
)

// inputTokens leaves out what cache points read and wrote (cacheReadInputTokens,
// cacheWriteInputTokens of the Converse API's TokenUsage): cache_usage.json is text.json with
// the metadata event of a call that read and wrote the cache.
func TestCacheUsage(t *testing.T) {
	f := serve(t, "cache_usage.json", false)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID})
	got, err := modeltest.Collect(t.Context(), m, &model.Request{System: "You are terse.", Messages: []model.Message{modeltest.User("Say hello in three words.")}})
	if err != nil {
		t.Fatal(err)
	}
	want := model.Usage{InputTokens: 12 + 1792 + 256, OutputTokens: 5, InputTokenDetails: model.InputTokenDetails{NoCacheTokens: 12, CacheReadTokens: 1792, CacheWriteTokens: 256}}
	if last := got[len(got)-1]; last.Type != model.EventFinish || last.Usage != want {
		t.Errorf("usage %+v, want %+v", last.Usage, want)
	}
}
