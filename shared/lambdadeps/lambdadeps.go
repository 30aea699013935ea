// Package lambdadeps builds, inside Lambda, what every function's handler is made from: the JSON
// logger, the AWS clients from the default credential chain, the environment the SAM template
// sets, and for functions that open agent secrets the KMS sealer. Each function's main only
// chooses its handler.
package lambdadeps

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/agentharness/harness/shared/api"
	"github.com/agentharness/harness/shared/awsclient"
	"github.com/agentharness/harness/shared/logging"
	"github.com/agentharness/harness/shared/secrets"
	"github.com/agentharness/harness/shared/wsconn"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

// Load builds the deps from the environment; openSecrets adds the sealer of agent secrets.
func Load(ctx context.Context, openSecrets bool) (api.Deps, error) {
	logger := logging.New(os.Stderr, os.Getenv("LOG_LEVEL"))
	cfg, err := awsclient.Config(ctx)
	if err != nil {
		return api.Deps{}, fmt.Errorf("loading AWS config: %w", err)
	}
	d := api.Deps{
		DB: awsclient.DynamoDB(cfg), SQS: awsclient.SQS(cfg), S3: awsclient.S3(cfg),
		Getenv: os.Getenv, Logger: logger,
	}
	if endpoint := os.Getenv("WEBSOCKET_ENDPOINT"); endpoint != "" {
		// Output for WebSocket clients goes through API Gateway's @connections endpoint.
		d.Poster = &wsconn.Poster{Endpoint: endpoint, Region: cfg.Region, Credentials: cfg.Credentials}
	}
	if openSecrets {
		d.Sealer, err = secrets.FromEnv(ctx, os.Getenv, func() secrets.KMSAPI { return kms.NewFromConfig(cfg) })
		if err != nil {
			return api.Deps{}, err
		}
	}
	return d, nil
}

// Main loads the deps and runs start, which builds the handler and hands it to Lambda; a
// function that cannot start logs why and exits 1.
func Main(name string, openSecrets bool, start func(api.Deps) error) {
	d, err := Load(context.Background(), openSecrets)
	if err == nil {
		err = start(d)
	}
	if err != nil {
		slog.Error(name+" failed to start", "err", err)
		os.Exit(1)
	}
}
