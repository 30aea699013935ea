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

// New builds the model an agent's model block names. getenv supplies service-wide fallback
// credentials such as OPENAI_API_KEY.
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
func New(block json.RawMessage, getenv func(string) string) (agent.Model, error) {
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
		trusted := operatorSet(getenv, cfg.BaseURL, "OPENAI_BASE_URL")
		cfg.Transport = transport(getenv, trusted)
		return openaimodel.New(cfg, serviceKey(getenv, trusted, "OPENAI_API_KEY"))
	case "anthropic":
		var cfg anthropicmodel.Config
		if err := modelblock.Decode(block, &cfg); err != nil {
			return nil, err
		}
		if err := ownKey(cfg.BaseURL, cfg.APIKey, "ANTHROPIC_API_KEY"); err != nil {
			return nil, err
		}
		trusted := operatorSet(getenv, cfg.BaseURL, "")
		cfg.Transport = transport(getenv, trusted)
		return anthropicmodel.New(cfg, serviceKey(getenv, trusted, "ANTHROPIC_API_KEY"))
	case "google":
		var cfg googlemodel.Config
		if err := modelblock.Decode(block, &cfg); err != nil {
			return nil, err
		}
		if err := ownKey(cfg.BaseURL, cfg.APIKey, "GOOGLE_API_KEY"); err != nil {
			return nil, err
		}
		trusted := operatorSet(getenv, cfg.BaseURL, "")
		cfg.Transport = transport(getenv, trusted)
		key := serviceKey(getenv, trusted, "GOOGLE_API_KEY", "GEMINI_API_KEY")
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
// endpoint (baseURL empty) or to the base URL the operator set in baseVar.
func operatorSet(getenv func(string) string, baseURL, baseVar string) bool {
	if baseURL == "" {
		return true
	}
	trusted := ""
	if baseVar != "" {
		trusted = getenv(baseVar)
	}
	return trusted != "" && strings.TrimRight(baseURL, "/") == strings.TrimRight(trusted, "/")
}

// transport returns nil (the adapter's default) for calls where the operator sends them, and
// otherwise one that connects only to public addresses unless the operator allows private ones.
func transport(getenv func(string) string, trusted bool) *http.Transport {
	if trusted || egress.PrivateAllowed(getenv) {
		return nil
	}
	return egress.Transport()
}

// serviceKey returns the first set of keyVars when calls go where the operator sends them
// (trusted, from operatorSet), and "" otherwise.
func serviceKey(getenv func(string) string, trusted bool, keyVars ...string) string {
	if !trusted {
		return ""
	}
	for _, k := range keyVars {
		if v := getenv(k); v != "" {
			return v
		}
	}
	return ""
}
