package api

import (
	"encoding/json"
	"log/slog"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/provider"
	"github.com/agentharness/harness/shared/store"
	"github.com/agentharness/harness/shared/tool"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// NewHarness wires the handler the way the deployed function runs it: table names and
// fallback credentials from getenv, models from the provider registry. Lambda's main and the
// local runner both call it, so they serve the same thing.
func NewHarness(db *dynamodb.Client, getenv func(string) string, tools func(config map[string]json.RawMessage, getenv func(string) string) (*tool.Set, error), logger *slog.Logger) (*Handler, error) {
	tables, err := store.TablesFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	return New(Options{
		Store:  store.New(db, tables),
		Tools:  func(config map[string]json.RawMessage) (*tool.Set, error) { return tools(config, getenv) },
		Model:  func(block json.RawMessage) (agent.Model, error) { return provider.New(block, getenv) },
		Logger: logger,
	}), nil
}
