// Command sandbox is the Lambda that runs agents' bash commands in AWS: its event is a
// sandbox.Request, its response a sandbox.Result. The turn functions invoke it by name
// (SANDBOX_FUNCTION). It runs in a VPC with no way out and a role that grants nothing, and
// reads, writes and calls nothing of the deployment's.
package main

import (
	"github.com/agentharness/harness/functions/sandbox/wire"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambdadeps.Main("sandbox", func(d lambdadeps.Deps) error {
		lambda.Start(wire.Handler(d))
		return nil
	})
}
