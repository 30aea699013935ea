// Package localrunner serves every function of template.yaml on one HTTP server, at the routes
// its HttpApi events declare, the way API Gateway and Function URLs would in AWS. Function
// environments come from the template too, with table references resolved to local names.
package localrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/agentharness/harness/functions/harness-processing/tools"
	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/shared/agents"
	"github.com/agentharness/harness/shared/api"
	"github.com/agentharness/harness/shared/secrets"
	"github.com/agentharness/harness/shared/store"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// constructor builds a function's handler from its environment.
type constructor func(db *dynamodb.Client, sealer agents.Sealer, getenv func(string) string, logger *slog.Logger) (http.Handler, error)

// functions maps template logical ids to the handlers their main packages run.
var functions = map[string]constructor{
	"HarnessProcessingFunction": func(db *dynamodb.Client, sealer agents.Sealer, getenv func(string) string, logger *slog.Logger) (http.Handler, error) {
		return api.NewHarness(api.Deps{DB: db, Sealer: sealer, Getenv: getenv, Tools: tools.Build, Logger: logger})
	},
	"AccountManageFunction": func(db *dynamodb.Client, sealer agents.Sealer, getenv func(string) string, logger *slog.Logger) (http.Handler, error) {
		return api.NewAccountManage(api.Deps{DB: db, Sealer: sealer, Getenv: getenv, Checks: tools.ConfigChecks(), Logger: logger})
	},
}

// Options configures the runner.
type Options struct {
	Template *template.Template
	DB       *dynamodb.Client
	// Name maps a template logical id to the local physical name of its resource.
	Name func(logicalID string) string
	// Getenv supplies what the template does not set (credentials such as OPENAI_API_KEY) and
	// overrides its empty parameter defaults (ADMIN_SECRET). SECRETS_LOCAL_KEY, when set, is
	// the key agent secrets are sealed with; otherwise the runner makes one for its lifetime.
	Getenv func(string) string
	Logger *slog.Logger
}

// Runner serves every HTTP route of the template.
type Runner struct {
	http.Handler
	store  *store.Store
	agents *agents.Service
}

// New returns a runner for the template's functions.
func New(opts Options) (*Runner, error) {
	// KMS is not emulated: every function seals and opens agent secrets with one local key.
	box := secrets.New(secrets.NewRandomLocal())
	if key := opts.Getenv("SECRETS_LOCAL_KEY"); key != "" {
		var err error
		box, err = secrets.FromEnv(context.Background(), func(k string) string {
			if k == "SECRETS_LOCAL_KEY" {
				return key
			}
			return ""
		}, nil)
		if err != nil {
			return nil, err
		}
	}
	r := &Runner{}
	mux := http.NewServeMux()
	for _, fn := range opts.Template.Functions() {
		build, ok := functions[fn.LogicalID]
		if !ok {
			return nil, fmt.Errorf("the local runner does not know function %s", fn.LogicalID)
		}
		env, err := opts.Template.FunctionEnv(fn, opts.Name)
		if err != nil {
			return nil, err
		}
		delete(env, "SECRETS_KMS_KEY_ID")
		getenv := func(k string) string {
			if v := env[k]; v != "" {
				return v
			}
			return opts.Getenv(k)
		}
		h, err := build(opts.DB, box, getenv, opts.Logger.With("function", fn.LogicalID))
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", fn.LogicalID, err)
		}
		if fn.LogicalID == "AccountManageFunction" {
			tables, err := store.AccountTablesFromEnv(getenv)
			if err != nil {
				return nil, err
			}
			r.store = store.New(opts.DB, tables)
			r.agents = agents.New(r.store, box, tools.ConfigChecks(), nil)
		}
		for _, ev := range fn.Events {
			if ev.Type != "HttpApi" && ev.Type != "Api" {
				continue
			}
			path := ev.Path
			if strings.HasSuffix(path, "/") {
				path += "{$}" // an exact path, as in API Gateway
			}
			method := strings.ToUpper(ev.Method) + " "
			if method == "ANY " {
				method = ""
			}
			mux.Handle(method+path, h)
		}
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "no route for " + r.Method + " " + r.URL.Path})
	})
	r.Handler = mux
	return r, nil
}

// Provision creates the template's tables named prefix + logical id and returns that naming
// with the table names harness-processing gets from it.
func Provision(ctx context.Context, db *dynamodb.Client, tpl *template.Template, prefix string) (func(string) string, store.Tables, error) {
	name := func(logicalID string) string { return prefix + logicalID }
	if err := template.Provision(ctx, db, tpl, name); err != nil {
		return nil, store.Tables{}, fmt.Errorf("creating the tables: %w", err)
	}
	tables, err := StoreTables(tpl, name)
	return name, tables, err
}

// StoreTables returns the table names harness-processing gets from the template.
func StoreTables(tpl *template.Template, name func(logicalID string) string) (store.Tables, error) {
	for _, fn := range tpl.Functions() {
		if fn.LogicalID != "HarnessProcessingFunction" {
			continue
		}
		env, err := tpl.FunctionEnv(fn, name)
		if err != nil {
			return store.Tables{}, err
		}
		return store.TablesFromEnv(func(k string) string { return env[k] })
	}
	return store.Tables{}, errors.New("template has no HarnessProcessingFunction")
}
