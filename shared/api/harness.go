package api

import (
	"context"
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
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Deps are what every function's handler is built from: AWS clients, the secrets sealer, the
// environment the SAM template sets, the tool factories and the logger. Lambda mains and the
// local runner build handlers from the same Deps, so they serve the same thing.
type Deps struct {
	DB     *dynamodb.Client
	SQS    *sqs.Client
	S3     *s3.Client
	Sealer agents.Sealer
	Getenv func(string) string
	// Tools builds an agent's ToolSet from its config.tools.
	Tools func(config map[string]json.RawMessage, env tool.Env) (*tool.Set, error)
	// Checks validate agent configs when they are written (account-manage).
	Checks agentconfig.Checks
	Logger *slog.Logger
}

// NewHarness wires harness-processing: table names and fallback credentials from getenv,
// models from the provider registry, agent secrets opened with the sealer.
func NewHarness(d Deps) (*Handler, error) {
	getenv := d.Getenv
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
	st := store.New(d.DB, tables)
	env := tool.Env{Getenv: getenv, Send: sqsSender(d.SQS)}
	return New(Options{
		ApprovalTimeout: timeout,
		Store:           st,
		Agents:          agents.New(st, d.Sealer, agentconfig.Checks{}, nil),
		Tools:           func(config map[string]json.RawMessage) (*tool.Set, error) { return d.Tools(config, env) },
		Model:           func(block json.RawMessage) (agent.Model, error) { return provider.New(block, getenv) },
		Logger:          d.Logger,
	}), nil
}

// NewAccountManage wires account-manage: tables, the admin secret and the signup mode from
// getenv, agent configs checked by d.Checks and their secrets sealed with d.Sealer.
func NewAccountManage(d Deps) (*AccountsHandler, error) {
	getenv := d.Getenv
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
	st := store.New(d.DB, tables)
	return NewAccounts(AccountsOptions{
		Store:       st,
		Agents:      agents.New(st, d.Sealer, d.Checks, nil),
		AdminSecret: getenv("ADMIN_SECRET"),
		OpenSignup:  open,
		Logger:      d.Logger,
	}), nil
}

// sqsSender sends message bodies with c; nil without a client.
func sqsSender(c *sqs.Client) func(ctx context.Context, queueURL, body string) error {
	if c == nil {
		return nil
	}
	return func(ctx context.Context, queueURL, body string) error {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: &body})
		if err != nil {
			return fmt.Errorf("sending to %s: %w", queueURL, err)
		}
		return nil
	}
}
