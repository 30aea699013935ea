package api

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/agents"
	"github.com/agentharness/harness/shared/provider"
	"github.com/agentharness/harness/shared/store"
	"github.com/agentharness/harness/shared/tool"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// NewHarness wires harness-processing the way the deployed function runs it: table names and
// fallback credentials from getenv, models from the provider registry, agent secrets opened
// with sealer. Lambda's main and the local runner both call it, so they serve the same thing.
func NewHarness(db *dynamodb.Client, sealer agents.Sealer, getenv func(string) string, tools func(config map[string]json.RawMessage, getenv func(string) string) (*tool.Set, error), logger *slog.Logger) (*Handler, error) {
	tables, err := store.TablesFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	var timeout time.Duration
	if v := getenv("APPROVAL_TIMEOUT"); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil || timeout <= 0 {
			return nil, fmt.Errorf("APPROVAL_TIMEOUT is %q, want a positive duration such as 24h or 90m", v)
		}
	}
	st := store.New(db, tables)
	return New(Options{
		ApprovalTimeout: timeout,
		Store:           st,
		Agents:          agents.New(st, sealer, agentconfig.Checks{}, nil),
		Tools:           func(config map[string]json.RawMessage) (*tool.Set, error) { return tools(config, getenv) },
		Model:           func(block json.RawMessage) (agent.Model, error) { return provider.New(block, getenv) },
		Logger:          logger,
	}), nil
}

// NewAccountManage wires account-manage: tables, the admin secret and the signup mode from
// getenv, agent configs checked by checks and their secrets sealed with sealer.
func NewAccountManage(db *dynamodb.Client, sealer agents.Sealer, getenv func(string) string, checks agentconfig.Checks, logger *slog.Logger) (*AccountsHandler, error) {
	tables, err := store.AccountTablesFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	var open bool
	switch mode := getenv("ACCOUNT_SIGNUP"); mode {
	case "", "admin":
	case "open":
		open = true
	default:
		return nil, fmt.Errorf("ACCOUNT_SIGNUP is %q, want admin or open", mode)
	}
	st := store.New(db, tables)
	return NewAccounts(AccountsOptions{
		Store:       st,
		Agents:      agents.New(st, sealer, checks, nil),
		AdminSecret: getenv("ADMIN_SECRET"),
		OpenSignup:  open,
		Logger:      logger,
	}), nil
}
