package agentconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// FieldError is a config problem at a field path such as "tools.tavilySearch.maxResults".
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Model is what the model check reports about an agent's model block.
type Model struct {
	Provider string
	// Secrets lists the block's fields that hold secrets ("apiKey").
	Secrets []string
	// RunsProviderTool reports whether the model runs a provider-defined tool.
	RunsProviderTool func(providerTool string) bool
	// ContextWindow is the model's context window in tokens as the catalogue knows it; 0: unknown.
	ContextWindow int
}

// Tool is what the tool check reports about one config.tools entry.
type Tool struct {
	// Warnings are accepted but ignored settings.
	Warnings []string
	// Secrets lists the entry's options that hold secrets.
	Secrets []string
}

// Checks validate the parts of a config that other packages own: the model block (the
// provider registry) and each tools entry (the static tool map). Their errors should be
// *FieldError; any other error is reported at the part's own path.
type Checks struct {
	Model func(block json.RawMessage) (Model, error)
	Tool  func(name string, entry json.RawMessage, m Model) (Tool, error)
}

// Validated is a config that passed every check.
type Validated struct {
	Config   *Config
	Warnings []string
	// Secrets are the dotted paths of the config's secret values ("model.apiKey",
	// "tools.tavilySearch.apiKey"), which are encrypted at rest and never shown.
	Secrets []string
}

// Validate parses raw and runs every check, so a config is refused with a *FieldError naming
// the exact field before anything is stored.
func Validate(raw []byte, c Checks) (*Validated, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.Name) == "" {
		return nil, &FieldError{Field: "name", Problem: "is required"}
	}
	if len(cfg.Name) > 200 {
		return nil, &FieldError{Field: "name", Problem: "must be at most 200 characters"}
	}
	if len(cfg.Description) > 1024 {
		return nil, &FieldError{Field: "description", Problem: "must be at most 1024 characters"}
	}
	if cfg.MaxSteps > MaxSteps {
		return nil, &FieldError{Field: "maxSteps", Problem: fmt.Sprintf("must be at most %d", MaxSteps)}
	}
	m, err := c.Model(cfg.Model)
	if err != nil {
		return nil, atField("model", err)
	}
	v := &Validated{Config: cfg}
	for _, s := range m.Secrets {
		v.Secrets = append(v.Secrets, "model."+s)
	}
	names := make([]string, 0, len(cfg.Tools))
	for name := range cfg.Tools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t, err := c.Tool(name, cfg.Tools[name], m)
		if err != nil {
			return nil, atField("tools."+name, err)
		}
		v.Warnings = append(v.Warnings, t.Warnings...)
		for _, s := range t.Secrets {
			v.Secrets = append(v.Secrets, "tools."+name+"."+s)
		}
	}
	if err := checkPrompts(cfg, c, m, v); err != nil {
		return nil, err
	}
	if err := checkContext(cfg, c, m, v); err != nil {
		return nil, err
	}
	if err := checkMCPServers(cfg, v); err != nil {
		return nil, err
	}
	if err := checkWorkspaceTools(cfg); err != nil {
		return nil, err
	}
	if err := checkSandboxVariables(cfg); err != nil {
		return nil, err
	}
	if err := checkMemory(cfg); err != nil {
		return nil, err
	}
	return v, nil
}

// MaxSteps bounds maxSteps: a turn past it is a runaway, not a plan.
const MaxSteps = 100

func atField(field string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe
	}
	return &FieldError{Field: field, Problem: err.Error()}
}

// Redacted stands in for a secret in every config the API returns. Sent back unchanged in a
// PATCH, it keeps the stored secret.
const Redacted = "[redacted]"

// Split takes the secret values at paths out of raw: it returns the config with each secret
// replaced by Redacted, and the secrets by path.
func Split(raw []byte, paths []string) ([]byte, map[string]string, error) {
	doc, err := decodeObject(raw)
	if err != nil {
		return nil, nil, err
	}
	secrets := map[string]string{}
	for _, p := range paths {
		parent, key, ok := lookup(doc, p)
		if !ok {
			continue
		}
		s, isString := parent[key].(string)
		if !isString {
			return nil, nil, &FieldError{Field: p, Problem: "must be a string"}
		}
		secrets[p] = s
		parent[key] = Redacted
	}
	out, err := json.Marshal(doc)
	return out, secrets, err
}

// Join puts secrets back into a redacted config.
func Join(redacted []byte, secrets map[string]string) ([]byte, error) {
	if len(secrets) == 0 {
		return redacted, nil
	}
	doc, err := decodeObject(redacted)
	if err != nil {
		return nil, err
	}
	for p, s := range secrets {
		if parent, key, ok := lookup(doc, p); ok {
			parent[key] = s
		}
	}
	return json.Marshal(doc)
}

// MergePatch applies an RFC 7396 JSON merge patch to a config: objects merge, null removes a
// field, anything else replaces it.
func MergePatch(raw, patch []byte) ([]byte, error) {
	doc, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	p, err := decodeObject(patch)
	if err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	return json.Marshal(merge(doc, p))
}

func merge(doc, patch map[string]any) map[string]any {
	for k, pv := range patch {
		if pv == nil {
			delete(doc, k)
			continue
		}
		pm, isObj := pv.(map[string]any)
		dm, wasObj := doc[k].(map[string]any)
		if isObj && wasObj {
			doc[k] = merge(dm, pm)
		} else if isObj {
			doc[k] = merge(map[string]any{}, pm)
		} else {
			doc[k] = pv
		}
	}
	return doc
}

// KeepRedacted replaces each Redacted value at paths in the plaintext config next with the
// secret stored at the same path, so a client that echoes a redacted config keeps its secrets.
func KeepRedacted(next []byte, stored map[string]string) ([]byte, error) {
	doc, err := decodeObject(next)
	if err != nil {
		return nil, err
	}
	for p, s := range stored {
		if parent, key, ok := lookup(doc, p); ok && parent[key] == Redacted {
			parent[key] = s
		}
	}
	return json.Marshal(doc)
}

func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	if doc == nil {
		return nil, errors.New("agent config: must be a JSON object")
	}
	return doc, nil
}

// lookup walks a dotted path to the object holding its last key.
func lookup(doc map[string]any, path string) (map[string]any, string, bool) {
	keys := strings.Split(path, ".")
	cur := doc
	for i := 0; i < len(keys)-1; i++ {
		switch next := cur[keys[i]].(type) {
		case map[string]any:
			cur = next
		case []any:
			// A list's item by its index (model.fallbacks.0.apiKey), an object in turn.
			n, err := strconv.Atoi(keys[i+1])
			if err != nil || n < 0 || n >= len(next) || i+1 == len(keys)-1 {
				return nil, "", false
			}
			item, ok := next[n].(map[string]any)
			if !ok {
				return nil, "", false
			}
			cur, i = item, i+1
		default:
			return nil, "", false
		}
	}
	last := keys[len(keys)-1]
	if _, ok := cur[last]; !ok {
		return nil, "", false
	}
	return cur, last, true
}
