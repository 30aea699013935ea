// Package provider turns an agent's model block into a streaming model: it reads the
// "provider" field and hands the block to that provider's adapter. Check validates a block
// when a config is written, without building a client.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/anthropicmodel"
	"github.com/agentharness/harness/shared/awsclient"
	"github.com/agentharness/harness/shared/bedrockmodel"
	"github.com/agentharness/harness/shared/googlemodel"
	"github.com/agentharness/harness/shared/openaimodel"
	"github.com/agentharness/harness/shared/scriptedmodel"
)

// Names lists the supported providers.
var Names = []string{"anthropic", "bedrock", "google", "openai", "scripted"}

// New builds the model an agent's model block names. getenv supplies service-wide fallback
// credentials such as OPENAI_API_KEY.
func New(block json.RawMessage, getenv func(string) string) (agent.Model, error) {
	name, err := providerOf(block)
	if err != nil {
		return nil, err
	}
	switch name {
	case "scripted":
		var cfg scriptedmodel.Config
		if err := decodeStrict(block, &cfg); err != nil {
			return nil, err
		}
		m, err := scriptedmodel.New(cfg.Script)
		if err != nil {
			return nil, fmt.Errorf("model.%w", err)
		}
		return m, nil
	case "openai":
		var cfg openaimodel.Config
		if err := decodeStrict(block, &cfg); err != nil {
			return nil, err
		}
		return openaimodel.New(cfg, getenv("OPENAI_API_KEY"))
	case "anthropic":
		var cfg anthropicmodel.Config
		if err := decodeStrict(block, &cfg); err != nil {
			return nil, err
		}
		return anthropicmodel.New(cfg, getenv("ANTHROPIC_API_KEY"))
	case "google":
		var cfg googlemodel.Config
		if err := decodeStrict(block, &cfg); err != nil {
			return nil, err
		}
		key := getenv("GOOGLE_API_KEY")
		if key == "" {
			key = getenv("GEMINI_API_KEY")
		}
		return googlemodel.New(context.Background(), cfg, key)
	default: // bedrock; providerOf knows no other
		var cfg bedrockmodel.Config
		if err := decodeStrict(block, &cfg); err != nil {
			return nil, err
		}
		// IAM credentials from the function's role: the default chain, nothing in the config.
		awsCfg, err := awsclient.Config(context.Background())
		if err != nil {
			return nil, err
		}
		return bedrockmodel.New(cfg, awsCfg)
	}
}

// Check validates a model block when a config is written: the provider is known, every field
// is one the provider takes, and the required ones are set. It reports the block's secret
// fields and the provider-defined tools the model runs.
func Check(block json.RawMessage) (agentconfig.Model, error) {
	name, err := providerOf(block)
	if err != nil {
		return agentconfig.Model{}, err
	}
	info := agentconfig.Model{Provider: name, RunsProviderTool: func(string) bool { return false }}
	var modelID, apiKey string
	switch name {
	case "scripted":
		var cfg scriptedmodel.Config
		if err := decodeStrict(block, &cfg); err != nil {
			return info, err
		}
		if _, err := scriptedmodel.New(cfg.Script); err != nil {
			return info, &agentconfig.FieldError{Field: "model." + fieldOf(err.Error()), Problem: problemOf(err.Error())}
		}
		return info, nil
	case "openai":
		var cfg openaimodel.Config
		if err := decodeStrict(block, &cfg); err != nil {
			return info, err
		}
		modelID, apiKey = cfg.Model, cfg.APIKey
		if err := checkURL("model.baseURL", cfg.BaseURL); err != nil {
			return info, err
		}
	case "anthropic":
		var cfg anthropicmodel.Config
		if err := decodeStrict(block, &cfg); err != nil {
			return info, err
		}
		modelID, apiKey = cfg.Model, cfg.APIKey
		if err := checkURL("model.baseURL", cfg.BaseURL); err != nil {
			return info, err
		}
	case "google":
		var cfg googlemodel.Config
		if err := decodeStrict(block, &cfg); err != nil {
			return info, err
		}
		modelID, apiKey = cfg.Model, cfg.APIKey
		if err := checkURL("model.baseURL", cfg.BaseURL); err != nil {
			return info, err
		}
		info.RunsProviderTool = googlemodel.Supports
	case "bedrock":
		var cfg bedrockmodel.Config
		if err := decodeStrict(block, &cfg); err != nil {
			return info, err
		}
		modelID = cfg.Model
	}
	if strings.TrimSpace(modelID) == "" {
		return info, &agentconfig.FieldError{Field: "model.model", Problem: "is required for the " + name + " provider"}
	}
	if apiKey != "" {
		info.Secrets = []string{"apiKey"}
	}
	return info, nil
}

// providerOf reads and checks the block's provider field.
func providerOf(block json.RawMessage) (string, error) {
	var head struct {
		Provider string `json:"provider"`
	}
	if err := json.Unmarshal(block, &head); err != nil {
		return "", &agentconfig.FieldError{Field: "model", Problem: "must be an object with a provider: " + err.Error()}
	}
	switch head.Provider {
	case "scripted", "openai", "anthropic", "google", "bedrock":
		return head.Provider, nil
	case "":
		return "", &agentconfig.FieldError{Field: "model.provider", Problem: "is required (one of " + strings.Join(Names, ", ") + ")"}
	default:
		return "", &agentconfig.FieldError{Field: "model.provider", Problem: fmt.Sprintf("%q is not supported (use one of %s)", head.Provider, strings.Join(Names, ", "))}
	}
}

func checkURL(field, u string) error {
	if u != "" && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return &agentconfig.FieldError{Field: field, Problem: "must be an http(s) URL"}
	}
	return nil
}

// decodeStrict rejects fields the provider does not know, so a typo fails loudly, and names
// the field.
func decodeStrict(block json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(block))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return &agentconfig.FieldError{Field: "model." + typeErr.Field, Problem: "must not be a JSON " + typeErr.Value + " (want " + typeErr.Type.String() + ")"}
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &agentconfig.FieldError{Field: "model." + strings.Trim(field, `"`), Problem: "is not a field of this provider's model block"}
	}
	return &agentconfig.FieldError{Field: "model", Problem: err.Error()}
}

// fieldOf and problemOf split a scriptedmodel error "script[0].toolCalls[1].name is empty".
func fieldOf(msg string) string {
	f, _, _ := strings.Cut(msg, " ")
	return f
}

func problemOf(msg string) string {
	_, p, _ := strings.Cut(msg, " ")
	return p
}
