package main

import (
	"fmt"
	"os"

	"github.com/agentharness/harness/infra/natsserver"
)

// localNATS runs a real NATS server (embedded, JetStream and WebSocket on) unless NATS_URL names
// one, and points the harness at it: turn streams are published there, and
// /accounts/me/nats-credentials signs clients' credentials with its account's signing key. It
// returns what to print, a format taking the harness's URL and the account secret, and how to
// stop it.
func localNATS() (note string, stop func(), err error) {
	if v := os.Getenv("NATS_URL"); v != "" {
		return fmt.Sprintf(`
NATS: NATS_URL is %s, so make dev runs no NATS server; turns are published there. Follow one:

  go run ./examples/nats-follow -url %%s -secret %%s
`, v), func() {}, nil
	}
	srv, err := natsserver.Start(natsserver.Options{WebSocket: true})
	if err != nil {
		return "", nil, fmt.Errorf("starting the local NATS server: %w", err)
	}
	for k, v := range map[string]string{
		"NATS_URL": srv.URL, "NATS_CREDS": srv.HarnessCreds,
		"NATS_ACCOUNT_SIGNING_SEED": srv.ClientSigningSeed, "NATS_ACCOUNT": srv.ClientAccount,
		// Clients are told of both: browsers take the WebSocket, Go and Node either.
		"NATS_CLIENT_URLS": srv.URL + "," + srv.WebSocketURL,
	} {
		os.Setenv(k, v)
	}
	return fmt.Sprintf(`
Follow an /async turn on NATS JetStream (a local NATS server at %s, WebSocket %s):

  go run ./examples/nats-follow -url %%s -secret %%s
`, srv.URL, srv.WebSocketURL), srv.Shutdown, nil
}
