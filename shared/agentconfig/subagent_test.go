package agentconfig_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
)

func TestParseSubagent(t *testing.T) {
	c, err := agentconfig.Parse([]byte(`{"model":{"provider":"scripted"},"subagent":{
		"agents":[
			{"name":"researcher","agentId":"agt_1","description":"Finds facts.","blocking":false},
			{"name":"writer","agentId":"agt_2","initUserMessageProperty":"brief","optional":"WRITER_ON"}
		],
		"maxDepth":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Subagent
	if s == nil || len(s.Agents) != 2 {
		t.Fatalf("subagent = %+v, want two agents", s)
	}
	r, w := s.Agents[0], s.Agents[1]
	if r.IsBlocking() || r.MessageProperty() != "message" || r.Description != "Finds facts." {
		t.Errorf("researcher = %+v: want non-blocking, its message under \"message\"", r)
	}
	if !w.IsBlocking() || w.MessageProperty() != "brief" || w.Optional != "WRITER_ON" {
		t.Errorf("writer = %+v: want blocking (the default), its message under \"brief\", optional on WRITER_ON", w)
	}
	if s.Depth() != 2 || s.Children() != agentconfig.DefaultMaxChildren {
		t.Errorf("limits %d deep, %d children; want 2 and the default %d", s.Depth(), s.Children(), agentconfig.DefaultMaxChildren)
	}
}

func TestParseSubagentRejects(t *testing.T) {
	for _, tt := range []struct {
		name, subagent, field, problem string
	}{
		{"not an object", `[]`, "subagent", "must be an object"},
		{"no agents", `{}`, "subagent.agents", "non-empty array"},
		{"unknown key", `{"agents":[{"name":"a","agentId":"agt_1"}],"depth":2}`, "subagent.depth", "is not a subagent field"},
		{"missing agentId", `{"agents":[{"name":"a"}]}`, "subagent.agents[0].agentId", "is required"},
		{"bad tool name", `{"agents":[{"name":"has space","agentId":"agt_1"}]}`, "subagent.agents[0].name", "must be a tool name"},
		{"duplicate name", `{"agents":[{"name":"a","agentId":"agt_1"},{"name":"a","agentId":"agt_2"}]}`, "subagent.agents[1].name", "names another entry"},
		{"run_subagent taken", `{"agents":[{"name":"run_subagent","agentId":"agt_1"}]}`, "subagent.agents[0].name", "harness gives subagents"},
		{"attachments under the message", `{"agents":[{"name":"a","agentId":"agt_1","initAttachmentsProperty":"message"}]}`, "subagent.agents[0].initAttachmentsProperty", "must differ"},
		{"immediate with an unknown field", `{"agents":[{"name":"a","agentId":"agt_1","immediate":{"nameVar":"N"}}]}`, "subagent.agents[0].immediate.nameVar", "not an immediate field"},
		{"immediate with a bad name", `{"agents":[{"name":"a","agentId":"agt_1","immediate":{"nameEnv":"a-b"}}]}`, "subagent.agents[0].immediate.nameEnv", "not a variable name"},
		{"immediate scoping twice", `{"agents":[{"name":"a","agentId":"agt_1","immediate":{"scopedEnv":["K","K"]}}]}`, "subagent.agents[0].immediate.scopedEnv[1]", "named twice"},
		{"immediate resumable", `{"agents":[{"name":"a","agentId":"agt_1","immediate":true,"resumable":{"receives_messages":"side_a"}}]}`, "subagent.agents[0].immediate", "subagent_create"},
		{"immediate not a bool", `{"agents":[{"name":"a","agentId":"agt_1","immediate":"yes"}]}`, "subagent.agents[0].immediate", "must be true, false or"},
		{"resumable without its side", `{"agents":[{"name":"a","agentId":"agt_1","resumable":{}}]}`, "subagent.agents[0].resumable.receives_messages", "side_a"},
		{"resumable and blocking", `{"agents":[{"name":"a","agentId":"agt_1","blocking":true,"resumable":{"receives_messages":"side_a"}}]}`, "subagent.agents[0].resumable", "do not block"},
		{"resumable unknown key", `{"agents":[{"name":"a","agentId":"agt_1","resumable":{"receives_messages":"side_a","max":2}}]}`, "subagent.agents[0].resumable.max", "is not a resumable field"},
		{"resumable bad communication", `{"agents":[{"name":"a","agentId":"agt_1","resumable":{"receives_messages":"side_a","parentCommunication":"loud"}}]}`, "subagent.agents[0].resumable.parentCommunication", "implicit"},
		{"resumable too many", `{"agents":[{"name":"a","agentId":"agt_1","resumable":{"receives_messages":"side_a","maxInstances":51}}]}`, "subagent.agents[0].resumable.maxInstances", "between 1 and 50"},
		{"a reserved name", `{"agents":[{"name":"subagent_create","agentId":"agt_1"}]}`, "subagent.agents[0].name", "harness gives subagents"},
		{"unknown entry key", `{"agents":[{"name":"a","agentId":"agt_1","model":"x"}]}`, "subagent.agents[0].model", "is not a subagent tool field"},
		{"blocking not a bool", `{"agents":[{"name":"a","agentId":"agt_1","blocking":"no"}]}`, "subagent.agents[0].blocking", "must be a bool"},
		{"depth past the limit", `{"agents":[{"name":"a","agentId":"agt_1"}],"maxDepth":11}`, "subagent.maxDepth", "between 1 and 10"},
		{"negative children", `{"agents":[{"name":"a","agentId":"agt_1"}],"maxChildrenPerTurn":-1}`, "subagent.maxChildrenPerTurn", "between 1 and 50"},
		{"bad property", `{"agents":[{"name":"a","agentId":"agt_1","initUserMessageProperty":"a-b"}]}`, "subagent.agents[0].initUserMessageProperty", "must be a property name"},
		{"mixed run_subagent", `{"agents":[{"name":"a","agentId":"agt_1"},{"name":"b","agentId":"agt_2","blocking":false}],"runSubagent":true}`, "subagent.runSubagent", "all be blocking or all non-blocking"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agentconfig.Parse([]byte(`{"model":{"provider":"scripted"},"subagent":` + tt.subagent + `}`))
			fe := fieldError(t, err)
			if fe.Field != tt.field || !strings.Contains(fe.Problem, tt.problem) {
				t.Errorf("refusal at %q: %q; want %q containing %q", fe.Field, fe.Problem, tt.field, tt.problem)
			}
		})
	}
}

func TestFlagOn(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "TRUE": true, "1": true, "Yes": true, "": false, "0": false, "no": false, "on": false} {
		if got := agentconfig.FlagOn(v); got != want {
			t.Errorf("FlagOn(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestParseResumableSubagent(t *testing.T) {
	c, err := agentconfig.Parse([]byte(`{"model":{"provider":"scripted"},"subagent":{"agents":[
		{"name":"scout","agentId":"agt_1","resumable":{"receives_messages":"side_a","maxInstances":2,"parentCommunication":"explicit"}},
		{"name":"plain","agentId":"agt_2","resumable":false}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	scout, plain := c.Subagent.Agents[0], c.Subagent.Agents[1]
	if scout.Resumable == nil || scout.IsBlocking() || scout.Resumable.Instances() != 2 || !scout.Resumable.Explicit() {
		t.Errorf("scout = %+v: want resumable, non-blocking, two instances, explicit", scout)
	}
	if plain.Resumable != nil || !plain.IsBlocking() {
		t.Errorf("plain = %+v: resumable false is not resumable", plain)
	}
}

// immediate is true, false or the object form, which reads back as written.
func TestParseImmediate(t *testing.T) {
	var s agentconfig.Subagent
	if err := json.Unmarshal([]byte(`{"agents":[
		{"name":"a","agentId":"agt_1","immediate":true},
		{"name":"b","agentId":"agt_1","immediate":false},
		{"name":"c","agentId":"agt_1","immediate":{"nameEnv":"N","descriptionEnv":"D","scopedEnv":["K"]}}]}`), &s); err != nil {
		t.Fatal(err)
	}
	a, b, c := s.Agents[0].Immediate, s.Agents[1].Immediate, s.Agents[2].Immediate
	if a == nil || b != nil || c == nil || c.NameEnv != "N" || c.DescriptionEnv != "D" || len(c.ScopedEnv) != 1 || c.ScopedEnv[0] != "K" {
		t.Fatalf("immediate %+v %+v %+v, want true, none and the object", a, b, c)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"immediate":true`) || !strings.Contains(string(out), `"immediate":{"nameEnv":"N","descriptionEnv":"D","scopedEnv":["K"]}`) {
		t.Errorf("marshalled %s, want both forms back", out)
	}
}
