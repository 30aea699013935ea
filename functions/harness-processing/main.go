// Command harness-processing is the Lambda that runs agent turns: POST / streams a turn as a
// Vercel AI SDK UI message stream, GET / answers health checks.
package main

import (
	"github.com/agentharness/harness/functions/harness-processing/wire"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/lambda/lambdahttp"
	"github.com/agentharness/harness/shared/tool/builtintools"
)

func main() {
	agentdeps.Main("harness-processing", func(d agentdeps.Deps) error {
		d.Tools = builtintools.Build
		h, err := wire.Handler(d)
		if err != nil {
			return err
		}
		lambdahttp.Start(h)
		return nil
	})
}
