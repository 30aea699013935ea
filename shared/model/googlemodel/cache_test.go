package googlemodel_test

import (
	"strings"
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

// travelDesk is the system instruction of cache_second_turn.json: long enough (over 1024
// tokens) for Gemini 2.5 Flash's implicit caching.
var travelDesk = strings.TrimSpace(strings.Repeat("You are the travel desk of a Norwegian tourist office. "+
	"Answer questions about Norwegian cities in one or two sentences. "+
	"Name the fjord, mountain or river a city lies on when it helps the traveller find their way. "+
	"Give distances in kilometres and temperatures in degrees Celsius. "+
	"Prefer public transport: trains (Vy, SJ Nord), coastal express ships (Hurtigruten) and local buses. "+
	"When a question is about opening hours or prices, say that they change with the season and point to the official site. "+
	"Never invent events, festivals or timetables; say when you do not know. ", 9))

// A second turn with the same prefix (system instruction and first turn) is answered with
// cachedContentTokenCount: Gemini cached the prefix implicitly, with nothing in the request.
func TestSecondTurnReadsCache(t *testing.T) {
	srv := wirefixture.Replay(t, "cache_second_turn.json")
	m := newModel(t, srv.URL, "test-key", model.Settings{})
	msgs := []model.Message{modeltest.User("Which fjord is Oslo on?")}

	first, err := modeltest.Collect(t.Context(), m, &model.Request{System: travelDesk, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	want := model.Usage{InputTokens: 1209, OutputTokens: 22 + 64}.WithReasoning(64)
	if last := first[len(first)-1]; last.Type != model.EventFinish || last.Usage != want {
		t.Errorf("first turn's usage %+v, want %+v", last.Usage, want)
	}

	msgs = append(msgs, model.Message{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: "Oslo lies at the head of the Oslofjord, about 100 km from the open Skagerrak."}}},
		modeltest.User("And Bergen?"))
	second, err := modeltest.Collect(t.Context(), m, &model.Request{System: travelDesk, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	last := second[len(second)-1]
	if last.Usage.InputTokenDetails.CacheReadTokens != 1163 {
		t.Errorf("second turn's cache reads %d, want 1163", last.Usage.InputTokenDetails.CacheReadTokens)
	}
	want = model.Usage{InputTokens: 1236, OutputTokens: 24 + 71, InputTokenDetails: model.InputTokenDetails{NoCacheTokens: 1236 - 1163, CacheReadTokens: 1163}}.WithReasoning(71)
	if last.Type != model.EventFinish || last.Usage != want {
		t.Errorf("second turn's usage %+v, want %+v", last.Usage, want)
	}
}

// "cache": false sends the same request as the default (text.json's body): Gemini's implicit
// caching has no request field to turn it off (Gemini's context caching docs).
func TestCacheOffChangesNothing(t *testing.T) {
	for _, cache := range []*bool{nil, new(bool)} {
		srv := wirefixture.Replay(t, "text.json")
		m := reasoningModel(t, srv.URL, modelName, nil, cache)
		if _, err := modeltest.Collect(t.Context(), m, &model.Request{System: "Answer in one sentence.", Messages: []model.Message{modeltest.User("What is the capital of Norway?")}}); err != nil {
			t.Fatal(err)
		}
	}
}
