// Command sweeper is the Lambda that EventBridge runs every minute to recover async tool calls:
// it settles as failed the calls still running past their deadline, and finishes the dispatch
// groups a crashed function left behind, sending their continuations to AsyncWorkQueue. It opens
// no agent secrets, so it needs no KMS key.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/agentharness/harness/shared/api"
	"github.com/agentharness/harness/shared/awsclient"
	"github.com/agentharness/harness/shared/logging"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	if err := run(context.Background()); err != nil {
		slog.Error("sweeper failed to start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	logger := logging.New(os.Stderr, os.Getenv("LOG_LEVEL"))
	cfg, err := awsclient.Config(ctx)
	if err != nil {
		return fmt.Errorf("loading AWS config: %w", err)
	}
	s, err := api.NewSweeper(api.Deps{
		DB: awsclient.DynamoDB(cfg), SQS: awsclient.SQS(cfg), S3: awsclient.S3(cfg),
		Getenv: os.Getenv, Logger: logger,
	})
	if err != nil {
		return err
	}
	lambda.Start(func(ctx context.Context) error { return s.Run(ctx) })
	return nil
}
