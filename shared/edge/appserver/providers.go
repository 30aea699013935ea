package appserver

// The provider commands (protocol_v2's list_connect_providers, connect_provider and
// disconnect_provider) on the account's own provider keys (PUT /accounts/me/providers/…):
// sealed on the account's item, and used by its agents whose model block names no key. Only the
// account secret may: a token's end user does not own the account's keys.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/state/providerkeys"
	"github.com/agentharness/harness/shared/state/store"
)

// providerFields are the fields connect_provider takes, by the keys Letta Code's own App Server
// gives them.
var providerFields = []map[string]any{
	{"key": "apiKey", "label": "API key", "secret": true, "required": true},
	{"key": "baseUrl", "label": "Base URL (an OpenAI-compatible proxy, say)", "required": false},
}

// providerNames are the providers' display names.
var providerNames = map[string]string{"anthropic": "Anthropic", "google": "Google Gemini", "openai": "OpenAI"}

// providerCommands answers a provider command; handled is false for another type.
func (c *call) providerCommands(ctx context.Context) (handled bool, err error) {
	switch c.cmd.Type {
	case "list_connect_providers", "connect_provider", "disconnect_provider":
	default:
		return false, nil
	}
	resp := c.cmd.Type + "_response"
	var cmd struct {
		Target       string            `json:"target"`
		ProviderID   string            `json:"provider_id"`
		AuthMethodID string            `json:"auth_method_id"`
		Fields       map[string]string `json:"fields"`
	}
	if err := c.decode(&cmd); err != nil {
		return true, c.fail(ctx, resp, err.Error())
	}
	keys := c.g.h.opts.ProviderKeys
	switch {
	case c.conn.Token():
		return true, c.fail(ctx, resp, c.cmd.Type+": an end-user token may not see or change the account's provider keys (only the account secret may)")
	case keys == nil:
		return true, c.fail(ctx, resp, "this deployment keeps no provider keys of accounts")
	case cmd.Target != "" && cmd.Target != "local":
		return true, c.fail(ctx, resp, fmt.Sprintf("target %q: the only store is \"local\", the account's own keys", cmd.Target))
	}
	changed := false
	now := time.Now()
	switch c.cmd.Type {
	case "connect_provider":
		if cmd.AuthMethodID != "" {
			return true, c.fail(ctx, resp, fmt.Sprintf("auth_method_id %q: the providers take an API key alone", cmd.AuthMethodID))
		}
		key := providerkeys.Key{Provider: cmd.ProviderID, APIKey: cmd.Fields["apiKey"], BaseURL: cmd.Fields["baseUrl"]}
		if field, problem := key.Problem(); field != "" {
			return true, c.fail(ctx, resp, fmt.Sprintf("fields.%s %s", map[string]string{"apiKey": "apiKey", "baseURL": "baseUrl"}[field], problem))
		}
		if err := keys.Put(ctx, c.conn.AccountID, key, now); err != nil {
			return true, c.fail(ctx, resp, providerRefusal(c, ctx, err))
		}
		changed = true
	case "disconnect_provider":
		if err := providerkeys.CheckProvider(cmd.ProviderID); err != nil {
			return true, c.fail(ctx, resp, "provider_id: "+err.Error())
		}
		switch err := keys.Delete(ctx, c.conn.AccountID, cmd.ProviderID, now); {
		case errors.Is(err, providerkeys.ErrNoKey):
		case err != nil:
			return true, c.fail(ctx, resp, providerRefusal(c, ctx, err))
		default:
			changed = true
		}
	}
	list, err := keys.List(ctx, c.conn.AccountID)
	if err != nil {
		return true, c.fail(ctx, resp, providerRefusal(c, ctx, err))
	}
	out := map[string]any{"type": resp, "success": true, "target": "local", "providers": providerEntries(list)}
	if c.cmd.Type != "list_connect_providers" {
		out["models_may_have_changed"] = changed
	}
	return true, c.reply(ctx, out)
}

func providerRefusal(c *call, ctx context.Context, err error) string {
	if errors.Is(err, providerkeys.ErrUnknownProvider) {
		return "provider_id: " + err.Error()
	}
	return c.refusal(ctx, err)
}

// providerEntries are the providers an account may keep a key of, each with its connection.
func providerEntries(keys []providerkeys.Key) []map[string]any {
	var out []map[string]any
	for _, p := range store.KeyedProviders {
		connected := map[string]any{"is_connected": false}
		var all []map[string]any
		for _, k := range keys {
			if k.Provider == p {
				connected = map[string]any{"is_connected": true, "id": p, "provider_name": p, "provider_type": p, "auth_type": "api"}
				if k.BaseURL != "" {
					connected["base_url"] = k.BaseURL
				}
				all = append(all, connected)
			}
		}
		if all == nil {
			all = []map[string]any{}
		}
		out = append(out, map[string]any{
			"id": p, "display_name": providerNames[p], "description": providerNames[p] + "'s models, called with the account's own key",
			"provider_type": p, "provider_name": p, "provider_names": []string{p}, "requires_api_key": true,
			"fields": providerFields, "connected": connected, "connected_providers": all,
		})
	}
	return out
}
