// Package wire builds async-tool-complete's handler from the function's dependencies.
package wire

import (
	"errors"

	"github.com/agentharness/harness/functions/asyncwire"
	"github.com/agentharness/harness/shared/edge/completion"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/store"
)

// Handler wires async-tool-complete from the environment the template gives it.
func Handler(d lambdadeps.Deps) (*completion.Handler, error) {
	accounts := d.Getenv("ACCOUNTS_TABLE")
	if accounts == "" {
		return nil, errors.New("environment variable ACCOUNTS_TABLE is not set")
	}
	async, redriver, err := asyncwire.AsyncTools(d)
	if err != nil {
		return nil, err
	}
	return completion.New(store.New(d.DB, store.Tables{Accounts: accounts}), async, redriver, d.Logger), nil
}
