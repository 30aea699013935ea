// Command account-manage is the Lambda that manages accounts (created with a one-time secret,
// stored hashed; renamed, rotated, deleted) and their agent configs (validated against the
// provider registry and the static tool map, secrets sealed with KMS).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/agentharness/harness/functions/harness-processing/tools"
	"github.com/agentharness/harness/shared/api"
	"github.com/agentharness/harness/shared/awsclient"
	"github.com/agentharness/harness/shared/lambdahttp"
	"github.com/agentharness/harness/shared/logging"
	"github.com/agentharness/harness/shared/secrets"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

func main() {
	if err := run(context.Background()); err != nil {
		slog.Error("account-manage failed to start", "err", err)
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
	h, err := api.NewAccountManage(api.Deps{DB: awsclient.DynamoDB(cfg), Sealer: box, Getenv: os.Getenv, Checks: tools.ConfigChecks(), Logger: logger})
	if err != nil {
		return err
	}
	lambdahttp.Start(h)
	return nil
}
