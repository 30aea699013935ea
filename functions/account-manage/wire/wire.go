// Package wire builds account-manage's handler from the function's dependencies.
package wire

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentharness/harness/shared/edge/accounts"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/natsturns"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// Handler wires account-manage from d (Options).
func Handler(d lambdadeps.Deps) (*accounts.Handler, error) {
	opts, err := Options(d)
	if err != nil {
		return nil, err
	}
	return accounts.NewFrom(opts), nil
}

// Options is account-manage's wiring: tables, the skills' table and bucket, the channel
// bindings' table, the WebSocket connections' table (closed through d.Poster), the admin
// secret, the signup mode, the public URL and the NATS credentials' signing key
// (natsturns.IssuerFromEnv, read with d.Secret when it is a secret) from d.Getenv, agent configs
// checked by d.Checks and secrets sealed with d.Sealer.
func Options(d lambdadeps.Deps) (accounts.Options, error) {
	getenv := d.Getenv
	tables, err := store.AccountTablesFromEnv(getenv)
	if err != nil {
		return accounts.Options{}, err
	}
	var open bool
	switch mode := getenv("ACCOUNT_SIGNUP"); mode {
	case "", "admin":
	case "open":
		open = true
	default:
		return accounts.Options{}, fmt.Errorf("ACCOUNT_SIGNUP is %q, want admin or open", mode)
	}
	queue, send := getenv("ASYNC_WORK_QUEUE_URL"), workqueue.SQS(d.SQS)
	if queue == "" || send == nil {
		return accounts.Options{}, errors.New("account-manage needs ASYNC_WORK_QUEUE_URL and an SQS client: deleted accounts are purged on async-worker")
	}
	sk, err := skills.FromConfig(d.DB, d.S3, skills.Config{Table: getenv("SKILLS_TABLE"), Bucket: getenv("SKILLS_BUCKET")})
	if err != nil {
		return accounts.Options{}, err
	}
	ch, err := channels.FromConfig(d.DB, d.Sealer, getenv("CHANNELS_TABLE"))
	if err != nil {
		return accounts.Options{}, err
	}
	issuer, err := natsturns.IssuerFromConfig(context.Background(), natsturns.IssuerConfig{
		URL: getenv("NATS_URL"), SigningSeed: getenv("NATS_ACCOUNT_SIGNING_SEED"), SigningSeedSecret: getenv("NATS_ACCOUNT_SIGNING_SEED_SECRET"),
		Account: getenv("NATS_ACCOUNT"), Stream: getenv("NATS_STREAM"), CredentialsTTL: getenv("NATS_CREDENTIALS_TTL"), ClientURLs: getenv("NATS_CLIENT_URLS"),
	}, d.Secret)
	if err != nil {
		return accounts.Options{}, err
	}
	var conns *connections.Registry
	if table := getenv("CONNECTIONS_TABLE"); table != "" {
		if d.Poster == nil {
			return accounts.Options{}, errors.New("account-manage needs WEBSOCKET_ENDPOINT with CONNECTIONS_TABLE: a rotated secret closes the account's WebSocket connections")
		}
		conns = connections.New(d.DB, table)
	}
	st := store.New(d.DB, tables)
	platforms := channels.APIs{Slack: getenv("SLACK_API_URL"), Telegram: getenv("TELEGRAM_API_URL")}
	return accounts.Options{
		Store:       st,
		Agents:      accounts.AgentService(st, sk, d.Sealer, d.Checks),
		Skills:      sk,
		Channels:    ch,
		Connections: conns,
		Poster:      d.Poster,
		NATS:        issuer,
		ServiceURL:  getenv("AGENT_SERVICE_URL"),
		Identify:    platforms.Identify,
		SetWebhook:  platforms.SetWebhook,
		AdminSecret: getenv("ADMIN_SECRET"),
		OpenSignup:  open,
		Enqueue:     func(ctx context.Context, body string) error { return send(ctx, queue, body) },
		Logger:      d.Logger,
	}, nil
}
