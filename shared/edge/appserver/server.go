// Package appserver serves the Letta App Server v2 protocol over a WebSocket (ws-gateway), and
// the App Server's part of the turns async-worker runs for it (Turns): it is an edge of the turn
// engine that builds Letta frames from the engine's events and maps its refusals to error
// frames.
package appserver

import (
	"errors"

	"github.com/agentharness/harness/shared/model/catalogue"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/callers"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/state/providerkeys"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/turn"
)

// Options wires the WebSocket side: the registry of connections and runtimes, and the way to
// send them frames. An abort_message stops a running turn within the engine's StopPoll.
type Options struct {
	Connections *connections.Registry
	Poster      Poster
	// Callers authenticates the gateway's upgrades, by the account secret or an end-user
	// token; async-worker needs none.
	Callers *callers.Resolver
	// Deployment is what the deployment reaches by itself, and AccountKeys the providers an
	// account has its own key for (nil: none), for list_models and update_model.
	Deployment  catalogue.Deployment
	AccountKeys catalogue.AccountKeys
	// Workspaces keeps the agents' memory files, for the memory commands; nil: none, and they
	// are refused.
	Workspaces *workspaces.Store
	// ProviderKeys keeps accounts' own provider keys, for the provider commands; nil: none, and
	// they are refused.
	ProviderKeys *providerkeys.Keys
}

// engineOptions names turn.Options apart from Options where config embeds both.
type engineOptions = turn.Options

// config is what the App Server's code reads: the engine's options and its own.
type config struct {
	engineOptions
	Options
}

// server is the App Server's state shared by the gateway and Turns.
type server struct {
	eng  *turn.Engine
	opts config
}

func newServer(eng *turn.Engine, opts Options) (*server, error) {
	if opts.Connections == nil || opts.Poster == nil {
		return nil, errors.New("the App Server needs CONNECTIONS_TABLE and a way to post to connections")
	}
	return &server{eng: eng, opts: config{engineOptions: eng.Options(), Options: opts}}, nil
}

// NewGateway returns ws-gateway's handler: the App Server on the engine eng, with agents
// created through agentService (the same checks as account-manage's).
func NewGateway(eng *turn.Engine, opts Options, agentService *agentstore.Service) (*Gateway, error) {
	s, err := newServer(eng, opts)
	if err != nil {
		return nil, err
	}
	if opts.Callers == nil {
		return nil, errors.New("the gateway needs a resolver of credentials (Options.Callers)")
	}
	return &Gateway{h: s, agents: agentService}, nil
}
