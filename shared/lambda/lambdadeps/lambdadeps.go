// Package lambdadeps holds Deps, what every function's handler is made from, and builds them
// inside Lambda: the JSON logger, the AWS clients from the default credential chain and the
// Config read from the environment the SAM template sets (the one place that reads it). What
// only the functions that read agents need is agentdeps'. Each function's main only chooses its
// handler. It imports no handler package, so a function links only the handler its main names.
package lambdadeps

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/agentharness/harness/shared/lambda/logging"
	"github.com/agentharness/harness/shared/wire/awsclient"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Deps are what every function's handler is built from: AWS clients, the config and the logger.
// Lambda mains and the local runner build handlers from the same Deps, so they serve the same
// thing.
type Deps struct {
	DB  *dynamodb.Client
	SQS *sqs.Client
	S3  *s3.Client
	// AWS is the configuration the clients were made from, for the clients a function makes
	// itself (agentdeps' KMS and @connections); zero in the local runner, which makes none.
	AWS    aws.Config
	Config Config
	Logger *slog.Logger
	// Secret reads a secret's string value from Secrets Manager (in AWS); nil where there is
	// none, and secrets come from the environment.
	Secret func(ctx context.Context, id string) (string, error)
}

// Load builds the deps of a function configured by c.
func Load(ctx context.Context, c Config) (Deps, error) {
	logger := logging.New(os.Stderr, c.LogLevel)
	cfg, err := awsclient.Config(ctx)
	if err != nil {
		return Deps{}, fmt.Errorf("loading AWS config: %w", err)
	}
	d := Deps{
		DB: awsclient.DynamoDB(cfg), SQS: awsclient.SQS(cfg), S3: awsclient.S3(cfg), AWS: cfg,
		Config: c, Logger: logger,
	}
	sm := secretsmanager.NewFromConfig(cfg)
	d.Secret = func(ctx context.Context, id string) (string, error) {
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &id})
		if err != nil {
			return "", fmt.Errorf("reading secret %s: %w", id, err)
		}
		if out.SecretString == nil {
			return "", fmt.Errorf("secret %s has no string value", id)
		}
		return *out.SecretString, nil
	}
	return d, nil
}

// Main reads the config from the environment, loads the deps and runs start, which builds the
// handler and hands it to Lambda; a function that cannot start logs why and exits 1.
func Main(name string, start func(Deps) error) {
	c := ConfigFrom(os.Getenv)
	if limit, ok := MemoryLimit(c.Runtime); ok {
		debug.SetMemoryLimit(limit)
	}
	if procs, ok := Procs(c.Runtime); ok {
		runtime.GOMAXPROCS(min(procs, runtime.NumCPU()))
	}
	d, err := Load(context.Background(), c)
	if err == nil {
		err = start(d)
	}
	if err != nil {
		slog.Error(name+" failed to start", "err", err)
		os.Exit(1)
	}
}

// MemoryLimit is the soft heap limit of a function that Lambda gives
// AWS_LAMBDA_FUNCTION_MEMORY_SIZE MB: three quarters of it, so that with the template's high GOGC
// a turn that holds much (a long conversation) makes the collector work harder instead of running
// the function out of memory. ok is false outside Lambda or when GOMEMLIMIT is set.
func MemoryLimit(r Runtime) (limit int64, ok bool) {
	if r.GoMemLimit != "" {
		return 0, false
	}
	mb, err := strconv.ParseInt(r.MemoryMB, 10, 64)
	if err != nil || mb <= 0 {
		return 0, false
	}
	return mb << 20 / 4 * 3, true
}

// vCPUMemoryMB is the memory size at which Lambda gives a function one whole vCPU; it gives CPU in
// proportion to memory, up to six vCPUs at 10,240 MB.
const vCPUMemoryMB = 1769

// Procs is the GOMAXPROCS of a function that Lambda gives AWS_LAMBDA_FUNCTION_MEMORY_SIZE MB: the
// whole vCPUs that memory buys, at least one. Lambda shows the process two or more CPUs whatever
// its share, and a Go scheduler with more Ps than the CPU it gets spends its time waking idle
// threads: on the benchmark turn, one P used a quarter less CPU than two. An environment runs one
// invocation at a time, whose work is I/O-bound, so one P loses no parallelism it could have had.
// ok is false outside Lambda or when GOMAXPROCS is set.
func Procs(r Runtime) (procs int, ok bool) {
	if r.GoMaxProcs != "" {
		return 0, false
	}
	mb, err := strconv.Atoi(r.MemoryMB)
	if err != nil || mb <= 0 {
		return 0, false
	}
	return max(1, mb/vCPUMemoryMB), true
}
