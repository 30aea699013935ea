package subagenttools_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/subagenttools"
	"github.com/agentharness/harness/shared/tool/toolset"
)

func TestSubagentToolsFollowTheirConfig(t *testing.T) {
	var c agentconfig.Config
	if err := json.Unmarshal([]byte(`{"model":{},"subagent":{"agents":[
		{"name":"finder","agentId":"agt_1","description":"Finds facts.","blocking":false},
		{"name":"editor","agentId":"agt_2","initUserMessageProperty":"draft","optional":"EDITOR_ON","blocking":false},
		{"name":"critic","agentId":"agt_3","optional":"CRITIC_ON","blocking":false}
	],"runSubagent":true}}`), &c); err != nil {
		t.Fatal(err)
	}
	thread := map[string]string{"EDITOR_ON": "Yes", "CRITIC_ON": "off"}
	vars := tool.Vars{Get: func(name string) string { return thread[name] }}
	offer := func(c *agentconfig.Config) []tool.Tool {
		t.Helper()
		o, err := subagenttools.Toolset{}.Offer(context.Background(), toolset.Build{Config: c, Vars: vars})
		if err != nil {
			t.Fatal(err)
		}
		return o.Tools
	}
	set, err := tool.NewSet(offer(&c)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Names(); !slices.Equal(got, []string{"editor", "finder", "run_subagent"}) {
		t.Fatalf("tools %v, want editor (its flag is yes in the thread), finder and run_subagent, not critic (its flag is off)", got)
	}
	if set.AsyncMode("finder") != asynctools.ExternalDispatch || set.AsyncMode("run_subagent") != asynctools.ExternalDispatch {
		t.Errorf("finder runs %q, run_subagent %q: want non-blocking calls dispatched", set.AsyncMode("finder"), set.AsyncMode("run_subagent"))
	}
	var blocking agentconfig.Config
	if err := json.Unmarshal([]byte(`{"model":{},"subagent":{"agents":[{"name":"finder","agentId":"agt_1"}]}}`), &blocking); err != nil {
		t.Fatal(err)
	}
	if got := offer(&blocking); len(got) != 1 || got[0].Async != "" {
		t.Errorf("a blocking agent's tools %+v, want one that runs inline", got)
	}
	if _, err := set.Prepare("editor", json.RawMessage(`{"draft":"fix this"}`)); err != nil {
		t.Errorf("the editor's message goes under draft: %v", err)
	}
	if _, err := set.Prepare("editor", json.RawMessage(`{"message":"fix this"}`)); err == nil {
		t.Error("the editor took its message under \"message\", not its initUserMessageProperty")
	}
	if _, err := set.Prepare("run_subagent", json.RawMessage(`{"agent":"critic","message":"judge"}`)); err == nil {
		t.Error("run_subagent ran critic, whose flag is off")
	}
	if _, err := set.Prepare("run_subagent", json.RawMessage(`{"agent":"finder","message":"look"}`)); err != nil {
		t.Errorf("run_subagent refused finder: %v", err)
	}
}
