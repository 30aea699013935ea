// Command ws-gateway is the Lambda behind the API Gateway WebSocket API: it speaks the Letta App
// Server v2 protocol. $connect checks the account secret on the upgrade, $default handles one
// command frame, $disconnect forgets the connection. Answers and turn output reach clients
// through the @connections endpoint (WEBSOCKET_ENDPOINT); turns themselves run on async-worker.
package main

import (
	"github.com/agentharness/harness/functions/ws-gateway/wire"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	agentdeps.Main("ws-gateway", func(d agentdeps.Deps) error {
		d.Tools, d.Checks = builtintools.Build, builtintools.ConfigChecks()
		g, err := wire.Gateway(d)
		if err != nil {
			return err
		}
		lambda.Start(g.HandleLambda)
		return nil
	})
}
