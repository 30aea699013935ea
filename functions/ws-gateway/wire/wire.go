// Package wire builds ws-gateway's handler from the function's dependencies, and the App
// Server's options async-worker runs its part of WebSocket turns with.
package wire

import (
	"errors"

	"github.com/agentharness/harness/functions/turnwire"
	"github.com/agentharness/harness/shared/edge/appserver"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/state/providerkeys"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/turn"
)

// AppServer reads the WebSocket side's options from the function's dependencies; ok is false
// where no WebSocket API is wired (no CONNECTIONS_TABLE or no poster).
func AppServer(d agentdeps.Deps) (opts appserver.Options, ok bool) {
	table := d.Config.WebSocket.ConnectionsTable
	if table == "" || d.Poster == nil {
		return appserver.Options{}, false
	}
	return appserver.Options{Connections: connections.New(d.DB, table), Poster: d.Poster, Deployment: turnwire.Deployment(d)}, true
}

// Gateway wires ws-gateway: the turn engine, the connections table and the poster, and agent
// creation with the same checks as account-manage.
func Gateway(d agentdeps.Deps) (*appserver.Gateway, error) {
	topts, err := turnwire.Options(d)
	if err != nil {
		return nil, err
	}
	opts, ok := AppServer(d)
	if !ok {
		return nil, errors.New("ws-gateway needs CONNECTIONS_TABLE and a way to post to connections")
	}
	eng := turn.New(topts)
	if opts.Callers, err = turnwire.Callers(d, eng.Options().Store); err != nil {
		return nil, err
	}
	opts.AccountKeys = turnwire.AccountKeys(d, eng.Options().Store)
	opts.ProviderKeys = providerkeys.New(eng.Options().Store, d.Sealer)
	// The memory commands' files: the memory workspaces, as the turns' memory tools keep them.
	if opts.Workspaces, err = workspaces.FromConfig(d.DB, d.S3, workspaces.Config(d.Config.Workspaces)); err != nil {
		return nil, err
	}
	return appserver.NewGateway(eng, opts, agentstore.New(eng.Options().Store, d.Sealer, d.Checks, nil))
}
