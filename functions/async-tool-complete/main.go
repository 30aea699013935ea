// Command async-tool-complete is the Lambda behind POST /async-tools/{resultId}/complete, the
// route an outside worker calls with the result of an external-dispatch tool call. It settles
// that call's row (large results go to the results bucket) and, when the result completes a
// sealed dispatch group, claims the group's single re-drive and enqueues it for async-worker.
// It opens no agent secrets, so it needs no KMS key.
package main

import (
	"github.com/agentharness/harness/functions/async-tool-complete/wire"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/lambda/lambdahttp"
)

func main() {
	lambdadeps.Main("async-tool-complete", func(d lambdadeps.Deps) error {
		h, err := wire.Handler(d)
		if err != nil {
			return err
		}
		lambdahttp.Start(h)
		return nil
	})
}
