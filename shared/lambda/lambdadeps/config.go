package lambdadeps

import (
	"fmt"
	"reflect"
	"slices"
)

// Config is every environment variable the functions read. ConfigFrom reads them once, when a
// function starts (Main, or the local runner from the template), and each function's wire hands
// the parts down, so no package under shared/ reads the environment. A field's env tag names its
// variable. Values are as set: the package a part goes to parses and checks it, and its errors
// name the variable. The parts are lambdadeps' own plain types, some with the fields of the
// package's config they convert to (store.Tables(c.Tables)), so that a function links only the
// packages its wire uses. docs/configuration.md documents every variable (config_test.go holds
// this list, the docs and template.yaml to each other).
type Config struct {
	LogLevel   string `env:"LOG_LEVEL"`
	Runtime    Runtime
	Tables     Tables
	Async      Async
	Turns      Turns
	Streams    Streams
	Skills     Skills
	Workspaces Workspaces
	Sandbox    Sandbox
	Channels   Channels
	WebSocket  WebSocket
	Secrets    Secrets
	Models     Models
	MCP        MCP
	Tools      Tools
	Accounts   Accounts
	NATS       NATS
}

// Runtime sizes the Go runtime to the function's memory (Main).
type Runtime struct {
	// MemoryMB is the function's MemorySize, which Lambda sets.
	MemoryMB   string `env:"AWS_LAMBDA_FUNCTION_MEMORY_SIZE"`
	GoMemLimit string `env:"GOMEMLIMIT"`
	GoMaxProcs string `env:"GOMAXPROCS"`
}

// Tables are the store's tables, with the fields of store.Tables.
type Tables struct {
	Accounts      string `env:"ACCOUNTS_TABLE"`
	Agents        string `env:"AGENTS_TABLE"`
	Conversations string `env:"CONVERSATIONS_TABLE"`
	Events        string `env:"EVENTS_TABLE"`
	Approvals     string `env:"APPROVALS_TABLE"`
}

// Async is where async tool calls are kept and continued: their rows, the bucket of what is too
// large for an item (their results, turn streams' outputs, cut tool results, attachments),
// async-worker's queue, and how long an outside worker has to complete a call.
type Async struct {
	ResultsTable  string `env:"ASYNC_RESULTS_TABLE"`
	ResultsBucket string `env:"ASYNC_RESULTS_BUCKET"`
	WorkQueue     string `env:"ASYNC_WORK_QUEUE_URL"`
	ToolTimeout   string `env:"ASYNC_TOOL_TIMEOUT"`
}

// Turns are the engine's limits.
type Turns struct {
	ApprovalTimeout string `env:"APPROVAL_TIMEOUT"`
	TreeMaxDepth    string `env:"TURN_TREE_MAX_DEPTH"`
	TreeMaxTurns    string `env:"TURN_TREE_MAX_TURNS"`
}

// Streams is the stream log's table and how long it keeps a turn's output.
type Streams struct {
	Table     string `env:"STREAMS_TABLE"`
	Retention string `env:"STREAM_RETENTION"`
}

// Skills are the skills' table and bucket, with the fields of skills.Config.
type Skills struct {
	Table  string `env:"SKILLS_TABLE"`
	Bucket string `env:"SKILLS_BUCKET"`
}

// Workspaces are the workspaces' table and bucket, with the fields of workspaces.Config.
type Workspaces struct {
	Table  string `env:"WORKSPACES_TABLE"`
	Bucket string `env:"WORKSPACES_BUCKET"`
}

// Sandbox is where agents' bash commands run: bubblewrap off Lambda, the sandbox function on it.
type Sandbox struct {
	Bwrap    string `env:"HARNESS_BWRAP"`
	Function string `env:"SANDBOX_FUNCTION"`
	// Backend, "lambda", turns the sandbox function on; the deployment's choice (SandboxBackend).
	Backend string `env:"SANDBOX_BACKEND"`
}

// Channels are the channel bindings' table and where the chat platforms' APIs are (APIs has the
// fields of channels.APIs).
type Channels struct {
	Table string `env:"CHANNELS_TABLE"`
	APIs  struct {
		Slack    string `env:"SLACK_API_URL"`
		Telegram string `env:"TELEGRAM_API_URL"`
	}
}

// WebSocket is the WebSocket API's connections table and @connections endpoint.
type WebSocket struct {
	ConnectionsTable string `env:"CONNECTIONS_TABLE"`
	Endpoint         string `env:"WEBSOCKET_ENDPOINT"`
}

// Secrets is the key that seals agents' secrets, with the fields of secrets.Config.
type Secrets struct {
	KMSKeyID string `env:"SECRETS_KMS_KEY_ID"`
	LocalKey string `env:"SECRETS_LOCAL_KEY"`
}

// Models are the service's fallback model keys and where models may be called. In AWS a key is
// a Secrets Manager secret its *_SECRET variable names (Deps.Key reads it when a turn first
// needs it); the plain variables are for local use only.
type Models struct {
	OpenAIKey          string `env:"OPENAI_API_KEY"`
	OpenAIKeySecret    string `env:"OPENAI_API_KEY_SECRET"`
	OpenAIBaseURL      string `env:"OPENAI_BASE_URL"`
	AnthropicKey       string `env:"ANTHROPIC_API_KEY"`
	AnthropicKeySecret string `env:"ANTHROPIC_API_KEY_SECRET"`
	GoogleKey          string `env:"GOOGLE_API_KEY"`
	GoogleKeySecret    string `env:"GOOGLE_API_KEY_SECRET"`
	GeminiKey          string `env:"GEMINI_API_KEY"`
	PrivateEndpoints   string `env:"MODEL_PRIVATE_ENDPOINTS"`
}

// MCP says whether agents' MCP servers may be on private addresses.
type MCP struct {
	PrivateEndpoints string `env:"MCP_PRIVATE_ENDPOINTS"`
}

// Tools are the deployment's values of the builtin tools' variables, which a tool falls back to
// by name through Getenv (tool.Env.Getenv). The Tavily key is in AWS the Secrets Manager secret
// TAVILY_API_KEY_SECRET names; TAVILY_API_KEY is for local use only.
type Tools struct {
	TavilyAPIKey       string `env:"TAVILY_API_KEY"`
	TavilyAPIKeySecret string `env:"TAVILY_API_KEY_SECRET"`
	TavilyBaseURL      string `env:"TAVILY_BASE_URL"`
	ExternalJobsQueue  string `env:"EXTERNAL_JOBS_QUEUE_URL"`
	ServiceURL         string `env:"AGENT_SERVICE_URL"`
}

// Getenv is the value of the tools' variable name; "" for any other name.
func (t Tools) Getenv(name string) string {
	v, _ := lookup(reflect.ValueOf(t), name)
	return v
}

// Accounts is account-manage's: the admin secret, who may sign up, and the deployment's public
// URL (which the tools read too).
type Accounts struct {
	AdminSecret string `env:"ADMIN_SECRET"`
	Signup      string `env:"ACCOUNT_SIGNUP"`
	ServiceURL  string `env:"AGENT_SERVICE_URL"`
}

// NATS is how the functions reach NATS: the mirror of turn streams (natslog.Config) and the
// clients' credentials account-manage issues (natsturns.IssuerConfig).
type NATS struct {
	URL                      string `env:"NATS_URL"`
	Stream                   string `env:"NATS_STREAM"`
	Creds                    string `env:"NATS_CREDS"`
	NKeySeed                 string `env:"NATS_NKEY_SEED"`
	CredsSecret              string `env:"NATS_CREDS_SECRET"`
	Replicas                 string `env:"NATS_REPLICAS"`
	AccountSigningSeed       string `env:"NATS_ACCOUNT_SIGNING_SEED"`
	AccountSigningSeedSecret string `env:"NATS_ACCOUNT_SIGNING_SEED_SECRET"`
	Account                  string `env:"NATS_ACCOUNT"`
	ClientURLs               string `env:"NATS_CLIENT_URLS"`
	CredentialsTTL           string `env:"NATS_CREDENTIALS_TTL"`
}

// ConfigFrom reads every variable of Config with getenv: os.Getenv in Lambda, the function's
// template environment in the local runner.
func ConfigFrom(getenv func(string) string) Config {
	var c Config
	fields(reflect.ValueOf(&c).Elem(), func(name string, field reflect.Value) { field.SetString(getenv(name)) })
	return c
}

// Variables names every variable Config reads, once each, sorted.
func Variables() []string {
	var names []string
	fields(reflect.ValueOf(Config{}), func(name string, _ reflect.Value) { names = append(names, name) })
	slices.Sort(names)
	return slices.Compact(names)
}

// Require is the error of a function that cannot start without all of names set: the first one
// that is empty in c. A name Config does not read is a mistake of the caller's, and panics.
func (c Config) Require(names ...string) error {
	for _, name := range names {
		v, ok := lookup(reflect.ValueOf(c), name)
		if !ok {
			panic("lambdadeps: Config reads no variable " + name)
		}
		if v == "" {
			return fmt.Errorf("environment variable %s is not set", name)
		}
	}
	return nil
}

// fields calls f with each variable's name and field in v, a struct of strings and of parts.
func fields(v reflect.Value, f func(name string, field reflect.Value)) {
	for i := range v.NumField() {
		if field := v.Field(i); field.Kind() == reflect.Struct {
			fields(field, f)
		} else {
			f(v.Type().Field(i).Tag.Get("env"), field)
		}
	}
}

// lookup is the value of the variable name in v; ok is false when v reads no such variable.
func lookup(v reflect.Value, name string) (value string, ok bool) {
	fields(v, func(n string, field reflect.Value) {
		if n == name {
			value, ok = field.String(), true
		}
	})
	return value, ok
}
