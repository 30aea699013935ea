// Command sweeper is the Lambda that EventBridge runs every minute to recover async tool calls:
// it settles as failed the calls still running past their deadline, and finishes the dispatch
// groups a crashed function left behind, sending their continuations to AsyncWorkQueue; and it
// queues again the purges of deleted accounts that were never queued or never finished. It opens
// no agent secrets, so it needs no KMS key.
package main

import (
	"context"

	"github.com/agentharness/harness/functions/sweeper/wire"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambdadeps.Main("sweeper", func(d lambdadeps.Deps) error {
		s, err := wire.Sweeper(d)
		if err != nil {
			return err
		}
		lambda.Start(func(ctx context.Context) error { return s.Run(ctx) })
		return nil
	})
}
