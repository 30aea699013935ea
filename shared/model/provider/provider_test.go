package provider_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model/provider"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name      string
		block     string
		env       map[string]string // the variables set
		awsRegion string            // AWS_REGION, for bedrock
		want      string            // the adapter's type
	}{
		{
			name:  "scripted",
			block: `{"provider":"scripted","script":[{"text":"hi"}]}`,
			want:  "*scriptedmodel.Model",
		},
		{
			name:  "openai, key from OPENAI_API_KEY",
			block: `{"provider":"openai","model":"gpt-4o-mini"}`,
			env:   map[string]string{"OPENAI_API_KEY": "sk-env"},
			want:  "*openaimodel.Model",
		},
		{
			name:  "openai, key in the block",
			block: `{"provider":"openai","model":"gpt-4o-mini","apiKey":"sk-block","settings":{"temperature":0.2}}`,
			want:  "*openaimodel.Model",
		},
		{
			name:  "openai, a keyless local server",
			block: `{"provider":"openai","model":"llama3","baseURL":"http://localhost:11434/v1"}`,
			want:  "*openaimodel.Model",
		},
		{
			name:  "anthropic, key from ANTHROPIC_API_KEY",
			block: `{"provider":"anthropic","model":"claude-sonnet-4-5","settings":{"maxTokens":1024}}`,
			env:   map[string]string{"ANTHROPIC_API_KEY": "sk-ant-env"},
			want:  "*anthropicmodel.Model",
		},
		{
			name:  "anthropic, key in the block",
			block: `{"provider":"anthropic","model":"claude-sonnet-4-5","apiKey":"sk-ant-block","baseURL":"https://proxy.example.com"}`,
			want:  "*anthropicmodel.Model",
		},
		{
			name:  "google, key from GOOGLE_API_KEY",
			block: `{"provider":"google","model":"gemini-2.5-flash"}`,
			env:   map[string]string{"GOOGLE_API_KEY": "AIza-env"},
			want:  "*googlemodel.Model",
		},
		{
			name:  "google, key from GEMINI_API_KEY",
			block: `{"provider":"google","model":"gemini-2.5-flash"}`,
			env:   map[string]string{"GEMINI_API_KEY": "AIza-env"},
			want:  "*googlemodel.Model",
		},
		{
			name:  "google, key in the block",
			block: `{"provider":"google","model":"gemini-2.5-flash","apiKey":"AIza-block","baseURL":"https://generativelanguage.googleapis.com"}`,
			want:  "*googlemodel.Model",
		},
		{
			name:      "bedrock, region from AWS_REGION",
			block:     `{"provider":"bedrock","model":"anthropic.claude-3-haiku-20240307-v1:0","settings":{"maxTokens":256}}`,
			awsRegion: "us-east-1",
			want:      "*bedrockmodel.Model",
		},
		{
			name:  "bedrock, region in the block",
			block: `{"provider":"bedrock","model":"anthropic.claude-3-haiku-20240307-v1:0","region":"eu-west-1"}`,
			want:  "*bedrockmodel.Model",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearAWS(t)
			t.Setenv("AWS_REGION", tt.awsRegion)
			m, err := provider.New(json.RawMessage(tt.block), config(tt.env))
			if err != nil {
				t.Fatalf("New(%s) = %v, want a model", tt.block, err)
			}
			if got := fmt.Sprintf("%T", m); got != tt.want {
				t.Errorf("New(%s) = %s, want %s", tt.block, got, tt.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name      string
		block     string
		wantField string // for a *agentconfig.FieldError; "" for a plain error
		wantText  string // what the error must say
		env       map[string]string
	}{
		// The service's key never goes to a base URL an agent names.
		{name: "anthropic with a base URL of its own and no key", block: `{"provider":"anthropic","model":"claude-sonnet-4-5","baseURL":"https://collector.example"}`,
			env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-env"}, wantField: "model.apiKey", wantText: "sent only to the provider's own API"},
		{name: "google with a base URL of its own and no key", block: `{"provider":"google","model":"gemini-2.5-flash","baseURL":"https://collector.example"}`,
			env: map[string]string{"GOOGLE_API_KEY": "g-env"}, wantField: "model.apiKey", wantText: "GOOGLE_API_KEY"},
		{name: "openai without a key", block: `{"provider":"openai","model":"gpt-4o-mini"}`, wantText: "OPENAI_API_KEY"},
		{name: "anthropic without a key", block: `{"provider":"anthropic","model":"claude-sonnet-4-5"}`, wantText: "ANTHROPIC_API_KEY"},
		{name: "google without a key", block: `{"provider":"google","model":"gemini-2.5-flash"}`, wantText: "GOOGLE_API_KEY"},
		{name: "bedrock without a region", block: `{"provider":"bedrock","model":"amazon.nova-lite-v1:0"}`, wantText: "AWS_REGION"},
		{name: "bedrock maxTokens out of range", block: `{"provider":"bedrock","model":"amazon.nova-lite-v1:0","region":"us-east-1","settings":{"maxTokens":0}}`, wantText: "model.settings.maxTokens"},
		{name: "missing model id", block: `{"provider":"openai","apiKey":"sk-test"}`, wantText: "model.model"},
		{name: "scripted with an empty script", block: `{"provider":"scripted","script":[]}`, wantText: "model.script"},
		{name: "unknown provider", block: `{"provider":"mistral"}`, wantField: "model.provider"},
		{name: "unknown field", block: `{"provider":"anthropic","model":"m","apiKey":"k","temprature":1}`, wantField: "model.temprature"},
		{name: "wrong type", block: `{"provider":"google","model":"m","apiKey":"k","settings":{"temperature":"hot"}}`, wantField: "model.settings.temperature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearAWS(t)
			m, err := provider.New(json.RawMessage(tt.block), config(tt.env))
			if err == nil {
				t.Fatalf("New(%s) = %T, want an error", tt.block, m)
			}
			var fe *agentconfig.FieldError
			if isField := errors.As(err, &fe); isField != (tt.wantField != "") {
				t.Fatalf("New(%s) = %v (%T); want a *agentconfig.FieldError: %v", tt.block, err, err, tt.wantField != "")
			}
			if tt.wantField != "" && fe.Field != tt.wantField {
				t.Errorf("New(%s) error field = %q, want %q", tt.block, fe.Field, tt.wantField)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("New(%s) = %q, want it to name %s", tt.block, err, tt.wantText)
			}
		})
	}
}

// clearAWS points the AWS SDK at no shared config, no emulator and, unless the test sets them,
// no region or credentials, so New sees only what the test gives it.
func clearAWS(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	for _, name := range []string{
		"AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3",
	} {
		t.Setenv(name, "")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
}

// config is the Config the variables in vars set.
func config(vars map[string]string) provider.Config {
	return provider.Config{
		OpenAIKey: vars["OPENAI_API_KEY"], OpenAIBaseURL: vars["OPENAI_BASE_URL"], AnthropicKey: vars["ANTHROPIC_API_KEY"],
		GoogleKey: vars["GOOGLE_API_KEY"], GeminiKey: vars["GEMINI_API_KEY"], PrivateEndpoints: vars["MODEL_PRIVATE_ENDPOINTS"],
	}
}

// Keyed lists the providers with a fallback key; GEMINI_API_KEY alone counts for google.
func TestKeyed(t *testing.T) {
	tests := []struct {
		c    provider.Config
		want []string
	}{
		{provider.Config{}, nil},
		{provider.Config{OpenAIBaseURL: "https://llm.example.com/v1"}, nil},
		{provider.Config{OpenAIKey: "o", AnthropicKey: "a"}, []string{"openai", "anthropic"}},
		{provider.Config{GeminiKey: "g"}, []string{"google"}},
	}
	for _, tt := range tests {
		if got := tt.c.Keyed(); !slices.Equal(got, tt.want) {
			t.Errorf("%+v.Keyed() = %v, want %v", tt.c, got, tt.want)
		}
	}
}
