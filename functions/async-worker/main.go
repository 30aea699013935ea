// Command async-worker is the Lambda that consumes AsyncWorkQueue: it runs the turns accepted by
// POST /async and continues the parent turns whose async tool calls have all settled. Batches
// come from SQS's event source mapping; the messages it could not process are reported back as
// batch item failures, so SQS redelivers only those (and after five receives moves them to the
// dead-letter queue). It runs agents, so it opens their secrets with KMS like harness-processing.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/agentharness/harness/functions/harness-processing/tools"
	"github.com/agentharness/harness/shared/api"
	"github.com/agentharness/harness/shared/awsclient"
	"github.com/agentharness/harness/shared/logging"
	"github.com/agentharness/harness/shared/secrets"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

func main() {
	if err := run(context.Background()); err != nil {
		slog.Error("async-worker failed to start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	logger := logging.New(os.Stderr, os.Getenv("LOG_LEVEL"))
	cfg, err := awsclient.Config(ctx)
	if err != nil {
		return fmt.Errorf("loading AWS config: %w", err)
	}
	box, err := secrets.FromEnv(ctx, os.Getenv, func() secrets.KMSAPI { return kms.NewFromConfig(cfg) })
	if err != nil {
		return err
	}
	w, err := api.NewWorker(api.Deps{
		DB: awsclient.DynamoDB(cfg), SQS: awsclient.SQS(cfg), S3: awsclient.S3(cfg),
		Sealer: box, Getenv: os.Getenv, Tools: tools.Build, Logger: logger,
	})
	if err != nil {
		return err
	}
	lambda.Start(w.Handle)
	return nil
}
