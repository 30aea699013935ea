// Package provider turns an agent's model block into a streaming model: it reads the
// "provider" field and hands the block to that provider's adapter. Checking a block when a
// config is written needs no adapter: that is package modelblock.
package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model/anthropicmodel"
	"github.com/agentharness/harness/shared/model/bedrockmodel"
	"github.com/agentharness/harness/shared/model/googlemodel"
	"github.com/agentharness/harness/shared/model/modelblock"
	"github.com/agentharness/harness/shared/model/openaimodel"
	"github.com/agentharness/harness/shared/model/scriptedmodel"
	"github.com/agentharness/harness/shared/wire/awsclient"
	"github.com/agentharness/harness/shared/wire/egress"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Config is what the operator sets for every agent's model: the service-wide fallback keys
// (OPENAI_API_KEY, ANTHROPIC_API_KEY, GOOGLE_API_KEY or else GEMINI_API_KEY), the one base URL
// besides OpenAI's own that the OpenAI key goes to (OPENAI_BASE_URL), and whether agents' own
// base URLs may reach private addresses (MODEL_PRIVATE_ENDPOINTS, "allow").
type Config struct {
	OpenAIKey, OpenAIBaseURL string
	AnthropicKey             string
	GoogleKey, GeminiKey     string
	PrivateEndpoints         string
}

// Keyed lists the providers c has a fallback key for, which an agent's block without a key of
// its own reaches (GET /models shows them).
func (c Config) Keyed() []string {
	var out []string
	for _, p := range []struct {
		name string
		set  bool
	}{{"openai", c.OpenAIKey != ""}, {"anthropic", c.AnthropicKey != ""}, {"google", c.GoogleKey != "" || c.GeminiKey != ""}} {
		if p.set {
			out = append(out, p.name)
		}
	}
	return out
}

// New builds the model an agent's model block names, with c's fallback keys.
//
// A service key goes only where the operator sends calls: the provider's own endpoint (a block
// without baseURL) or the base URL the operator set (OPENAI_BASE_URL…). An agent that names any
// other base URL brings its own key or calls without one; otherwise an account could have the
// service's key sent to a server it runs.
//
// Calls to such a base URL of the agent's own also connect only to public addresses (see
// package egress), unless the operator set MODEL_PRIVATE_ENDPOINTS=allow: otherwise an account
// could have the harness call into the operator's network (the Lambda runtime API, instance
// metadata, private services).
//
// A block with fallbacks builds each of its models, and steps go to the next when one is
// overloaded (fallback.go).
func New(block json.RawMessage, c Config) (agent.Model, error) {
	primary, fallbacks, err := modelblock.Split(block)
	if err != nil {
		return nil, err
	}
	m, err := newOne(primary, c)
	if err != nil || len(fallbacks) == 0 {
		return m, err
	}
	f := &fallback{models: []agent.Model{m}, names: []string{nameOf(primary)}}
	for i, fb := range fallbacks {
		fm, err := newOne(fb, c)
		if err != nil {
			return nil, fmt.Errorf("model.fallbacks[%d]: %w", i, err)
		}
		f.models, f.names = append(f.models, fm), append(f.names, nameOf(fb))
	}
	return f, nil
}

// newOne builds the model of a block without fallbacks.
func newOne(block json.RawMessage, c Config) (agent.Model, error) {
	name, err := modelblock.ProviderOf(block)
	if err != nil {
		return nil, err
	}
	switch name {
	case "scripted":
		var cfg scriptedmodel.Config
		if err := modelblock.Decode(block, &cfg); err != nil {
			return nil, err
		}
		m, err := scriptedmodel.New(cfg.Script)
		if err != nil {
			return nil, fmt.Errorf("model.%w", err)
		}
		return m, nil
	case "openai":
		var cfg openaimodel.Config
		if err := modelblock.Decode(block, &cfg); err != nil {
			return nil, err
		}
		trusted := operatorSet(cfg.BaseURL, c.OpenAIBaseURL)
		cfg.Transport = transport(c, trusted)
		return openaimodel.New(cfg, serviceKey(trusted, c.OpenAIKey))
	case "anthropic":
		var cfg anthropicmodel.Config
		if err := modelblock.Decode(block, &cfg); err != nil {
			return nil, err
		}
		if err := ownKey(cfg.BaseURL, cfg.APIKey, "ANTHROPIC_API_KEY"); err != nil {
			return nil, err
		}
		trusted := operatorSet(cfg.BaseURL, "")
		cfg.Transport = transport(c, trusted)
		return anthropicmodel.New(cfg, serviceKey(trusted, c.AnthropicKey))
	case "google":
		var cfg googlemodel.Config
		if err := modelblock.Decode(block, &cfg); err != nil {
			return nil, err
		}
		if err := ownKey(cfg.BaseURL, cfg.APIKey, "GOOGLE_API_KEY"); err != nil {
			return nil, err
		}
		trusted := operatorSet(cfg.BaseURL, "")
		cfg.Transport = transport(c, trusted)
		key := serviceKey(trusted, c.GoogleKey, c.GeminiKey)
		return googlemodel.New(context.Background(), cfg, key)
	default: // bedrock; providerOf knows no other
		var cfg bedrockmodel.Config
		if err := modelblock.Decode(block, &cfg); err != nil {
			return nil, err
		}
		// IAM credentials from the function's role: the default chain, nothing in the config.
		awsCfg, err := awsclient.Config(context.Background())
		if err != nil {
			return nil, err
		}
		awsCfg.HTTPClient = bedrockHTTP
		return bedrockmodel.New(cfg, awsCfg)
	}
}

// bedrockHTTP is the one HTTP client of every Bedrock model a warm function builds, so turns
// reuse its connections instead of opening one each.
var bedrockHTTP = awshttp.NewBuildableClient()

// ownKey refuses a block that sends calls to a base URL of its own without a key of its own,
// for providers whose calls always need one.
func ownKey(baseURL, apiKey, keyVar string) error {
	if baseURL != "" && apiKey == "" {
		return &agentconfig.FieldError{Field: "model.apiKey", Problem: "is required with a model.baseURL: the service's " + keyVar + " is sent only to the provider's own API"}
	}
	return nil
}

// operatorSet reports whether calls go where the operator sends them: to the provider's own
// endpoint (baseURL empty) or to the base URL the operator set, trusted.
func operatorSet(baseURL, trusted string) bool {
	if baseURL == "" {
		return true
	}
	return trusted != "" && strings.TrimRight(baseURL, "/") == strings.TrimRight(trusted, "/")
}

// transport returns nil (the adapter's default) for calls where the operator sends them, and
// otherwise one that connects only to public addresses unless the operator allows private ones.
func transport(c Config, trusted bool) *http.Transport {
	if trusted || egress.PrivateAllowed(c.PrivateEndpoints) {
		return nil
	}
	return egress.Transport()
}

// serviceKey returns the first set of keys when calls go where the operator sends them
// (trusted, from operatorSet), and "" otherwise.
func serviceKey(trusted bool, keys ...string) string {
	if !trusted {
		return ""
	}
	for _, k := range keys {
		if k != "" {
			return k
		}
	}
	return ""
}
