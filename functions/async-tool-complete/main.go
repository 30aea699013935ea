// Command async-tool-complete is the Lambda behind POST /async-tools/{resultId}/complete, the
// route an outside worker calls with the result of an external-dispatch tool call. It settles
// that call's row (large results go to the results bucket) and, when the result completes a
// sealed dispatch group, claims the group's single re-drive and enqueues it for async-worker.
// It opens no agent secrets, so it needs no KMS key.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/agentharness/harness/shared/api"
	"github.com/agentharness/harness/shared/awsclient"
	"github.com/agentharness/harness/shared/lambdahttp"
	"github.com/agentharness/harness/shared/logging"
)

func main() {
	if err := run(context.Background()); err != nil {
		slog.Error("async-tool-complete failed to start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	logger := logging.New(os.Stderr, os.Getenv("LOG_LEVEL"))
	cfg, err := awsclient.Config(ctx)
	if err != nil {
		return fmt.Errorf("loading AWS config: %w", err)
	}
	h, err := api.NewCompletion(api.Deps{
		DB: awsclient.DynamoDB(cfg), SQS: awsclient.SQS(cfg), S3: awsclient.S3(cfg),
		Getenv: os.Getenv, Logger: logger,
	})
	if err != nil {
		return err
	}
	lambdahttp.Start(h)
	return nil
}
