package bedrockmodel_test

import (
	"testing"

	"github.com/agentharness/harness/infra/wirefixture"
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

// A model block's "cache" decides the cache points whatever the model (the fixture's requests
// pin them): false leaves them out for Claude, which caches by default; true puts them in for a
// model that does not (Llama), after the tools too.
func TestCacheSetting(t *testing.T) {
	off, on := false, true
	tests := []struct {
		name, fixture string
		cfg           bedrockmodel.Config
	}{
		{"false on claude", "cache_off.json", bedrockmodel.Config{Provider: "bedrock", Model: claudeID, Cache: &off}},
		{"true on llama", "cache_forced.json", bedrockmodel.Config{Provider: "bedrock", Model: llamaID, Cache: &on}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := serve(t, tt.fixture, false)
			m := f.model(t, tt.cfg)
			got, err := modeltest.Collect(t.Context(), m, &model.Request{
				System:   "Be brief.",
				Messages: []model.Message{modeltest.User("What's the weather in Oslo?")},
				Tools:    []model.ToolSpec{weatherSpec},
			})
			if err != nil {
				t.Fatal(err)
			}
			if last := got[len(got)-1]; last.Type != model.EventFinish || last.Finish != model.FinishStop {
				t.Errorf("last event %+v, want a stop", last)
			}
		})
	}
}

// A second turn shows cache reads: the second call repeats the first one's system prompt and
// message before its own, and Bedrock answers with the prefix the first call wrote read from
// the cache.
func TestCacheReadOnSecondTurn(t *testing.T) {
	f := serve(t, "cache_turns.json", false)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: claudeID})
	req := &model.Request{System: supportPrompt, Messages: []model.Message{modeltest.User("How do I reset my password?")}}

	first, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatal(err)
	}
	want := model.Cached(3+1893, 24, 0, 1893)
	if last := first[len(first)-1]; last.Usage != want {
		t.Errorf("first call's usage %+v, want %+v", last.Usage, want)
	}

	req.Messages = append(req.Messages, modeltest.Assistant(first), modeltest.User("And my username?"))
	second, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatal(err)
	}
	usage := second[len(second)-1].Usage
	if usage.InputTokenDetails.CacheReadTokens != 1893 {
		t.Errorf("second call read %d tokens from the cache, want 1893 (usage %+v)", usage.InputTokenDetails.CacheReadTokens, usage)
	}
	if want := model.Cached(3+1893+35, 21, 1893, 35); usage != want {
		t.Errorf("second call's usage %+v, want %+v", usage, want)
	}
}

// llamaID is a model that takes no cache points unless a block forces them.
const llamaID = "us.meta.llama3-3-70b-instruct-v1:0"

const supportPrompt = "You are the help desk of Example Corp. Answer in two sentences at most, and point to the account page for anything about sign-in."

func cacheFixtures() map[string][]wirefixture.Exchange {
	stop := func(requestID string) wirefixture.Response {
		return textStream(requestID, `{"usage":{"inputTokens":402,"outputTokens":12,"totalTokens":414},"metrics":{"latencyMs":610}}`, "Oslo: sunny, 21 °C.")
	}
	return map[string][]wirefixture.Exchange{
		"cache_off.json": {{
			Request: converseStream(claudeID, `{
				"system":[{"text":"Be brief."}],
				"messages":[{"role":"user","content":[{"text":"What's the weather in Oslo?"}]}],
				"toolConfig":{"tools":[`+weatherTool+`]}
			}`),
			Response: stop("1d2c3b4a-5e6f-4a7b-8c9d-0e1f2a3b4c5d"),
		}},
		"cache_forced.json": {{
			Request: converseStream(llamaID, `{
				"system":[{"text":"Be brief."},`+cachePoint+`],
				"messages":[{"role":"user","content":[{"text":"What's the weather in Oslo?"},`+cachePoint+`]}],
				"toolConfig":{"tools":[`+weatherTool+`,`+cachePoint+`]}
			}`),
			Response: stop("1d2c3b4a-5e6f-4a7b-8c9d-0e1f2a3b4c5e"),
		}},
		"cache_turns.json": {
			{
				Request: converseStream(claudeID, `{
					"system":[{"text":`+mustJSON(supportPrompt)+`},`+cachePoint+`],
					"messages":[{"role":"user","content":[{"text":"How do I reset my password?"},`+cachePoint+`]}]
				}`),
				Response: textStream("0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c61",
					`{"usage":{"inputTokens":3,"outputTokens":24,"totalTokens":1920,"cacheReadInputTokens":0,"cacheWriteInputTokens":1893},"metrics":{"latencyMs":1410}}`,
					"Open the account page and choose Reset password;", " a link arrives by email."),
			},
			{
				Request: converseStream(claudeID, `{
					"system":[{"text":`+mustJSON(supportPrompt)+`},`+cachePoint+`],
					"messages":[
						{"role":"user","content":[{"text":"How do I reset my password?"}]},
						{"role":"assistant","content":[{"text":"Open the account page and choose Reset password; a link arrives by email."}]},
						{"role":"user","content":[{"text":"And my username?"},`+cachePoint+`]}
					]
				}`),
				Response: textStream("0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c62",
					`{"usage":{"inputTokens":3,"outputTokens":21,"totalTokens":1952,"cacheReadInputTokens":1893,"cacheWriteInputTokens":35},"metrics":{"latencyMs":690}}`,
					"Your username is on the same account page,", " under Profile."),
			},
		},
	}
}
