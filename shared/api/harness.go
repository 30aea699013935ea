package api

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/agents"
	"github.com/agentharness/harness/shared/connections"
	"github.com/agentharness/harness/shared/lambdadeps"
	"github.com/agentharness/harness/shared/provider"
	"github.com/agentharness/harness/shared/store"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/workqueue"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// NewHarness wires harness-processing: table names and fallback credentials from getenv,
// models from the provider registry, agent secrets opened with the sealer.
func NewHarness(d lambdadeps.Deps) (*Handler, error) {
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
	async, redriver, err := workqueue.AsyncTools(d)
	if err != nil {
		return nil, err
	}
	st := store.New(d.DB, tables)
	var conns *connections.Registry
	if table := getenv("CONNECTIONS_TABLE"); table != "" && d.Poster != nil {
		conns = connections.New(d.DB, table)
	}
	env := tool.Env{Getenv: getenv, Send: workqueue.SQS(d.SQS), Logger: d.Logger}
	send := workqueue.SQS(d.SQS)
	queue := getenv("ASYNC_WORK_QUEUE_URL")
	return New(Options{
		Options: turn.Options{
			ApprovalTimeout:  timeout,
			Store:            st,
			Agents:           agents.New(st, d.Sealer, agentconfig.Checks{}, nil),
			Tools:            func(config map[string]json.RawMessage) (*tool.Set, error) { return d.Tools(config, env) },
			Model:            func(block json.RawMessage) (agent.Model, error) { return provider.New(block, getenv) },
			Logger:           d.Logger,
			Async:            async,
			Redriver:         redriver,
			AsyncToolTimeout: asyncTimeout,
		},
		Enqueue:     func(ctx context.Context, body string) error { return send(ctx, queue, body) },
		Connections: conns,
		Poster:      d.Poster,
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

// NewWorker wires async-worker: the harness's turn machinery without HTTP, and a way to bring
// back soon a message whose conversation was busy.
func NewWorker(d lambdadeps.Deps) (*Worker, error) {
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
