// Package wire builds account-manage's handler from the function's dependencies.
package wire

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentharness/harness/shared/edge/accounts"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/state/providerkeys"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/tokenkeys"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/wire/natsturns"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// Handler wires account-manage from d (Options).
func Handler(d agentdeps.Deps) (*accounts.Handler, error) {
	opts, err := Options(d)
	if err != nil {
		return nil, err
	}
	return accounts.NewFrom(opts), nil
}

// Options is account-manage's wiring: tables, the skills' table and bucket, the channel
// bindings' table, the WebSocket connections' table (closed through d.Poster), the admin
// secret, the signup mode, the public URL and the NATS credentials' signing key
// (natsturns.IssuerFromConfig, read with d.Secret when it is a secret) from d.Config, agent
// configs checked by d.Checks and secrets sealed with d.Sealer.
func Options(d agentdeps.Deps) (accounts.Options, error) {
	c := d.Config
	if err := c.Require("ACCOUNTS_TABLE", "AGENTS_TABLE"); err != nil {
		return accounts.Options{}, err
	}
	var open bool
	switch mode := c.Accounts.Signup; mode {
	case "", "admin":
	case "open":
		open = true
	default:
		return accounts.Options{}, fmt.Errorf("ACCOUNT_SIGNUP is %q, want admin or open", mode)
	}
	queue, send := c.Async.WorkQueue, workqueue.SQS(d.SQS)
	if queue == "" || send == nil {
		return accounts.Options{}, errors.New("account-manage needs ASYNC_WORK_QUEUE_URL and an SQS client: deleted accounts are purged on async-worker")
	}
	sk, err := skills.FromConfig(d.DB, d.S3, skills.Config(c.Skills))
	if err != nil {
		return accounts.Options{}, err
	}
	ws, err := workspaces.FromConfig(d.DB, d.S3, workspaces.Config(c.Workspaces))
	if err != nil {
		return accounts.Options{}, err
	}
	ch, err := channels.FromConfig(d.DB, d.Sealer, c.Channels.Table)
	if err != nil {
		return accounts.Options{}, err
	}
	issuer, err := natsturns.IssuerFromConfig(context.Background(), natsturns.IssuerConfig{
		URL: c.NATS.URL, SigningSeed: c.NATS.AccountSigningSeed, SigningSeedSecret: c.NATS.AccountSigningSeedSecret,
		Account: c.NATS.Account, Stream: c.NATS.Stream, CredentialsTTL: c.NATS.CredentialsTTL, ClientURLs: c.NATS.ClientURLs,
	}, d.Secret)
	if err != nil {
		return accounts.Options{}, err
	}
	var conns *connections.Registry
	if table := c.WebSocket.ConnectionsTable; table != "" {
		if d.Poster == nil {
			return accounts.Options{}, errors.New("account-manage needs WEBSOCKET_ENDPOINT with CONNECTIONS_TABLE: a rotated secret closes the account's WebSocket connections")
		}
		conns = connections.New(d.DB, table)
	}
	st := store.New(d.DB, store.Tables{Accounts: c.Tables.Accounts, Agents: c.Tables.Agents})
	keys, err := tokenkeys.FromConfig(st, d.Sealer, c.MCP.PrivateEndpoints)
	if err != nil {
		return accounts.Options{}, err
	}
	platforms := channels.APIs(c.Channels.APIs)
	return accounts.Options{
		Store:            st,
		Agents:           accounts.AgentService(st, sk, ws, d.Sealer, d.Checks),
		Skills:           sk,
		Workspaces:       ws,
		Channels:         ch,
		Connections:      conns,
		Poster:           d.Poster,
		NATS:             issuer,
		ServiceURL:       c.Accounts.ServiceURL,
		Identify:         platforms.Identify,
		SetWebhook:       platforms.SetWebhook,
		Keys:             keys,
		ProviderKeys:     providerkeys.New(st, d.Sealer),
		PrivateEndpoints: c.MCP.PrivateEndpoints,
		AdminSecret:      c.Accounts.AdminSecret,
		OpenSignup:       open,
		Enqueue:          func(ctx context.Context, body string) error { return send(ctx, queue, body) },
		Logger:           d.Logger,
	}, nil
}
