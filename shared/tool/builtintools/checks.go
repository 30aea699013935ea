package builtintools

import (
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model/modelblock"
)

// ConfigChecks are the checks an agent config must pass before it is stored: its model block
// against the provider registry, its tools against the static specs map.
func ConfigChecks() agentconfig.Checks {
	return agentconfig.Checks{
		Model: modelblock.Check,
		Tool:  Check,
	}
}
