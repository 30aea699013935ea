// Package agentdeps adds to lambdadeps.Deps what the four functions that read agents are built
// from: the sealer of agents' secrets, the tools and config checks their main picks, and the
// poster of WebSocket frames. async-tool-complete and the sweeper read no agent: they are built
// from lambdadeps.Deps alone, and link none of this.
package agentdeps

import (
	"context"
	"encoding/json"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/wire/wsconn"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

// Deps are lambdadeps.Deps and what a function that reads agents adds to them.
type Deps struct {
	lambdadeps.Deps
	Sealer agentstore.Sealer
	// Tools builds an agent's ToolSet from its config.tools.
	Tools func(config map[string]json.RawMessage, env tool.Env) (*tool.Set, error)
	// Checks validate agent configs when they are written (account-manage, ws-gateway).
	Checks agentconfig.Checks
	// Poster sends frames to WebSocket connections (API Gateway's @connections, or the local
	// runner's sockets); nil where none can be reached.
	Poster Poster
}

// Poster sends frames to WebSocket connections and closes them (wsconn.Poster in AWS).
type Poster interface {
	Post(ctx context.Context, connectionID string, data []byte) error
	Disconnect(ctx context.Context, connectionID string) error
}

// Load adds to d the sealer of agent secrets its config names (a KMS key in AWS) and, where the
// config has a WebSocket endpoint, the poster to its connections. Main sets Tools and Checks.
func Load(ctx context.Context, d lambdadeps.Deps) (Deps, error) {
	a := Deps{Deps: d}
	if endpoint := d.Config.WebSocket.Endpoint; endpoint != "" {
		// Output for WebSocket clients goes through API Gateway's @connections endpoint.
		a.Poster = &wsconn.Poster{Endpoint: endpoint, Region: d.AWS.Region, Credentials: d.AWS.Credentials}
	}
	var err error
	a.Sealer, err = secrets.FromConfig(ctx, secrets.Config(d.Config.Secrets), func() secrets.KMSAPI { return kms.NewFromConfig(d.AWS) })
	if err != nil {
		return Deps{}, err
	}
	return a, nil
}

// Main is lambdadeps.Main for a function that reads agents: start gets the deps Load adds to.
func Main(name string, start func(Deps) error) {
	lambdadeps.Main(name, func(d lambdadeps.Deps) error {
		a, err := Load(context.Background(), d)
		if err != nil {
			return err
		}
		return start(a)
	})
}
