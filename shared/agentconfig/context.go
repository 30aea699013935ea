package agentconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Context is config.context: the budget of input tokens of each model request, within which
// the oldest turns are summarized (compacted), and the model that writes the summaries.
type Context struct {
	// MaxInputTokens is the budget; 0 is DefaultBudgetShare of the context window.
	MaxInputTokens int `json:"maxInputTokens,omitempty"`
	// ContextWindow is the model's context window in tokens, for a model the catalogue does not
	// know (or knows otherwise); 0: the catalogue's.
	ContextWindow int `json:"contextWindow,omitempty"`
	// SummaryModel is a model block, as config.model, that writes the summaries; empty: the
	// agent's model.
	SummaryModel json.RawMessage `json:"summaryModel,omitempty"`
}

// Bounds of config.context, and the default budget's share of the context window.
const (
	MinInputTokens     = 1000
	MaxContextTokens   = 10_000_000
	DefaultBudgetShare = 0.8
)

// Budget is the input budget of an agent whose model's context window is window (0: unknown)
// under c (nil: none set): c's maxInputTokens, else DefaultBudgetShare of c's contextWindow or
// of window; 0 when neither is known.
func (c *Context) Budget(window int) int {
	if c != nil && c.MaxInputTokens > 0 {
		return c.MaxInputTokens
	}
	if c != nil && c.ContextWindow > 0 {
		window = c.ContextWindow
	}
	return int(float64(window) * DefaultBudgetShare)
}

// UnmarshalJSON decodes config.context, its refusals a *FieldError at the exact field.
func (c *Context) UnmarshalJSON(raw []byte) error {
	type plain Context
	var out plain
	if err := strictObject(raw, &out); err != nil {
		return &FieldError{Field: "context", Problem: "must be an object with maxInputTokens, contextWindow and summaryModel: " + err.Error()}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"maxInputTokens", out.MaxInputTokens}, {"contextWindow", out.ContextWindow}} {
		if f.v != 0 && (f.v < MinInputTokens || f.v > MaxContextTokens) {
			return &FieldError{Field: "context." + f.name, Problem: fmt.Sprintf("%d is out of range (%d to %d tokens)", f.v, MinInputTokens, MaxContextTokens)}
		}
	}
	if out.ContextWindow > 0 && out.MaxInputTokens > out.ContextWindow {
		return &FieldError{Field: "context.maxInputTokens", Problem: fmt.Sprintf("%d is more than context.contextWindow (%d)", out.MaxInputTokens, out.ContextWindow)}
	}
	*c = Context(out)
	return nil
}

// checkContext checks config.context against the agent's model m (whose ContextWindow is the
// catalogue's) and the summary model's block with c, whose secrets it adds to v.
func checkContext(cfg *Config, c Checks, m Model, v *Validated) error {
	if cfg.Context == nil {
		return nil
	}
	if window := m.ContextWindow; cfg.Context.ContextWindow == 0 && window > 0 && cfg.Context.MaxInputTokens > window {
		return &FieldError{Field: "context.maxInputTokens", Problem: fmt.Sprintf("%d is more than the model's context window (%d tokens)", cfg.Context.MaxInputTokens, window)}
	}
	if len(cfg.Context.SummaryModel) == 0 {
		return nil
	}
	sm, err := c.Model(cfg.Context.SummaryModel)
	if err != nil {
		// The model check names its fields as the agent's ("model.provider").
		var fe *FieldError
		if errors.As(err, &fe) {
			return &FieldError{Field: "context.summaryModel" + strings.TrimPrefix(fe.Field, "model"), Problem: fe.Problem}
		}
		return &FieldError{Field: "context.summaryModel", Problem: err.Error()}
	}
	for _, s := range sm.Secrets {
		v.Secrets = append(v.Secrets, "context.summaryModel."+s)
	}
	return nil
}
