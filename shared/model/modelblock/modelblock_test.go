package modelblock_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modelblock"
	"github.com/google/go-cmp/cmp"
)

// checked is what a test compares of an agentconfig.Model, whose RunsProviderTool is a func.
type checked struct {
	Provider         string
	Secrets          []string
	RunsGoogleSearch bool
	RunsOtherTool    bool
}

func summarize(m agentconfig.Model) checked {
	c := checked{Provider: m.Provider, Secrets: m.Secrets}
	if m.RunsProviderTool != nil {
		c.RunsGoogleSearch = m.RunsProviderTool(model.ProviderGoogleSearch)
		c.RunsOtherTool = m.RunsProviderTool("openai.web_search")
	}
	return c
}

func TestCheckValid(t *testing.T) {
	tests := []struct {
		name  string
		block string
		want  checked
	}{
		{
			name:  "scripted",
			block: `{"provider":"scripted","script":[{"toolCalls":[{"name":"current_time","input":{}}]},{"text":"It is {{toolResults}}"}]}`,
			want:  checked{Provider: "scripted"},
		},
		{
			name:  "openai with the service key",
			block: `{"provider":"openai","model":"gpt-4o-mini"}`,
			want:  checked{Provider: "openai"},
		},
		{
			name:  "openai with every field",
			block: `{"provider":"openai","model":"gpt-4o-mini","baseURL":"http://localhost:11434/v1","apiKey":"sk-test","settings":{"temperature":0.2,"topP":0.9,"maxTokens":512}}`,
			want:  checked{Provider: "openai", Secrets: []string{"apiKey"}},
		},
		{
			name:  "reasoning and cache",
			block: `{"provider":"anthropic","model":"claude-sonnet-4-5","reasoning":{"budgetTokens":2048},"cache":false,"settings":{"maxTokens":4096,"topP":0.95}}`,
			want:  checked{Provider: "anthropic"},
		},
		{
			name:  "reasoning with temperature on another OpenAI-compatible server",
			block: `{"provider":"openai","model":"deepseek-reasoner","baseURL":"https://api.deepseek.com","reasoning":{"effort":"high"},"settings":{"temperature":0.6}}`,
			want:  checked{Provider: "openai"},
		},
		{
			name:  "anthropic with the service key",
			block: `{"provider":"anthropic","model":"claude-sonnet-4-5"}`,
			want:  checked{Provider: "anthropic"},
		},
		{
			name:  "anthropic with every field",
			block: `{"provider":"anthropic","model":"claude-sonnet-4-5","baseURL":"https://proxy.example.com","apiKey":"sk-ant-test","settings":{"maxTokens":1024}}`,
			want:  checked{Provider: "anthropic", Secrets: []string{"apiKey"}},
		},
		{
			name:  "google with the service key",
			block: `{"provider":"google","model":"gemini-2.5-flash"}`,
			want:  checked{Provider: "google", RunsGoogleSearch: true},
		},
		{
			name:  "google with every field",
			block: `{"provider":"google","model":"gemini-2.5-flash","baseURL":"https://generativelanguage.googleapis.com","apiKey":"AIza-test","settings":{"temperature":1}}`,
			want:  checked{Provider: "google", Secrets: []string{"apiKey"}, RunsGoogleSearch: true},
		},
		{
			name:  "bedrock",
			block: `{"provider":"bedrock","model":"anthropic.claude-3-haiku-20240307-v1:0"}`,
			want:  checked{Provider: "bedrock"},
		},
		{
			name:  "bedrock with every field",
			block: `{"provider":"bedrock","model":"us.anthropic.claude-3-haiku-20240307-v1:0","region":"eu-west-1","settings":{"temperature":0,"maxTokens":256}}`,
			want:  checked{Provider: "bedrock"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := modelblock.Check(json.RawMessage(tt.block))
			if err != nil {
				t.Fatalf("Check(%s) = %v, want no error", tt.block, err)
			}
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("Check(%s) (-want +got):\n%s", tt.block, diff)
			}
		})
	}
}

// A block's fallbacks are checked as blocks of their own; their secrets are reported at their
// place in the list, and a provider-defined tool runs only where every model runs it.
func TestCheckFallbacks(t *testing.T) {
	info, err := modelblock.Check(json.RawMessage(`{"provider":"google","model":"gemini-2.5-flash","apiKey":"g",
		"fallbacks":[{"provider":"anthropic","model":"claude-sonnet-4-5","apiKey":"a"},{"provider":"bedrock","model":"amazon.nova-lite-v1:0"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"apiKey", "fallbacks.0.apiKey"}; !slices.Equal(info.Secrets, want) {
		t.Errorf("secrets = %v, want %v", info.Secrets, want)
	}
	if info.RunsProviderTool(model.ProviderGoogleSearch) {
		t.Error("google_search runs although the fallbacks cannot run it")
	}
	alone, err := modelblock.Check(json.RawMessage(`{"provider":"google","model":"gemini-2.5-flash","fallbacks":[{"provider":"google","model":"gemini-2.5-pro"}]}`))
	if err != nil || !alone.RunsProviderTool(model.ProviderGoogleSearch) {
		t.Errorf("google with a google fallback: %v %v", alone.RunsProviderTool(model.ProviderGoogleSearch), err)
	}
}

func TestCheckInvalid(t *testing.T) {
	type test struct {
		name      string
		block     string
		wantField string
	}
	tests := []test{
		{name: "unknown provider", block: `{"provider":"mistral","model":"large"}`, wantField: "model.provider"},
		{name: "missing provider", block: `{"model":"gpt-4o-mini"}`, wantField: "model.provider"},
		{name: "empty provider", block: `{"provider":"","model":"gpt-4o-mini"}`, wantField: "model.provider"},
		{name: "provider not a string", block: `{"provider":7}`, wantField: "model"},
		{name: "not an object", block: `"openai"`, wantField: "model"},
		{name: "not JSON", block: `{"provider":"openai",`, wantField: "model"},
		{name: "scripted: empty script", block: `{"provider":"scripted","script":[]}`, wantField: "model.script"},
		{name: "scripted: no script", block: `{"provider":"scripted"}`, wantField: "model.script"},
		{name: "scripted: tool call without a name", block: `{"provider":"scripted","script":[{"text":"hi"},{"toolCalls":[{"input":{}}]}]}`, wantField: "model.script[1].toolCalls[0].name"},
		{name: "scripted: unknown field", block: `{"provider":"scripted","script":[{"text":"hi"}],"temprature":0.2}`, wantField: "model.temprature"},
		{name: "scripted: unknown step field", block: `{"provider":"scripted","script":[{"txt":"hi"}]}`, wantField: "model.script[0].txt"},
		{name: "bedrock: apiKey", block: `{"provider":"bedrock","model":"amazon.nova-lite-v1:0","apiKey":"sk-test"}`, wantField: "model.apiKey"},
		{name: "bedrock: baseURL", block: `{"provider":"bedrock","model":"amazon.nova-lite-v1:0","baseURL":"https://bedrock.example.com"}`, wantField: "model.baseURL"},
		// encoding/json matches field names case-insensitively; a config must spell them
		// exactly, or a secret would be stored under a path the redaction does not know.
		{name: "apiKey spelled in another case", block: `{"provider":"openai","model":"gpt-4o-mini","APIKey":"sk-test"}`, wantField: "model.APIKey"},
		{name: "provider spelled in another case", block: `{"Provider":"anthropic","model":"claude-sonnet-4-5"}`, wantField: "model.Provider"},
		{name: "apiKey twice, once in another case", block: `{"provider":"google","model":"gemini-2.5-flash","apiKey":"a","APIKEY":"b"}`, wantField: "model.APIKEY"},
		{name: "settings field in another case", block: `{"provider":"bedrock","model":"amazon.nova-lite-v1:0","settings":{"Temperature":0.2}}`, wantField: "model.settings.Temperature"},
		{name: "scripted: step field in another case", block: `{"provider":"scripted","script":[{"text":"hi"},{"toolCalls":[{"Name":"current_time"}]}]}`, wantField: "model.script[1].toolCalls[0].Name"},
		{name: "fallbacks not a list", block: `{"provider":"openai","model":"m","fallbacks":{"provider":"openai"}}`, wantField: "model.fallbacks"},
		{name: "a fallback without a model", block: `{"provider":"openai","model":"m","fallbacks":[{"provider":"anthropic"}]}`, wantField: "model.fallbacks[0].model"},
		{name: "a fallback's unknown field", block: `{"provider":"openai","model":"m","fallbacks":[{"provider":"google","model":"g"},{"provider":"anthropic","model":"a","temprature":1}]}`, wantField: "model.fallbacks[1].temprature"},
		{name: "a fallback's fallbacks", block: `{"provider":"openai","model":"m","fallbacks":[{"provider":"anthropic","model":"a","fallbacks":[]}]}`, wantField: "model.fallbacks[0].fallbacks"},
		{name: "reasoning with neither", block: `{"provider":"anthropic","model":"a","reasoning":{}}`, wantField: "model.reasoning"},
		{name: "reasoning with both", block: `{"provider":"google","model":"g","reasoning":{"effort":"low","budgetTokens":2048}}`, wantField: "model.reasoning"},
		{name: "reasoning effort unknown", block: `{"provider":"openai","model":"o4-mini","reasoning":{"effort":"max"}}`, wantField: "model.reasoning.effort"},
		{name: "reasoning budget too small", block: `{"provider":"google","model":"g","reasoning":{"budgetTokens":512}}`, wantField: "model.reasoning.budgetTokens"},
		{name: "reasoning budget too large", block: `{"provider":"anthropic","model":"a","reasoning":{"budgetTokens":100000}}`, wantField: "model.reasoning.budgetTokens"},
		{name: "reasoning field unknown", block: `{"provider":"google","model":"g","reasoning":{"level":"low"}}`, wantField: "model.reasoning.level"},
		{name: "claude thinking with temperature", block: `{"provider":"anthropic","model":"a","reasoning":{"effort":"low"},"settings":{"temperature":0.5}}`, wantField: "model.settings.temperature"},
		{name: "claude thinking with a low topP", block: `{"provider":"anthropic","model":"a","reasoning":{"effort":"low"},"settings":{"topP":0.9}}`, wantField: "model.settings.topP"},
		{name: "claude thinking over maxTokens", block: `{"provider":"bedrock","model":"us.anthropic.claude-sonnet-4-20250514-v1:0","reasoning":{"effort":"medium"},"settings":{"maxTokens":8192}}`, wantField: "model.settings.maxTokens"},
		{name: "bedrock reasoning on a model without it", block: `{"provider":"bedrock","model":"us.amazon.nova-lite-v1:0","reasoning":{"effort":"low"}}`, wantField: "model.reasoning"},
		{name: "openai reasoning with temperature", block: `{"provider":"openai","model":"o4-mini","reasoning":{"effort":"low"},"settings":{"temperature":0.2,"topP":0.5}}`, wantField: "model.settings.temperature"},
		{name: "cache not a boolean", block: `{"provider":"anthropic","model":"a","cache":"no"}`, wantField: "model.cache"},
		{name: "too many fallbacks", block: `{"provider":"openai","model":"m","fallbacks":[{"provider":"openai","model":"a"},{"provider":"openai","model":"b"},{"provider":"openai","model":"c"},{"provider":"openai","model":"d"}]}`, wantField: "model.fallbacks"},
	}
	for _, p := range []string{"openai", "anthropic", "google", "bedrock"} {
		head := `{"provider":"` + p + `"`
		tests = append(tests,
			test{name: p + ": unknown field", block: head + `,"model":"m","temprature":0.2}`, wantField: "model.temprature"},
			test{name: p + ": unknown settings field", block: head + `,"model":"m","settings":{"temprature":0.2}}`, wantField: "model.settings.temprature"},
			test{name: p + ": temperature as a string", block: head + `,"model":"m","settings":{"temperature":"0.2"}}`, wantField: "model.settings.temperature"},
			test{name: p + ": maxTokens not an integer", block: head + `,"model":"m","settings":{"maxTokens":1.5}}`, wantField: "model.settings.maxTokens"},
			test{name: p + ": model not a string", block: head + `,"model":4}`, wantField: "model.model"},
			test{name: p + ": missing model id", block: head + `}`, wantField: "model.model"},
			test{name: p + ": empty model id", block: head + `,"model":""}`, wantField: "model.model"},
			test{name: p + ": blank model id", block: head + `,"model":"  "}`, wantField: "model.model"},
		)
		if p != "bedrock" {
			tests = append(tests,
				test{name: p + ": baseURL without a scheme", block: head + `,"model":"m","baseURL":"localhost:8080/v1"}`, wantField: "model.baseURL"},
				test{name: p + ": baseURL not http", block: head + `,"model":"m","baseURL":"ftp://example.com"}`, wantField: "model.baseURL"},
				test{name: p + ": apiKey not a string", block: head + `,"model":"m","apiKey":123}`, wantField: "model.apiKey"},
			)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := modelblock.Check(json.RawMessage(tt.block))
			var fe *agentconfig.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Check(%s) = %v (%T), want a *agentconfig.FieldError at %s", tt.block, err, err, tt.wantField)
			}
			if fe.Field != tt.wantField || fe.Problem == "" {
				t.Errorf("Check(%s) = field %q, problem %q; want field %q and a problem", tt.block, fe.Field, fe.Problem, tt.wantField)
			}
		})
	}
}

func ExampleGoogleRuns() {
	fmt.Println(modelblock.GoogleRuns(model.ProviderGoogleSearch))
	fmt.Println(modelblock.GoogleRuns("openai.web_search"))
	// Output:
	// true
	// false
}
