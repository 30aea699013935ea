// Package provider turns an agent's model block into a streaming model: it reads the
// "provider" field and hands the block to that provider's adapter.
package provider

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/openaimodel"
	"github.com/agentharness/harness/shared/scriptedmodel"
)

// New builds the model an agent's model block names. getenv supplies service-wide fallback
// credentials such as OPENAI_API_KEY.
func New(block json.RawMessage, getenv func(string) string) (agent.Model, error) {
	var head struct {
		Provider string `json:"provider"`
	}
	if err := json.Unmarshal(block, &head); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	switch head.Provider {
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
	case "":
		return nil, fmt.Errorf("model.provider is required")
	default:
		return nil, fmt.Errorf("model.provider %q is not supported (use scripted or openai)", head.Provider)
	}
}

// decodeStrict rejects fields the provider does not know, so a typo fails loudly.
func decodeStrict(block json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(block))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}
