// Command account-manage is the Lambda that manages accounts (created with a one-time secret,
// stored hashed; renamed, rotated, deleted) and their agent configs (validated against the
// provider registry and the static tool map, secrets sealed with KMS). Deleting an account
// queues the purge of its conversations on AsyncWorkQueue.
package main

import (
	"github.com/agentharness/harness/functions/account-manage/wire"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/lambda/lambdahttp"
	"github.com/agentharness/harness/shared/tool/builtintools"
)

func main() {
	agentdeps.Main("account-manage", func(d agentdeps.Deps) error {
		d.Checks = builtintools.ConfigChecks()
		h, err := wire.Handler(d)
		if err != nil {
			return err
		}
		lambdahttp.Start(h)
		return nil
	})
}
