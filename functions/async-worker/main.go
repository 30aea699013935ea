// Command async-worker is the Lambda that consumes AsyncWorkQueue: it runs the turns accepted by
// POST /async and by the App Server's input, continues the parent turns whose async tool calls
// have all settled, and purges the conversations and agents of deleted accounts. Batches come
// from SQS's event source mapping; the messages it could not process are reported back as batch
// item failures, so SQS redelivers only those (and after five receives moves them to the
// dead-letter queue). It runs agents, so it opens their secrets with KMS like
// harness-processing.
package main

import (
	"github.com/agentharness/harness/functions/async-worker/wire"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	agentdeps.Main("async-worker", func(d agentdeps.Deps) error {
		d.Tools = builtintools.Build
		w, err := wire.Worker(d)
		if err != nil {
			return err
		}
		lambda.Start(w.Handle)
		return nil
	})
}
