package turnwire

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/tool"
)

// A block without a key of its own reads its provider's deployment key, from its secret, when
// first built; a block with its own key, or of another provider, reads none.
func TestOperatorKeysAreReadWhenABlockNeedsThem(t *testing.T) {
	var asked []string
	d := lambdadeps.Deps{Secret: func(_ context.Context, id string) (string, error) {
		asked = append(asked, id)
		if id == "arn:anthropic" {
			return "", errors.New("reading secret arn:anthropic: AccessDeniedException")
		}
		return "key-of-" + id, nil
	}}
	d.Config.Models = lambdadeps.Models{OpenAIKey: "sk-plain", OpenAIKeySecret: "arn:openai", AnthropicKeySecret: "arn:anthropic", GoogleKey: "g-plain"}
	keys := operatorKeys(d)
	ctx := context.Background()
	for _, tt := range []struct {
		block, wantOpenAI, wantGoogle, wantErr string
	}{
		{block: `{"provider":"openai","model":"m","apiKey":"sk-own"}`},
		{block: `{"provider":"bedrock","model":"m"}`},
		{block: `{"provider":"openai","model":"m"}`, wantOpenAI: "key-of-arn:openai"},
		{block: `{"provider":"openai","model":"n"}`, wantOpenAI: "key-of-arn:openai"},
		{block: `{"provider":"google","model":"m"}`, wantGoogle: "g-plain"},
		{block: `{"provider":"anthropic","model":"m"}`, wantErr: "ANTHROPIC_API_KEY_SECRET: reading secret arn:anthropic: AccessDeniedException"},
	} {
		c, err := keys.config(ctx, json.RawMessage(tt.block))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err = %v, want %q", tt.block, err, tt.wantErr)
			}
			continue
		}
		if err != nil || c.OpenAIKey != tt.wantOpenAI || c.GoogleKey != tt.wantGoogle || c.AnthropicKey != "" {
			t.Errorf("%s: config = %+v, %v; want OpenAIKey %q, GoogleKey %q", tt.block, c, err, tt.wantOpenAI, tt.wantGoogle)
		}
	}
	if want := []string{"arn:openai", "arn:anthropic"}; !slices.Equal(asked, want) {
		t.Errorf("read secrets %v, want %v: each once, and only when a block needs it", asked, want)
	}
}

// A config naming a Tavily tool reads the deployment's Tavily key from its secret, once; the
// tools see it as TAVILY_API_KEY. A config without one reads nothing.
func TestTheTavilyKeyIsReadWhenAToolNeedsIt(t *testing.T) {
	reads := 0
	d := lambdadeps.Deps{Secret: func(_ context.Context, id string) (string, error) {
		reads++
		return "tvly-from-" + id, nil
	}}
	d.Config.Tools = lambdadeps.Tools{TavilyAPIKeySecret: "arn:tavily", TavilyBaseURL: "https://tavily.example"}
	var seen []string
	build := func(_ map[string]json.RawMessage, env tool.Env) (*tool.Set, error) {
		seen = append(seen, env.Getenv("TAVILY_API_KEY")+" "+env.Getenv("TAVILY_BASE_URL"))
		return tool.NewSet()
	}
	tools := toolBuilder(build, tool.Env{Getenv: d.Config.Tools.Getenv}, d.Config.Tools, d.Key("TAVILY_API_KEY_SECRET", "", "arn:tavily"))
	for _, config := range []string{`{"current_time": {}}`, `{"tavilySearch": {}}`, `{"tavilyExtract": {}}`} {
		var c map[string]json.RawMessage
		if err := json.Unmarshal([]byte(config), &c); err != nil {
			t.Fatal(err)
		}
		if _, err := tools(context.Background(), c, tool.Vars{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{" https://tavily.example", "tvly-from-arn:tavily https://tavily.example", "tvly-from-arn:tavily https://tavily.example"}
	if !slices.Equal(seen, want) || reads != 1 {
		t.Errorf("the tools saw %q after %d reads, want %q after one", seen, reads, want)
	}
}
