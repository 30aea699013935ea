// Package turnwire builds the turn engine of a function that runs turns from its dependencies,
// once for the three that do: harness-processing, async-worker and ws-gateway.
package turnwire

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/catalogue"
	"github.com/agentharness/harness/shared/model/modelblock"
	"github.com/agentharness/harness/shared/model/provider"
	"github.com/agentharness/harness/shared/sandbox"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/agentharness/harness/shared/state/callers"
	"github.com/agentharness/harness/shared/state/providerkeys"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/streamlog"
	"github.com/agentharness/harness/shared/state/tokenkeys"
	"github.com/agentharness/harness/shared/state/toolresults"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/mcptools"
	"github.com/agentharness/harness/shared/tool/memorytools"
	"github.com/agentharness/harness/shared/tool/prompttools"
	"github.com/agentharness/harness/shared/tool/skilltools"
	"github.com/agentharness/harness/shared/tool/workspacetools"
	"github.com/agentharness/harness/shared/wire/workqueue"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/agentharness/harness/functions/asyncwire"
	"github.com/agentharness/harness/shared/edge/natslog"
	"github.com/agentharness/harness/shared/turn"
)

// Options wires the engine of a function that runs turns: table names and fallback
// credentials from the config, models from the provider registry, agent secrets opened with the
// sealer, async tool rows with their redriver, and turn streams copied to NATS where the config
// says so (so a continuation on async-worker publishes where its turn began).
func Options(d agentdeps.Deps) (turn.Options, error) {
	c := d.Config
	if err := c.Require("ACCOUNTS_TABLE", "AGENTS_TABLE", "CONVERSATIONS_TABLE", "EVENTS_TABLE", "APPROVALS_TABLE"); err != nil {
		return turn.Options{}, err
	}
	approvalTimeout, err := duration("APPROVAL_TIMEOUT", c.Turns.ApprovalTimeout)
	if err != nil {
		return turn.Options{}, err
	}
	asyncTimeout, err := duration("ASYNC_TOOL_TIMEOUT", c.Async.ToolTimeout)
	if err != nil {
		return turn.Options{}, err
	}
	treeDepth, err := count("TURN_TREE_MAX_DEPTH", c.Turns.TreeMaxDepth)
	if err != nil {
		return turn.Options{}, err
	}
	treeTurns, err := count("TURN_TREE_MAX_TURNS", c.Turns.TreeMaxTurns)
	if err != nil {
		return turn.Options{}, err
	}
	async, redriver, err := asyncwire.AsyncTools(d.Deps)
	if err != nil {
		return turn.Options{}, err
	}
	retention, err := duration("STREAM_RETENTION", c.Streams.Retention)
	if err != nil {
		return turn.Options{}, err
	}
	// What is too large for an item goes to the async results bucket: stream outputs under
	// streams/, cut tool results under tool-results/.
	results := blobstore.NewS3(d.S3, c.Async.ResultsBucket)
	var streams *streamlog.Log
	if table := c.Streams.Table; table != "" {
		streams = streamlog.New(d.DB, table, streamlog.Options{Retention: retention, Blobs: results, Group: turn.StreamGroup})
	}
	skillStore, err := skills.FromConfig(d.DB, d.S3, skills.Config(c.Skills))
	if err != nil {
		return turn.Options{}, err
	}
	mcp, err := mcptools.FromConfig(c.MCP.PrivateEndpoints)
	if err != nil {
		return turn.Options{}, err
	}
	st := store.New(d.DB, store.Tables(c.Tables))
	keys := operatorKeys(d.Deps)
	tavilyKey := d.Key("TAVILY_API_KEY_SECRET", c.Tools.TavilyAPIKey, c.Tools.TavilyAPIKeySecret)
	env := tool.Env{Getenv: c.Tools.Getenv, Send: workqueue.SQS(d.SQS), Logger: d.Logger}
	runner := sandboxRunner(c, d.AWS)
	if runner != nil {
		env.RunCode = runner.Run
	}
	var enqueue func(ctx context.Context, body string) error
	if queue := c.Async.WorkQueue; queue != "" {
		enqueue = func(ctx context.Context, body string) error { return env.Send(ctx, queue, body) }
	}
	tools := toolBuilder(d.Tools, env, c.Tools, tavilyKey)
	files := attachments.InBucket(d.S3, c.Async.ResultsBucket)
	// A block without a key of its own takes its account's key of its provider, else the
	// deployment's. Every model reads the bytes of the files its requests carry, from its turn's
	// thread.
	accountKeys := providerkeys.New(st, d.Sealer)
	models := func(ctx context.Context, accountID string, block json.RawMessage) (agent.Model, error) {
		block, err := accountKeys.Fill(ctx, accountID, block)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", model.ErrCredentials, err)
		}
		providers, err := keys.config(ctx, block)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", model.ErrCredentials, err)
		}
		m, err := provider.New(block, providers)
		if err != nil {
			return nil, err
		}
		return files.Model(m), nil
	}
	var sk skilltools.Store
	if skillStore != nil {
		// Left nil otherwise: a nil *skills.Store would make a non-nil Store.
		sk = skillStore
	}
	workspaceStore, err := workspaces.FromConfig(d.DB, d.S3, workspaces.Config(c.Workspaces))
	if err != nil {
		return turn.Options{}, err
	}
	var ws workspacetools.Store
	if workspaceStore != nil {
		ws = workspaceStore
	}
	opts := turn.Options{
		Enqueue:          enqueue,
		ApprovalTimeout:  approvalTimeout,
		Store:            st,
		Agents:           agentstore.New(st, d.Sealer, agentconfig.Checks{}, nil),
		Tools:            tools,
		Sealer:           d.Sealer,
		Attachments:      files,
		Results:          toolresults.New(results),
		Model:            models,
		Logger:           d.Logger,
		Async:            async,
		Redriver:         redriver,
		AsyncToolTimeout: asyncTimeout,
		Streams:          streams,
		Toolsets:         Toolsets(models, tools, mcp, sk, ws, runner),
		TreeMaxDepth:     treeDepth,
		TreeMaxTurns:     treeTurns,
	}
	nats := natslog.Config{
		URL: c.NATS.URL, Creds: c.NATS.Creds, NKeySeed: c.NATS.NKeySeed, CredsSecret: c.NATS.CredsSecret,
		Stream: c.NATS.Stream, Replicas: c.NATS.Replicas,
	}
	return opts, natslog.Attach(&opts, nats, d.Secret, d.Logger)
}

// Toolsets are what agents' configs name besides config.tools and config.subagent (the engine's
// own), in the order their tools were always added: config.prompts, built as the engine builds
// agents (models, tools), the tools of config.mcpServers (mcp), config.skills (sk; nil: agents
// that name skills cannot run), config.workspaces and config.sandbox (ws and sandbox; nil:
// agents that name workspaces, or have a sandbox, cannot run), and config.memory (in ws; nil:
// agents with memory cannot run).
func Toolsets(models func(context.Context, string, json.RawMessage) (agent.Model, error), tools func(context.Context, map[string]json.RawMessage, tool.Vars) (*tool.Set, error), mcp *mcptools.Client, sk skilltools.Store, ws workspacetools.Store, sandbox sandbox.Runner) []turn.Toolset {
	return []turn.Toolset{
		prompttools.New(prompttools.Options{Model: models, Tools: tools, NewID: turn.NewMessageID}),
		mcp,
		skilltools.New(sk),
		workspacetools.New(ws, sandbox),
		memorytools.New(ws),
	}
}

// sandboxRunner runs agents' bash: bubblewrap off Lambda (HARNESS_BWRAP, else bwrap on PATH);
// on Lambda, which sets AWS_LAMBDA_FUNCTION_MEMORY_SIZE, the sandbox function SANDBOX_FUNCTION
// names, invoked with the function's AWS config, when the deployment chose it
// (SANDBOX_BACKEND=lambda), or none, and agents with a sandbox are refused.
func sandboxRunner(c lambdadeps.Config, cfg aws.Config) sandbox.Runner {
	if c.Runtime.MemoryMB == "" {
		return &sandbox.Local{Bwrap: c.Sandbox.Bwrap}
	}
	if c.Sandbox.Function == "" || c.Sandbox.Backend != "lambda" {
		return nil
	}
	return &sandbox.Lambda{Client: awslambda.NewFromConfig(cfg), Function: c.Sandbox.Function}
}

// providerKeys are the deployment's fallback model keys, each read when a block that needs it
// first comes (lambdadeps.Key), with the rest of provider.Config.
type providerKeys struct {
	base                      provider.Config
	openai, anthropic, google *lambdadeps.Key
}

// operatorKeys are the fallback keys d's config names.
func operatorKeys(d lambdadeps.Deps) *providerKeys {
	m := d.Config.Models
	return &providerKeys{
		base:      provider.Config{OpenAIBaseURL: m.OpenAIBaseURL, GeminiKey: m.GeminiKey, PrivateEndpoints: m.PrivateEndpoints},
		openai:    d.Key("OPENAI_API_KEY_SECRET", m.OpenAIKey, m.OpenAIKeySecret),
		anthropic: d.Key("ANTHROPIC_API_KEY_SECRET", m.AnthropicKey, m.AnthropicKeySecret),
		google:    d.Key("GOOGLE_API_KEY_SECRET", m.GoogleKey, m.GoogleKeySecret),
	}
}

// config is the provider.Config a model block is built with: the fallback key of each of its
// models' providers (its own and its fallbacks') is read only when that model names no key of
// its own.
func (k *providerKeys) config(ctx context.Context, block json.RawMessage) (provider.Config, error) {
	c := k.base
	primary, fallbacks, err := modelblock.Split(block)
	if err != nil {
		return c, nil // provider.New says what is wrong with a block
	}
	for _, b := range append([]json.RawMessage{primary}, fallbacks...) {
		var own struct {
			Provider string `json:"provider"`
			APIKey   string `json:"apiKey"`
		}
		if json.Unmarshal(b, &own) != nil || own.APIKey != "" {
			continue // one with its own key needs none
		}
		switch own.Provider {
		case "openai":
			c.OpenAIKey, err = k.openai.Value(ctx)
		case "anthropic":
			c.AnthropicKey, err = k.anthropic.Value(ctx)
		case "google":
			c.GoogleKey, err = k.google.Value(ctx)
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// Deployment is what the deployment's models reach by themselves: the providers the operator
// set a fallback key for (in the clear or as a secret), and Bedrock through the function's role
// when it runs on Lambda (which sets AWS_LAMBDA_FUNCTION_MEMORY_SIZE); whether the AWS account
// was granted a Bedrock model is not checked.
func Deployment(d agentdeps.Deps) catalogue.Deployment {
	m := d.Config.Models
	// A key kept as a secret counts without being read: which of the two holds it is all the
	// catalogue asks.
	either := func(plain, secret string) string { return cmp.Or(plain, secret) }
	keyed := provider.Config{
		OpenAIKey: either(m.OpenAIKey, m.OpenAIKeySecret), AnthropicKey: either(m.AnthropicKey, m.AnthropicKeySecret),
		GoogleKey: either(m.GoogleKey, m.GoogleKeySecret), GeminiKey: m.GeminiKey,
	}.Keyed()
	return catalogue.Deployment{Keyed: keyed, IAM: d.Config.Runtime.MemoryMB != ""}
}

// toolBuilder builds config.tools with build for a thread's variables, in env; a config that
// names a Tavily tool first reads the deployment's Tavily key (tavily) when it is a secret of
// the deployment's tools config t.
func toolBuilder(build func(map[string]json.RawMessage, tool.Env) (*tool.Set, error), env tool.Env, t lambdadeps.Tools, tavily *lambdadeps.Key) func(context.Context, map[string]json.RawMessage, tool.Vars) (*tool.Set, error) {
	return func(ctx context.Context, config map[string]json.RawMessage, vars tool.Vars) (*tool.Set, error) {
		env := env
		env.Vars = vars
		if namesTavily(config) && t.TavilyAPIKeySecret != "" {
			withKey := t
			var err error
			if withKey.TavilyAPIKey, err = tavily.Value(ctx); err != nil {
				return nil, fmt.Errorf("%w: %w", model.ErrCredentials, err)
			}
			env.Getenv = withKey.Getenv
		}
		return build(config, env)
	}
}

// namesTavily reports whether config.tools names a Tavily tool, whose key falls back to the
// deployment's.
func namesTavily(config map[string]json.RawMessage) bool {
	_, search := config["tavilySearch"]
	_, extract := config["tavilyExtract"]
	return search || extract
}

// duration parses the optional positive Go duration v, the value of the variable name.
func duration(name, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s is %q, want a positive duration such as 24h or 90m", name, v)
	}
	return d, nil
}

// count parses the optional positive whole number v, the value of the variable name.
func count(name, v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s is %q, want a positive whole number", name, v)
	}
	return n, nil
}

// Callers authenticates the account secret and the end-user tokens of the account's store in
// st, whose JWKS URLs are fetched from public addresses only unless MCP_PRIVATE_ENDPOINTS
// allows private ones.
func Callers(d agentdeps.Deps, st *store.Store) (*callers.Resolver, error) {
	keys, err := tokenkeys.FromConfig(st, d.Sealer, d.Config.MCP.PrivateEndpoints)
	if err != nil {
		return nil, err
	}
	return &callers.Resolver{Store: st, Keys: keys}, nil
}

// AccountKeys reports the providers an account keeps its own key for (PUT
// /accounts/me/providers/{provider}), which its agents reach without the deployment's.
func AccountKeys(d agentdeps.Deps, st *store.Store) catalogue.AccountKeys {
	keys := providerkeys.New(st, d.Sealer)
	return func(ctx context.Context, accountID string) ([]string, error) {
		list, err := keys.List(ctx, accountID)
		providers := make([]string, 0, len(list))
		for _, k := range list {
			providers = append(providers, k.Provider)
		}
		return providers, err
	}
}
