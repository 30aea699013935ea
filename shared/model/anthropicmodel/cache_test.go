package anthropicmodel_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/anthropicmodel"
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

// Caching is on by default: text.json, like every fixture, pins the cache_control breakpoints
// on the last system block, the last tool and the conversation's last block. With "cache":
// false the same call goes without them (cache_off.json).
func TestCacheOff(t *testing.T) {
	m, requests := serveConfig(t, "cache_off.json", false, anthropicmodel.Config{Settings: model.Settings{TopP: ptr(0.9)}, Cache: ptr(false)})
	if _, err := modeltest.Collect(t.Context(), m, &model.Request{System: "Answer in one short sentence.", Messages: []model.Message{modeltest.User("What is the capital of Norway?")}}); err != nil {
		t.Fatal(err)
	}
	if n := len(requests()); n != 1 {
		t.Fatalf("server saw %d requests, want 1", n)
	}
	if body := string(requests()[0].Body); strings.Contains(body, "cache_control") {
		t.Errorf("request body %s has a cache breakpoint, want none", body)
	}
}

// longSystem is a system prompt longer than the least Claude Haiku 4.5 caches (4096 tokens, by
// Anthropic's prompt caching docs); a shorter one would be neither written nor read.
var longSystem = func() string {
	var b strings.Builder
	b.WriteString("You are a weather assistant for a Norwegian travel agency.\n")
	for i := 1; i <= 110; i++ {
		fmt.Fprintf(&b, "Rule %d: when a traveller asks about conditions on day %d of a trip, give the forecast in degrees Celsius, mention wind above 10 m/s, and never guess beyond the forecast's range.\n", i, i)
	}
	return b.String()
}()

// A second step of a tool loop sends the first step's prompt again with more history after
// it: the breakpoint moves to the tool result, and the cache, written by the first call up to
// its breakpoint, is read back (cache_turns.json).
func TestCacheReadOnSecondStep(t *testing.T) {
	m, requests := serve(t, "cache_turns.json", false, model.Settings{})
	req := &model.Request{
		System:   longSystem,
		Messages: []model.Message{modeltest.User("What's the weather in Oslo for the next 3 days?")},
		Tools:    []model.ToolSpec{weatherSpec},
	}
	first, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("first step: %v", err)
	}
	wantFirst := model.Usage{InputTokens: 4 + 4790, OutputTokens: 58, InputTokenDetails: model.InputTokenDetails{NoCacheTokens: 4, CacheWriteTokens: 4790}}
	if last := first[len(first)-1]; last.Type != model.EventFinish || last.Usage != wantFirst {
		t.Errorf("first step's usage %+v, want %+v", last.Usage, wantFirst)
	}

	const c = "toolu_01Nh8Lx3Qp6Wc2Ry5Tz9Vb4K"
	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartToolCall, ToolCallID: c, ToolName: "weather", Input: json.RawMessage(`{"city": "Oslo", "days": 3}`)}}},
		model.Message{Role: model.RoleTool, Parts: []model.Part{{Type: model.PartToolResult, ToolCallID: c, ToolName: "weather", Output: json.RawMessage(`{"forecast":["sun","rain","sun"]}`)}}},
	)
	second, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("second step: %v", err)
	}
	wantSecond := model.Usage{InputTokens: 4 + 112 + 4790, OutputTokens: 12, InputTokenDetails: model.InputTokenDetails{NoCacheTokens: 4, CacheReadTokens: 4790, CacheWriteTokens: 112}}
	last := second[len(second)-1]
	if last.Type != model.EventFinish || last.Usage != wantSecond {
		t.Errorf("second step's usage %+v, want %+v", last.Usage, wantSecond)
	}
	if last.Usage.InputTokenDetails.CacheReadTokens != 4790 {
		t.Errorf("second step read %d tokens from the cache, want the first step's 4790", last.Usage.InputTokenDetails.CacheReadTokens)
	}
	if n := len(requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}
