// Package turnwire builds the turn engine of a function that runs turns from its dependencies,
// once for the three that do: harness-processing, async-worker and ws-gateway.
package turnwire

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/model/provider"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/streamlog"
	"github.com/agentharness/harness/shared/state/toolresults"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/mcptools"
	"github.com/agentharness/harness/shared/wire/workqueue"

	"github.com/agentharness/harness/functions/asyncwire"
	"github.com/agentharness/harness/shared/edge/natslog"
	"github.com/agentharness/harness/shared/turn"
)

// Options wires the engine of a function that runs turns: table names and fallback
// credentials from the environment, models from the provider registry, agent secrets opened
// with the sealer, async tool rows with their redriver, and turn streams copied to NATS where
// NATS_URL says so (so a continuation on async-worker publishes where its turn began).
func Options(d lambdadeps.Deps) (turn.Options, error) {
	getenv := d.Getenv
	tables, err := store.TablesFromEnv(getenv)
	if err != nil {
		return turn.Options{}, err
	}
	approvalTimeout, err := duration(getenv, "APPROVAL_TIMEOUT")
	if err != nil {
		return turn.Options{}, err
	}
	asyncTimeout, err := duration(getenv, "ASYNC_TOOL_TIMEOUT")
	if err != nil {
		return turn.Options{}, err
	}
	treeDepth, err := count(getenv, "TURN_TREE_MAX_DEPTH")
	if err != nil {
		return turn.Options{}, err
	}
	treeTurns, err := count(getenv, "TURN_TREE_MAX_TURNS")
	if err != nil {
		return turn.Options{}, err
	}
	async, redriver, err := asyncwire.AsyncTools(d)
	if err != nil {
		return turn.Options{}, err
	}
	retention, err := duration(getenv, "STREAM_RETENTION")
	if err != nil {
		return turn.Options{}, err
	}
	// What is too large for an item goes to the async results bucket: stream outputs under
	// streams/, cut tool results under tool-results/.
	results := blobstore.NewS3(d.S3, getenv("ASYNC_RESULTS_BUCKET"))
	var streams *streamlog.Log
	if table := getenv("STREAMS_TABLE"); table != "" {
		streams = streamlog.New(d.DB, table, streamlog.Options{Retention: retention, Blobs: results})
	}
	skillStore, err := skills.FromConfig(d.DB, d.S3, skills.Config{Table: getenv("SKILLS_TABLE"), Bucket: getenv("SKILLS_BUCKET")})
	if err != nil {
		return turn.Options{}, err
	}
	mcp, err := mcptools.FromConfig(getenv("MCP_PRIVATE_ENDPOINTS"))
	if err != nil {
		return turn.Options{}, err
	}
	st := store.New(d.DB, tables)
	models := provider.Config{
		OpenAIKey: getenv("OPENAI_API_KEY"), OpenAIBaseURL: getenv("OPENAI_BASE_URL"), AnthropicKey: getenv("ANTHROPIC_API_KEY"),
		GoogleKey: getenv("GOOGLE_API_KEY"), GeminiKey: getenv("GEMINI_API_KEY"), PrivateEndpoints: getenv("MODEL_PRIVATE_ENDPOINTS"),
	}

	env := tool.Env{Getenv: getenv, Send: workqueue.SQS(d.SQS), Logger: d.Logger}
	var enqueue func(ctx context.Context, body string) error
	if queue := getenv("ASYNC_WORK_QUEUE_URL"); queue != "" {
		enqueue = func(ctx context.Context, body string) error { return env.Send(ctx, queue, body) }
	}
	opts := turn.Options{
		Enqueue:         enqueue,
		ApprovalTimeout: approvalTimeout,
		Store:           st,
		Agents:          agentstore.New(st, d.Sealer, agentconfig.Checks{}, nil),
		Tools: func(config map[string]json.RawMessage, vars tool.Vars) (*tool.Set, error) {
			env := env
			env.Vars = vars
			return d.Tools(config, env)
		},
		Sealer:           d.Sealer,
		Attachments:      attachments.InBucket(d.S3, getenv("ASYNC_RESULTS_BUCKET")),
		Results:          toolresults.New(results),
		Model:            func(block json.RawMessage) (agent.Model, error) { return provider.New(block, models) },
		Logger:           d.Logger,
		Async:            async,
		Redriver:         redriver,
		AsyncToolTimeout: asyncTimeout,
		Streams:          streams,
		MCP:              mcp,
		TreeMaxDepth:     treeDepth,
		TreeMaxTurns:     treeTurns,
	}
	if skillStore != nil {
		// Left nil otherwise: a nil *skills.Store would make a non-nil SkillStore.
		opts.Skills = skillStore
	}
	nats := natslog.Config{
		URL: getenv("NATS_URL"), Creds: getenv("NATS_CREDS"), NKeySeed: getenv("NATS_NKEY_SEED"), CredsSecret: getenv("NATS_CREDS_SECRET"),
		Stream: getenv("NATS_STREAM"), Replicas: getenv("NATS_REPLICAS"),
	}
	return opts, natslog.Attach(&opts, nats, d.Secret, d.Logger)
}

// duration reads an optional positive Go duration from the environment.
func duration(getenv func(string) string, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s is %q, want a positive duration such as 24h or 90m", name, v)
	}
	return d, nil
}

// count reads an optional positive whole number from the environment.
func count(getenv func(string) string, name string) (int, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s is %q, want a positive whole number", name, v)
	}
	return n, nil
}
