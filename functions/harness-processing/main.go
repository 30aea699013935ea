// Command harness-processing is the Lambda that runs agent turns: POST / streams a turn as a
// Vercel AI SDK UI message stream, GET / answers health checks.
package main

import (
	"github.com/agentharness/harness/shared/builtintools"
	"github.com/agentharness/harness/shared/chathttp"
	"github.com/agentharness/harness/shared/lambdadeps"
	"github.com/agentharness/harness/shared/lambdahttp"
)

func main() {
	lambdadeps.Main("harness-processing", true, func(d lambdadeps.Deps) error {
		d.Tools = builtintools.Build
		h, err := chathttp.NewHarness(d)
		if err != nil {
			return err
		}
		lambdahttp.Start(h)
		return nil
	})
}
