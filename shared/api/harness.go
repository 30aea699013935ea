package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/agents"
	"github.com/agentharness/harness/shared/asynctools"
	"github.com/agentharness/harness/shared/blobstore"
	"github.com/agentharness/harness/shared/connections"
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
	// Poster sends frames to WebSocket connections (API Gateway's @connections, or the local
	// runner's sockets); nil where none can be reached.
	Poster Poster
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
	asyncTimeout, err := duration(getenv, "ASYNC_TOOL_TIMEOUT")
	if err != nil {
		return nil, err
	}
	async, redriver, err := asyncParts(d)
	if err != nil {
		return nil, err
	}
	st := store.New(d.DB, tables)
	var conns *connections.Registry
	if table := getenv("CONNECTIONS_TABLE"); table != "" && d.Poster != nil {
		conns = connections.New(d.DB, table)
	}
	env := tool.Env{Getenv: getenv, Send: sqsSender(d.SQS), Logger: d.Logger}
	send := sqsSender(d.SQS)
	queue := getenv("ASYNC_WORK_QUEUE_URL")
	return New(Options{
		ApprovalTimeout:  timeout,
		Store:            st,
		Agents:           agents.New(st, d.Sealer, agentconfig.Checks{}, nil),
		Tools:            func(config map[string]json.RawMessage) (*tool.Set, error) { return d.Tools(config, env) },
		Model:            func(block json.RawMessage) (agent.Model, error) { return provider.New(block, getenv) },
		Logger:           d.Logger,
		Async:            async,
		Redriver:         redriver,
		AsyncToolTimeout: asyncTimeout,
		Enqueue:          func(ctx context.Context, body string) error { return send(ctx, queue, body) },
		Connections:      conns,
		Poster:           d.Poster,
	}), nil
}

// duration reads an optional positive Go duration from the environment.
func duration(getenv func(string) string, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s is %q, want a positive duration such as 1h or 90m", name, v)
	}
	return d, nil
}

// asyncParts builds the async tool store (ASYNC_RESULTS_TABLE, with ASYNC_RESULTS_BUCKET for
// large results) and the redriver that enqueues continuations on ASYNC_WORK_QUEUE_URL.
func asyncParts(d Deps) (*asynctools.Store, *asynctools.Redriver, error) {
	table, bucket, queue := d.Getenv("ASYNC_RESULTS_TABLE"), d.Getenv("ASYNC_RESULTS_BUCKET"), d.Getenv("ASYNC_WORK_QUEUE_URL")
	for name, v := range map[string]string{"ASYNC_RESULTS_TABLE": table, "ASYNC_RESULTS_BUCKET": bucket, "ASYNC_WORK_QUEUE_URL": queue} {
		if v == "" {
			return nil, nil, fmt.Errorf("environment variable %s is not set", name)
		}
	}
	if d.SQS == nil || d.S3 == nil {
		return nil, nil, errors.New("async tools need SQS and S3 clients")
	}
	async := asynctools.NewStore(d.DB, table, blobstore.NewS3(d.S3, bucket))
	send := sqsSender(d.SQS)
	redriver := &asynctools.Redriver{Store: async, Send: func(ctx context.Context, c asynctools.Continuation) error {
		b, err := json.Marshal(workMessage{Type: "continue", AccountID: c.AccountID, GroupID: c.GroupID})
		if err != nil {
			return err
		}
		return send(ctx, queue, string(b))
	}}
	return async, redriver, nil
}

// NewCompletion wires async-tool-complete.
func NewCompletion(d Deps) (*CompletionHandler, error) {
	accounts := d.Getenv("ACCOUNTS_TABLE")
	if accounts == "" {
		return nil, errors.New("environment variable ACCOUNTS_TABLE is not set")
	}
	async, redriver, err := asyncParts(d)
	if err != nil {
		return nil, err
	}
	logger := d.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &CompletionHandler{
		store: store.New(d.DB, store.Tables{Accounts: accounts}), async: async, redriver: redriver,
		now: time.Now, maxBody: DefaultMaxCompletionBytes, logger: logger, errs: errorWriter{logger},
	}, nil
}

// NewWorker wires async-worker: the harness's turn machinery without HTTP, and a way to bring
// back soon a message whose conversation was busy.
func NewWorker(d Deps) (*Worker, error) {
	h, err := NewHarness(d)
	if err != nil {
		return nil, err
	}
	queue := d.Getenv("ASYNC_WORK_QUEUE_URL")
	return &Worker{h: h, retrySoon: func(ctx context.Context, receipt string) {
		_, err := d.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &queue, ReceiptHandle: &receipt, VisibilityTimeout: busyRetrySeconds})
		if err != nil {
			h.opts.Logger.WarnContext(ctx, "shortening the retry of a busy message", "err", err)
		}
	}}, nil
}

// busyRetrySeconds is how soon a message that found its conversation busy is tried again.
const busyRetrySeconds = 5

// NewSweeper wires the sweeper: the async tool store, and ACCOUNTS_TABLE for the purges of
// deleted accounts it queues again on ASYNC_WORK_QUEUE_URL.
func NewSweeper(d Deps) (*Sweeper, error) {
	_, redriver, err := asyncParts(d)
	if err != nil {
		return nil, err
	}
	accounts := d.Getenv("ACCOUNTS_TABLE")
	if accounts == "" {
		return nil, errors.New("environment variable ACCOUNTS_TABLE is not set")
	}
	logger := d.Logger
	if logger == nil {
		logger = slog.Default()
	}
	queue, send := d.Getenv("ASYNC_WORK_QUEUE_URL"), sqsSender(d.SQS)
	return &Sweeper{
		redriver: redriver, logger: logger, now: time.Now,
		accounts: store.New(d.DB, store.Tables{Accounts: accounts}),
		enqueue:  func(ctx context.Context, body string) error { return send(ctx, queue, body) },
	}, nil
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
	queue, send := getenv("ASYNC_WORK_QUEUE_URL"), sqsSender(d.SQS)
	if queue == "" || send == nil {
		return nil, errors.New("account-manage needs ASYNC_WORK_QUEUE_URL and an SQS client: deleted accounts are purged on async-worker")
	}
	st := store.New(d.DB, tables)
	return NewAccounts(AccountsOptions{
		Store:       st,
		Agents:      agents.New(st, d.Sealer, d.Checks, nil),
		AdminSecret: getenv("ADMIN_SECRET"),
		OpenSignup:  open,
		Enqueue:     func(ctx context.Context, body string) error { return send(ctx, queue, body) },
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
