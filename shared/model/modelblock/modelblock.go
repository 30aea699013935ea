// Package modelblock is the model block of an agent config: the providers there are, the
// fields each takes, and the check a block passes when a config is written. It links no
// provider SDK, so account-manage checks blocks without them; package provider builds the
// model a block names.
package modelblock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/catalogue"
	"github.com/agentharness/harness/shared/model/scriptedmodel"
)

// Names lists the supported providers.
var Names = []string{"anthropic", "bedrock", "google", "openai", "scripted"}

// Hosted is the block of a provider reached over HTTP with an API key: openai (and any
// OpenAI-compatible base URL), anthropic and google.
type Hosted struct {
	Provider string         `json:"provider"`
	Model    string         `json:"model"`
	BaseURL  string         `json:"baseURL,omitempty"`
	APIKey   string         `json:"apiKey,omitempty"`
	Settings model.Settings `json:"settings,omitempty"`
	// Reasoning sets how much a reasoning model thinks; nil leaves the provider's default.
	Reasoning *model.Reasoning `json:"reasoning,omitempty"`
	// Cache, false, turns prompt caching off; it is on by default where it saves money.
	Cache *bool `json:"cache,omitempty"`
	// Transport, when set, is the base of the transport the calls go through (provider.New sets
	// one that connects only to public addresses for a base URL an agent names). Not part of
	// the JSON block.
	Transport *http.Transport `json:"-"`
}

// Bedrock is the block of a Bedrock model, called with the function's IAM credentials.
type Bedrock struct {
	Provider string `json:"provider"`
	// Model is a model id, or an inference profile id or ARN.
	Model string `json:"model"`
	// Region overrides the aws.Config's region, for models offered elsewhere than the function runs.
	Region    string           `json:"region,omitempty"`
	Settings  model.Settings   `json:"settings,omitempty"`
	Reasoning *model.Reasoning `json:"reasoning,omitempty"`
	Cache     *bool            `json:"cache,omitempty"`
}

// BedrockReasons reports whether the Bedrock model id (or inference profile) is one whose
// reasoning the harness sets: Anthropic's Claude, through its extended thinking.
func BedrockReasons(id string) bool {
	return strings.Contains(id, "anthropic.claude")
}

// BedrockCaches reports whether the Bedrock model takes cache points (Bedrock's prompt caching
// docs): Claude and Nova models (Nova in its system prompt and messages, not after its tools).
// Others refuse a request that carries one, so caching is on by default for these only.
func BedrockCaches(id string) bool {
	return strings.Contains(id, "anthropic.claude") || strings.Contains(id, "amazon.nova")
}

// GoogleRuns reports whether the google adapter runs the provider-defined tool providerTool (a
// model.ToolSpec's ProviderTool): Google Search grounding only.
func GoogleRuns(providerTool string) bool {
	return providerTool == model.ProviderGoogleSearch
}

// MaxFallbacks bounds a block's fallbacks.
const MaxFallbacks = 3

// Split takes a block's fallbacks out of it: the block without them, and each fallback's own
// block. A block without fallbacks is returned as it is.
func Split(block json.RawMessage) (json.RawMessage, []json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(block, &obj); err != nil {
		return nil, nil, &agentconfig.FieldError{Field: "model", Problem: "must be an object with a provider: " + err.Error()}
	}
	raw, ok := obj["fallbacks"]
	if !ok {
		return block, nil, nil
	}
	var fallbacks []json.RawMessage
	if err := json.Unmarshal(raw, &fallbacks); err != nil {
		return nil, nil, &agentconfig.FieldError{Field: "model.fallbacks", Problem: "must be a list of model blocks"}
	}
	if len(fallbacks) > MaxFallbacks {
		return nil, nil, &agentconfig.FieldError{Field: "model.fallbacks", Problem: fmt.Sprintf("lists %d models, more than %d", len(fallbacks), MaxFallbacks)}
	}
	delete(obj, "fallbacks")
	primary, err := json.Marshal(obj)
	return primary, fallbacks, err
}

// Check validates a model block when a config is written: the provider is known, every field
// is one the provider takes, and the required ones are set, and so for each of its fallbacks
// (which have none of their own). It reports the block's secret fields, its fallbacks' with
// them ("fallbacks.0.apiKey"), and the provider-defined tools the model runs: those every one
// of its models runs, since any may answer a step.
func Check(block json.RawMessage) (agentconfig.Model, error) {
	primary, fallbacks, err := Split(block)
	if err != nil {
		return agentconfig.Model{}, err
	}
	info, err := checkOne(primary)
	if err != nil {
		return info, err
	}
	for i, fb := range fallbacks {
		at := fmt.Sprintf("model.fallbacks[%d]", i)
		if _, nested, err := Split(fb); err != nil || nested != nil {
			return info, &agentconfig.FieldError{Field: at + ".fallbacks", Problem: "a fallback has no fallbacks of its own: list them all in model.fallbacks"}
		}
		fbInfo, err := checkOne(fb)
		var fe *agentconfig.FieldError
		if errors.As(err, &fe) {
			return info, &agentconfig.FieldError{Field: at + strings.TrimPrefix(fe.Field, "model"), Problem: fe.Problem}
		}
		if err != nil {
			return info, err
		}
		for _, s := range fbInfo.Secrets {
			info.Secrets = append(info.Secrets, fmt.Sprintf("fallbacks.%d.%s", i, s))
		}
		runs := info.RunsProviderTool
		info.RunsProviderTool = func(tool string) bool { return runs(tool) && fbInfo.RunsProviderTool(tool) }
	}
	return info, nil
}

// checkOne is Check of a block without fallbacks.
func checkOne(block json.RawMessage) (agentconfig.Model, error) {
	name, err := ProviderOf(block)
	if err != nil {
		return agentconfig.Model{}, err
	}
	info := agentconfig.Model{Provider: name, RunsProviderTool: func(string) bool { return false }}
	var modelID, apiKey string
	switch name {
	case "scripted":
		var cfg scriptedmodel.Config
		if err := Decode(block, &cfg); err != nil {
			return info, err
		}
		if _, err := scriptedmodel.New(cfg.Script); err != nil {
			return info, &agentconfig.FieldError{Field: "model." + fieldOf(err.Error()), Problem: problemOf(err.Error())}
		}
		return info, nil
	case "openai", "anthropic", "google":
		var cfg Hosted
		if err := Decode(block, &cfg); err != nil {
			return info, err
		}
		modelID, apiKey = cfg.Model, cfg.APIKey
		if err := checkURL("model.baseURL", cfg.BaseURL); err != nil {
			return info, err
		}
		if err := checkReasoning(name, cfg.BaseURL, cfg.Reasoning, cfg.Settings); err != nil {
			return info, err
		}
		if name == "google" {
			info.RunsProviderTool = GoogleRuns
		}
	case "bedrock":
		var cfg Bedrock
		if err := Decode(block, &cfg); err != nil {
			return info, err
		}
		modelID = cfg.Model
		if err := checkReasoning(name, "", cfg.Reasoning, cfg.Settings); err != nil {
			return info, err
		}
		if cfg.Reasoning != nil && !BedrockReasons(cfg.Model) {
			return info, &agentconfig.FieldError{Field: "model.reasoning", Problem: fmt.Sprintf("bedrock model %q has no reasoning setting the harness knows (Claude models on Bedrock take one); leave it out", cfg.Model)}
		}
	}
	if strings.TrimSpace(modelID) == "" {
		return info, &agentconfig.FieldError{Field: "model.model", Problem: "is required for the " + name + " provider"}
	}
	if apiKey != "" {
		info.Secrets = []string{"apiKey"}
	}
	if m, ok := catalogue.Lookup(name, modelID); ok {
		info.ContextWindow = m.ContextWindow
	}
	return info, nil
}

// ContextWindow is the context window, in tokens, the catalogue gives the model of block (its
// own, not its fallbacks'); 0 when the catalogue does not know it.
func ContextWindow(block json.RawMessage) int {
	primary, _, err := Split(block)
	if err != nil {
		return 0
	}
	var b struct {
		Provider string `json:"provider"`
		Model    string `json:"model"`
	}
	if json.Unmarshal(primary, &b) != nil {
		return 0
	}
	m, _ := catalogue.Lookup(b.Provider, b.Model)
	return m.ContextWindow
}

// checkReasoning checks a block's reasoning: one of an effort (low, medium, high) and a budget
// of at least model.MinReasoningBudget tokens. With Claude's extended thinking (anthropic, and
// Claude on bedrock) the answer's maxTokens must exceed the budget, and temperature may not be
// set nor topP below 0.95 (Anthropic's extended thinking docs). OpenAI's own reasoning models
// take neither temperature nor topP (OpenAI's reasoning models docs); another server's may.
func checkReasoning(provider, baseURL string, r *model.Reasoning, s model.Settings) error {
	if r == nil {
		return nil
	}
	fail := func(field, problem string) error {
		return &agentconfig.FieldError{Field: "model.reasoning" + field, Problem: problem}
	}
	switch {
	case r.Effort == "" && r.BudgetTokens == 0:
		return fail("", "sets neither effort nor budgetTokens")
	case r.Effort != "" && r.BudgetTokens != 0:
		return fail("", "sets both effort and budgetTokens: give one")
	case r.Effort != "" && r.Effort != model.EffortLow && r.Effort != model.EffortMedium && r.Effort != model.EffortHigh:
		return fail(".effort", fmt.Sprintf("%q is not one of low, medium, high", r.Effort))
	case r.Effort == "" && r.BudgetTokens < model.MinReasoningBudget:
		return fail(".budgetTokens", fmt.Sprintf("must be at least %d", model.MinReasoningBudget))
	case r.BudgetTokens > model.MaxReasoningBudget:
		return fail(".budgetTokens", fmt.Sprintf("must be at most %d", model.MaxReasoningBudget))
	}
	if provider == "openai" && baseURL == "" {
		field := ""
		if s.TopP != nil {
			field = "topP"
		}
		if s.Temperature != nil {
			field = "temperature"
		}
		if field != "" {
			return &agentconfig.FieldError{Field: "model.settings." + field, Problem: "cannot be set with reasoning: OpenAI's reasoning models take none"}
		}
	}
	if provider != "anthropic" && provider != "bedrock" {
		return nil
	}
	switch {
	case s.MaxTokens != nil && *s.MaxTokens <= int64(r.Budget()):
		return &agentconfig.FieldError{Field: "model.settings.maxTokens", Problem: fmt.Sprintf("must exceed the reasoning budget (%d tokens): Claude's thinking counts toward it", r.Budget())}
	case s.Temperature != nil:
		return &agentconfig.FieldError{Field: "model.settings.temperature", Problem: "cannot be set with reasoning: Claude's extended thinking takes no temperature"}
	case s.TopP != nil && *s.TopP < 0.95:
		return &agentconfig.FieldError{Field: "model.settings.topP", Problem: "must be at least 0.95 with reasoning (Claude's extended thinking)"}
	}
	return nil
}

// ProviderOf reads and checks the block's provider field.
func ProviderOf(block json.RawMessage) (string, error) {
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

// Decode decodes a block into v, the provider's block type. It rejects fields the provider does not know or spells differently, so a typo
// fails loudly, and names the field.
func Decode(block json.RawMessage, v any) error {
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
