// Package wire builds async-tool-complete's handler from the function's dependencies.
package wire

import (
	"github.com/agentharness/harness/functions/asyncwire"
	"github.com/agentharness/harness/shared/edge/completion"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/store"
)

// Handler wires async-tool-complete from the config the template gives it.
func Handler(d lambdadeps.Deps) (*completion.Handler, error) {
	if err := d.Config.Require("ACCOUNTS_TABLE"); err != nil {
		return nil, err
	}
	async, redriver, err := asyncwire.AsyncTools(d)
	if err != nil {
		return nil, err
	}
	return completion.New(store.New(d.DB, store.Tables{Accounts: d.Config.Tables.Accounts}), async, redriver, d.Logger), nil
}
