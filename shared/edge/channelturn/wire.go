package channelturn

import (
	"context"
	"time"

	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/turn"
)

// HookFrom wires the channel webhook of harness-processing on its engine, queueing turns with
// enqueue; nil where the deployment keeps no channels (CHANNELS_TABLE unset).
func HookFrom(d lambdadeps.Deps, eng *turn.Engine, enqueue func(ctx context.Context, body string) error) (*Hook, error) {
	bindings, err := channels.FromEnv(d.DB, d.Sealer, d.Getenv)
	if bindings == nil || err != nil {
		return nil, err
	}
	o := eng.Options()
	return &Hook{Bindings: bindings, Store: o.Store, Engine: eng, Enqueue: enqueue, APIs: channels.APIsFrom(d.Getenv), Now: time.Now, Logger: o.Logger}, nil
}

// TurnsFrom wires async-worker's part of channel turns; nil where the deployment keeps no
// channels.
func TurnsFrom(d lambdadeps.Deps, eng *turn.Engine) (*Turns, error) {
	bindings, err := channels.FromEnv(d.DB, d.Sealer, d.Getenv)
	if bindings == nil || err != nil {
		return nil, err
	}
	return &Turns{Bindings: bindings, APIs: channels.APIsFrom(d.Getenv), Logger: eng.Options().Logger}, nil
}
