package agentconfig_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/tool/builtintools"
)

// A prompt's problems are refused at the exact field, before anything is stored, and its
// secrets (its own model's key, its tools' keys) are found for sealing like the agent's.
func TestPromptsAreCheckedAtTheirField(t *testing.T) {
	model := `"model":{"provider":"scripted","script":[{"text":"ok"}]}`
	for _, tt := range []struct {
		prompts, field, problem string
	}{
		{`{"p":{"system":"s","temperature":1}}`, "prompts.p.temperature", "is not a prompt field"},
		{`{"p":{"system":"  "}}`, "prompts.p.system", "is required"},
		{`{"p":{"system":"s","maxSteps":"5"}}`, "prompts.p.maxSteps", "must be an integer"},
		{`{"p":{"system":"s","maxSteps":101}}`, "prompts.p.maxSteps", "between 1 and 100"},
		{`{"bad name":{"system":"s"}}`, "prompts.bad name", "must be a tool name"},
		{`{"current_time":{"system":"s"}}`, "prompts.current_time", "a tool of config.tools too"},
		{`{"load_skill":{"system":"s"}}`, "prompts.load_skill", "a tool the harness gives agents"},
		{`{"p":{"system":"s","execution":"same-invocation"}}`, "prompts.p.execution", "set async: true"},
		{`{"p":{"system":"s","async":true,"execution":"external-dispatch"}}`, "prompts.p.execution", "no outside worker completes it"},
		{`{"p":{"system":"s","needsApproval":"sometimes"}}`, "prompts.p.needsApproval", ""},
		{`{"p":{"system":"s","tools":{"nope":{}}}}`, "prompts.p.tools.nope", "unknown tool"},
		{`{"p":{"system":"s","tools":{"current_time":{"needsApproval":true}}}}`, "prompts.p.tools.current_time.needsApproval", "set needsApproval on the prompt itself"},
		{`{"p":{"system":"s","tools":{"test_async":{"async":true}}}}`, "prompts.p.tools.test_async.async", "make the prompt itself async"},
		{`{"p":{"system":"s","model":{"provider":"nobody"}}}`, "prompts.p.model.provider", ""},
		{`{"p":{"system":"s","inputSchema":{"type":"string"}}}`, "prompts.p.inputSchema", `"type": "object"`},
		{`{"p":{"system":"s","inputSchema":{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}}}`, "prompts.p.inputSchema", ""},
		{`{"p":{"system":"s","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}},"initUserMessageProperty":"b"}}`, "prompts.p.initUserMessageProperty", "does not declare"},
		{`{"p":{"system":"s","initAttachmentsProperty":"message"}}`, "prompts.p.initAttachmentsProperty", "must differ"},
	} {
		raw := `{"name":"a",` + model + `,"tools":{"current_time":{}},"prompts":` + tt.prompts + `}`
		_, err := agentconfig.Validate([]byte(raw), builtintools.ConfigChecks())
		var fe *agentconfig.FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Problem, tt.problem) {
			t.Errorf("%s: %v, want a FieldError at %s saying %q", tt.prompts, err, tt.field, tt.problem)
		}
	}

	v, err := agentconfig.Validate([]byte(`{"name":"a",`+model+`,"prompts":{"research":{"system":"s",
		"model":{"provider":"openai","model":"gpt-4o-mini","apiKey":"sk-p"},"tools":{"tavilySearch":{"apiKey":"tvly-p"}}}}}`), builtintools.ConfigChecks())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"prompts.research.model.apiKey", "prompts.research.tools.tavilySearch.apiKey"} {
		if !slices.Contains(v.Secrets, want) {
			t.Errorf("secrets %v lack %s", v.Secrets, want)
		}
	}
}
