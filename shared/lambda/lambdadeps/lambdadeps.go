// Package lambdadeps holds Deps, what every function's handler is made from, and builds them
// inside Lambda: the JSON logger, the AWS clients from the default credential chain, the
// Config read from the environment the SAM template sets (the one place that reads it), and for
// functions that open agent secrets the KMS sealer. Each function's main only chooses its
// handler. It imports no handler package, so a function links only the handler its main names.
package lambdadeps

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/lambda/logging"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/wire/awsclient"
	"github.com/agentharness/harness/shared/wire/wsconn"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Deps are what every function's handler is built from: AWS clients, the secrets sealer, the
// config, the tool factories and the logger. Lambda mains and the local runner build handlers
// from the same Deps, so they serve the same thing.
type Deps struct {
	DB     *dynamodb.Client
	SQS    *sqs.Client
	S3     *s3.Client
	Sealer agentstore.Sealer
	Config Config
	// Tools builds an agent's ToolSet from its config.tools.
	Tools func(config map[string]json.RawMessage, env tool.Env) (*tool.Set, error)
	// Checks validate agent configs when they are written (account-manage).
	Checks agentconfig.Checks
	Logger *slog.Logger
	// Poster sends frames to WebSocket connections (API Gateway's @connections, or the local
	// runner's sockets); nil where none can be reached.
	Poster Poster
	// Secret reads a secret's string value from Secrets Manager (in AWS); nil where there is
	// none, and secrets come from the environment.
	Secret func(ctx context.Context, id string) (string, error)
}

// Poster sends frames to WebSocket connections and closes them (wsconn.Poster in AWS).
type Poster interface {
	Post(ctx context.Context, connectionID string, data []byte) error
	Disconnect(ctx context.Context, connectionID string) error
}

// Load builds the deps of a function configured by c; openSecrets adds the sealer of agent
// secrets.
func Load(ctx context.Context, c Config, openSecrets bool) (Deps, error) {
	logger := logging.New(os.Stderr, c.LogLevel)
	cfg, err := awsclient.Config(ctx)
	if err != nil {
		return Deps{}, fmt.Errorf("loading AWS config: %w", err)
	}
	d := Deps{
		DB: awsclient.DynamoDB(cfg), SQS: awsclient.SQS(cfg), S3: awsclient.S3(cfg),
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
	if endpoint := c.WebSocket.Endpoint; endpoint != "" {
		// Output for WebSocket clients goes through API Gateway's @connections endpoint.
		d.Poster = &wsconn.Poster{Endpoint: endpoint, Region: cfg.Region, Credentials: cfg.Credentials}
	}
	if openSecrets {
		d.Sealer, err = secrets.FromConfig(ctx, secrets.Config(c.Secrets), func() secrets.KMSAPI { return kms.NewFromConfig(cfg) })
		if err != nil {
			return Deps{}, err
		}
	}
	return d, nil
}

// Main reads the config from the environment, loads the deps and runs start, which builds the
// handler and hands it to Lambda; a function that cannot start logs why and exits 1.
func Main(name string, openSecrets bool, start func(Deps) error) {
	c := ConfigFrom(os.Getenv)
	if limit, ok := MemoryLimit(c.Runtime); ok {
		debug.SetMemoryLimit(limit)
	}
	if procs, ok := Procs(c.Runtime); ok {
		runtime.GOMAXPROCS(min(procs, runtime.NumCPU()))
	}
	d, err := Load(context.Background(), c, openSecrets)
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
