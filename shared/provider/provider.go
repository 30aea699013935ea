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
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/anthropicmodel"
	"github.com/agentharness/harness/shared/awsclient"
	"github.com/agentharness/harness/shared/bedrockmodel"
	"github.com/agentharness/harness/shared/egress"
	"github.com/agentharness/harness/shared/googlemodel"
	"github.com/agentharness/harness/shared/openaimodel"
	"github.com/agentharness/harness/shared/scriptedmodel"
)

// Names lists the supported providers.
var Names = []string{"anthropic", "bedrock", "google", "openai", "scripted"}

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
		trusted := operatorSet(getenv, cfg.BaseURL, "OPENAI_BASE_URL")
		cfg.Transport = transport(getenv, trusted)
		return openaimodel.New(cfg, serviceKey(getenv, trusted, "OPENAI_API_KEY"))
	case "anthropic":
		var cfg anthropicmodel.Config
		if err := decodeStrict(block, &cfg); err != nil {
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
		if err := decodeStrict(block, &cfg); err != nil {
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

// decodeStrict rejects fields the provider does not know or spells differently, so a typo
// fails loudly, and names the field.
func decodeStrict(block json.RawMessage, v any) error {
	if err := checkKeys("model", block, reflect.TypeOf(v)); err != nil {
		return err
	}
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

// checkKeys names, at its full path, the first key of raw that is not the JSON name of a field
// of t as spelled. encoding/json would match "APIKey" to apiKey, leaving a secret at a path the
// redaction of "model.apiKey" misses, and reports an unknown field without its path.
func checkKeys(path string, raw json.RawMessage, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil // not an object: the decoder reports the type
		}
		fields := jsonFields(t, map[string]reflect.Type{})
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			ft, ok := fields[k]
			if !ok {
				problem := "is not a field of this provider's model block"
				for name := range fields {
					if strings.EqualFold(name, k) {
						problem += fmt.Sprintf(" (field names are case-sensitive: %q)", name)
						break
					}
				}
				return &agentconfig.FieldError{Field: path + "." + k, Problem: problem}
			}
			if err := checkKeys(path+"."+k, obj[k], ft); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // json.RawMessage and []byte hold any JSON
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for i, item := range items {
			if err := checkKeys(fmt.Sprintf("%s[%d]", path, i), item, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields adds the JSON names of t's fields, embedded structs' included, to into.
func jsonFields(t reflect.Type, into map[string]reflect.Type) map[string]reflect.Type {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
			jsonFields(f.Type, into)
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		into[name] = f.Type
	}
	return into
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
