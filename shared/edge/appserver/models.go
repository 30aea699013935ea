package appserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/catalogue"
	"github.com/agentharness/harness/shared/model/modelblock"
)

// modelEntry is a catalogue model as Letta's ListModelsResponseModelEntry shows it, with the
// entry GET /models lists under model.
type modelEntry struct {
	ID          string          `json:"id"`
	Handle      string          `json:"handle"`
	Label       string          `json:"label"`
	Description string          `json:"description"`
	Free        bool            `json:"free,omitempty"`
	Model       catalogue.Entry `json:"model"`
}

// describe is a model's one line: its context window and prices, where known.
func describe(m catalogue.Model) string {
	var parts []string
	if m.ContextWindow > 0 {
		parts = append(parts, fmt.Sprintf("%dk context", m.ContextWindow/1000))
	}
	if p := m.Pricing; p != nil {
		parts = append(parts, fmt.Sprintf("$%.2f in, $%.2f out per million tokens (as of %s)", p.InputPerMTok, p.OutputPerMTok, m.PricesAsOf))
	}
	return strings.Join(parts, "; ")
}

// listModels answers list_models from the catalogue GET /models reads: every model, and in
// available_handles those the account reaches.
func (c *call) listModels(ctx context.Context) error {
	const resp = "list_models_response"
	reach, err := catalogue.Of(ctx, c.g.h.opts.Deployment, c.g.h.opts.AccountKeys, c.conn.AccountID)
	if err != nil {
		return c.reply(ctx, map[string]any{"type": resp, "success": false, "entries": []any{}, "available_handles": nil, "error": c.refusal(ctx, err)})
	}
	entries, available := []modelEntry{}, []string{}
	for _, e := range reach.Models() {
		free := e.Pricing != nil && e.Pricing.InputPerMTok == 0 && e.Pricing.OutputPerMTok == 0
		entries = append(entries, modelEntry{ID: e.ID, Handle: e.Handle(), Label: e.Label, Description: describe(e.Model), Free: free, Model: e})
		if e.Available {
			available = append(available, e.Handle())
		}
	}
	return c.reply(ctx, map[string]any{"type": resp, "success": true, "entries": entries, "available_handles": available})
}

// updateModel answers update_model: the runtime's agent runs on the model from now on, in
// every conversation (applied_to "agent": the harness keeps one model per agent, in its config).
// The model is a catalogue model_id or a model_handle "provider/model" of any model the
// provider takes; a reasoning_effort sets the block's reasoning with it. The same provider keeps the block's other fields (baseURL, apiKey, settings);
// another provider starts a block of its own, called with the account's or the operator's key,
// so a provider the account does not reach is refused. A token may not change an agent's
// config: its socket is refused.
func (c *call) updateModel(ctx context.Context) error {
	const resp = "update_model_response"
	if c.conn.Token() {
		return c.fail(ctx, resp, "update_model: an end-user token may not change the agent's model (only the account secret may)")
	}
	rt, _, err := c.runtime(ctx)
	if err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	var p struct {
		ModelID         *string         `json:"model_id"`
		ModelHandle     *string         `json:"model_handle"`
		ReasoningEffort json.RawMessage `json:"reasoning_effort"`
	}
	if len(c.cmd.Payload) == 0 || json.Unmarshal(c.cmd.Payload, &p) != nil {
		return c.fail(ctx, resp, "payload must be an object with model_id or model_handle")
	}
	reasoning, err := reasoningOf(p.ReasoningEffort)
	if err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	provider, id, err := resolveModel(p.ModelID, p.ModelHandle)
	if err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	view, err := c.g.agents.Get(ctx, c.conn.AccountID, rt.AgentID)
	if err != nil {
		return c.fail(ctx, resp, c.refusal(ctx, err))
	}
	var cfg struct {
		Model map[string]json.RawMessage `json:"model"`
	}
	_ = json.Unmarshal(view.Config, &cfg) // a stored config was checked as it was stored
	var current string
	_ = json.Unmarshal(cfg.Model["provider"], &current)
	block := map[string]any{"model": id}
	if provider != current {
		reach, err := catalogue.Of(ctx, c.g.h.opts.Deployment, c.g.h.opts.AccountKeys, c.conn.AccountID)
		if err != nil {
			return c.fail(ctx, resp, c.refusal(ctx, err))
		}
		if _, ok := reach[provider]; !ok {
			return c.fail(ctx, resp, fmt.Sprintf("provider %s is not available to this account (no key for it: list_models shows what is); give the agent a model block with its own apiKey instead", provider))
		}
		for k := range cfg.Model {
			block[k] = nil // the old provider's fields go with it
		}
		block["provider"], block["model"] = provider, id
	}
	if reasoning != nil {
		block["reasoning"] = reasoning
	}
	patch, err := json.Marshal(map[string]any{"model": block})
	if err != nil {
		return err
	}
	updated, err := c.g.agents.Update(ctx, c.conn.AccountID, rt.AgentID, patch)
	if err != nil {
		return c.fail(ctx, resp, "model: "+c.refusal(ctx, agentconfig.HTTPError(err)))
	}
	var after struct {
		Model struct {
			Settings json.RawMessage `json:"settings"`
		} `json:"model"`
	}
	_ = json.Unmarshal(updated.Config, &after)
	var settings any
	if len(after.Model.Settings) > 0 {
		settings = after.Model.Settings
	}
	return c.reply(ctx, map[string]any{
		"type": resp, "success": true, "runtime": rt, "applied_to": "agent",
		"model_id": id, "model_handle": provider + "/" + id, "model_settings": settings,
	})
}

// reasoningOf reads update_model's reasoning_effort as the model block's reasoning: an effort
// (low, medium, high), or "none", which takes the block's reasoning away (a JSON null in the
// merge patch); nil when it is left out, which keeps the block's.
func reasoningOf(raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var effort string
	if json.Unmarshal(raw, &effort) != nil {
		return nil, fmt.Errorf("payload.reasoning_effort must be a string: low, medium, high or none")
	}
	switch effort {
	case model.EffortLow, model.EffortMedium, model.EffortHigh:
		return map[string]any{"effort": effort, "budgetTokens": nil}, nil
	case "none":
		return json.RawMessage("null"), nil
	}
	return nil, fmt.Errorf("payload.reasoning_effort %q is not one of low, medium, high, none", effort)
}

// resolveModel reads update_model's model: a catalogue id, or a handle "provider/model" (the
// provider one a model block names; scripted needs a script, which a handle cannot carry).
func resolveModel(modelID, handle *string) (provider, id string, err error) {
	switch {
	case (modelID == nil) == (handle == nil):
		return "", "", fmt.Errorf("send exactly one of payload.model_id and payload.model_handle")
	case modelID != nil:
		var found []catalogue.Model
		for _, m := range catalogue.All() {
			if m.ID == *modelID {
				found = append(found, m)
			}
		}
		if len(found) != 1 {
			return "", "", fmt.Errorf("payload.model_id %q is not a model of the catalogue (list_models lists them); send payload.model_handle \"provider/model\" for another", *modelID)
		}
		provider, id = found[0].Provider, found[0].ID
	default:
		var ok bool
		if provider, id, ok = strings.Cut(*handle, "/"); !ok || id == "" {
			return "", "", fmt.Errorf("payload.model_handle %q is not \"provider/model\"", *handle)
		}
		if !slices.Contains(modelblock.Names, provider) {
			return "", "", fmt.Errorf("payload.model_handle: provider %q is not one of %s", provider, strings.Join(modelblock.Names, ", "))
		}
	}
	if provider == "scripted" {
		return "", "", fmt.Errorf("the scripted model plays a script, which update_model cannot carry: set it in the agent's config")
	}
	return provider, id, nil
}

// updateToolset answers update_toolset. The harness's tools are the agent's config.tools (and
// its prompts, MCP servers, skills, subagents) with the controller's external tools: Letta
// Code's toolsets (codex, letta…) are its own local client tools, which the harness does not
// run. "auto" and "default" keep the agent's tools and are answered with current_toolset
// "default"; any other preference is refused, naming where the tools are set instead.
func (c *call) updateToolset(ctx context.Context) error {
	const resp = "update_toolset_response"
	rt, _, err := c.runtime(ctx)
	if err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	var cmd struct {
		Preference *string `json:"toolset_preference"`
	}
	if err := c.decode(&cmd); err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	switch {
	case cmd.Preference == nil:
		return c.fail(ctx, resp, `toolset_preference is required ("auto" or "default")`)
	case *cmd.Preference != "auto" && *cmd.Preference != "default":
		return c.fail(ctx, resp, fmt.Sprintf(`toolset_preference %q: the harness's tools are the agent's (config.tools) and the controller's external tools, so it takes "auto" or "default" only; change the agent's tools in its config, or narrow a turn's with client_tool_allowlist`, *cmd.Preference))
	}
	return c.reply(ctx, map[string]any{
		"type": resp, "success": true, "runtime": rt, "current_toolset": "default", "current_toolset_preference": *cmd.Preference,
	})
}
