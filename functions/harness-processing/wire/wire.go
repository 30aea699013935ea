// Package wire builds harness-processing's handler from the function's dependencies.
package wire

import (
	"time"

	"github.com/agentharness/harness/functions/turnwire"
	"github.com/agentharness/harness/shared/edge/channelturn"
	"github.com/agentharness/harness/shared/edge/chathttp"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/state/channels"
)

// Handler wires harness-processing: the turn engine, async-worker's queue for POST /async, and
// the chat platforms' webhook where the deployment keeps channels (CHANNELS_TABLE), whose
// turns run on async-worker.
func Handler(d agentdeps.Deps) (*chathttp.Handler, error) {
	opts, err := turnwire.Options(d)
	if err != nil {
		return nil, err
	}
	who, err := turnwire.Callers(d, opts.Store)
	if err != nil {
		return nil, err
	}
	// The accounts' own provider keys are not wired yet (AccountKeys nil): GET /models shows the
	// deployment's reach.
	h := chathttp.New(chathttp.Options{Options: opts, Callers: who, Deployment: turnwire.Deployment(d), AccountKeys: turnwire.AccountKeys(d, opts.Store)})
	bindings, err := channels.FromConfig(d.DB, d.Sealer, d.Config.Channels.Table)
	if err != nil {
		return nil, err
	}
	if bindings != nil {
		eng := h.Engine()
		o := eng.Options()
		h.Handle("POST /channels/{bindingId}", &channelturn.Hook{
			Bindings: bindings, Store: o.Store, Engine: eng, APIs: channels.APIs(d.Config.Channels.APIs), Now: time.Now, Logger: o.Logger,
		})
	}
	return h, nil
}
