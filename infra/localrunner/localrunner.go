// Package localrunner runs every function of template.yaml in one process, the way AWS would
// invoke them: HTTP functions are served on one HTTP server at the routes their HttpApi events
// declare (as API Gateway and Function URLs would), SQS functions get batches from pollers that
// behave like Lambda's event source mappings, and Schedule functions run on a timer like
// EventBridge's. Function environments come from the template too, with resource references
// resolved to the local names and queue URLs that Provision created.
package localrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	accountmanage "github.com/agentharness/harness/functions/account-manage/wire"
	asynctoolcomplete "github.com/agentharness/harness/functions/async-tool-complete/wire"
	asyncworker "github.com/agentharness/harness/functions/async-worker/wire"
	harnessprocessing "github.com/agentharness/harness/functions/harness-processing/wire"
	sweeperwire "github.com/agentharness/harness/functions/sweeper/wire"
	wsgateway "github.com/agentharness/harness/functions/ws-gateway/wire"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/shared/edge/accounts"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Handlers are what a function's main package hands to Lambda: an HTTP handler for its HttpApi
// routes, a batch handler for its SQS event sources, a run for its schedules. A function sets
// the ones its template events need.
type Handlers struct {
	HTTP      http.Handler
	WebSocket WebSocket
	SQS       func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	Schedule  func(context.Context) error
}

// Constructor builds a function's handlers from the dependencies its main package builds: the
// runner gives every function those of one that reads agents, and the sweeper and
// async-tool-complete use their lambdadeps.Deps.
type Constructor func(agentdeps.Deps) (Handlers, error)

// builtin maps template logical ids to what their main packages run.
var builtin = map[string]Constructor{
	"HarnessProcessingFunction": func(d agentdeps.Deps) (Handlers, error) {
		h, err := harnessprocessing.Handler(d)
		if err != nil {
			return Handlers{}, err
		}
		return Handlers{HTTP: h}, nil
	},
	"AccountManageFunction": func(d agentdeps.Deps) (Handlers, error) {
		h, err := accountmanage.Handler(d)
		if err != nil {
			return Handlers{}, err
		}
		return Handlers{HTTP: h}, nil
	},
	"AsyncToolCompleteFunction": func(d agentdeps.Deps) (Handlers, error) {
		h, err := asynctoolcomplete.Handler(d.Deps)
		if err != nil {
			return Handlers{}, err
		}
		return Handlers{HTTP: h}, nil
	},
	"AsyncWorkerFunction": func(d agentdeps.Deps) (Handlers, error) {
		w, err := asyncworker.Worker(d)
		if err != nil {
			return Handlers{}, err
		}
		return Handlers{SQS: w.Handle}, nil
	},
	"WsGatewayFunction": func(d agentdeps.Deps) (Handlers, error) {
		g, err := wsgateway.Gateway(d)
		if err != nil {
			return Handlers{}, err
		}
		return Handlers{WebSocket: g}, nil
	},
	// Only the turn functions invoke the sandbox function, and only on Lambda: here their
	// commands run with bubblewrap, so it serves nothing.
	"SandboxFunction": func(agentdeps.Deps) (Handlers, error) { return Handlers{}, nil },
	"SweeperFunction": func(d agentdeps.Deps) (Handlers, error) {
		s, err := sweeperwire.Sweeper(d.Deps)
		if err != nil {
			return Handlers{}, err
		}
		return Handlers{Schedule: s.Run}, nil
	},
}

// Options configures the runner.
type Options struct {
	Template *template.Template
	DB       *dynamodb.Client
	// SQS and S3 are given to every function; SQS also feeds the pollers of SQS events.
	SQS *sqs.Client
	S3  *s3.Client
	// Name maps a template logical id to the value Ref has for it locally: a table's or a
	// bucket's name, a queue's URL. Resources.Name, from Provision, is one.
	Name func(logicalID string) string
	// Getenv supplies what the template does not set (credentials such as OPENAI_API_KEY) and
	// overrides its empty parameter defaults (ADMIN_SECRET); each function's config is read from
	// the two (lambdadeps.ConfigFrom). SECRETS_LOCAL_KEY, when set, is the key agent secrets are
	// sealed with; otherwise the runner makes one for its lifetime.
	Getenv func(string) string
	Logger *slog.Logger
	// BaseURL is where the runner is served (http://127.0.0.1:PORT). Functions whose template
	// sets AGENT_SERVICE_URL to an empty value get it instead, so outside workers are told a
	// completion URL they can reach.
	BaseURL string
	// Pollers is the number of pollers per SQS event source, each taking one batch at a time
	// (default 1).
	Pollers int
	// ScheduleEvery, when set, replaces the rate of every Schedule event (tests and make dev
	// sweep every few seconds, not every minute).
	ScheduleEvery time.Duration
	// Functions adds or replaces the handlers of template functions, by logical id: tests put
	// fakes behind a template's event sources with it.
	Functions map[string]Constructor
}

// Runner serves every HTTP route of the template (it is the http.Handler), and once started
// polls the queues of its SQS events and runs its schedules.
type Runner struct {
	http.Handler
	store      *store.Store
	agents     *agentstore.Service
	skills     *skills.Store
	workspaces *workspaces.Store
	sqs        *sqs.Client
	logger     *slog.Logger
	pollers    int
	sources    []*sqsSource
	schedules  []*schedule

	mu      sync.Mutex
	stop    context.CancelFunc // set while started
	running sync.WaitGroup
}

// New returns a runner for the template's functions, each built from deps as its main package
// builds them.
func New(opts Options) (*Runner, error) {
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// KMS is not emulated: every function seals and opens agent secrets with one local key.
	box := secrets.New(secrets.NewRandomLocal())
	if key := opts.Getenv("SECRETS_LOCAL_KEY"); key != "" {
		var err error
		box, err = secrets.FromConfig(context.Background(), secrets.Config{LocalKey: key}, nil)
		if err != nil {
			return nil, err
		}
	}
	r := &Runner{sqs: opts.SQS, logger: opts.Logger, pollers: max(opts.Pollers, 1)}
	mux := http.NewServeMux()
	socks := newSockets()
	for _, fn := range opts.Template.Functions() {
		build, ok := opts.Functions[fn.LogicalID]
		if !ok {
			build, ok = builtin[fn.LogicalID]
		}
		if !ok {
			return nil, fmt.Errorf("the local runner does not know function %s", fn.LogicalID)
		}
		env, err := opts.Template.FunctionEnv(fn, opts.Name)
		if err != nil {
			return nil, err
		}
		delete(env, "SECRETS_KMS_KEY_ID")
		if v, ok := env["AGENT_SERVICE_URL"]; ok && v == "" {
			env["AGENT_SERVICE_URL"] = opts.BaseURL
		}
		config := lambdadeps.ConfigFrom(func(k string) string {
			if v := env[k]; v != "" {
				return v
			}
			return opts.Getenv(k)
		})
		logger := opts.Logger.With("function", fn.LogicalID)
		h, err := build(agentdeps.Deps{
			Deps:   lambdadeps.Deps{DB: opts.DB, SQS: opts.SQS, S3: opts.S3, Config: config, Logger: logger},
			Sealer: box, Tools: builtintools.Build, Checks: builtintools.ConfigChecks(), Poster: socks,
		})
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", fn.LogicalID, err)
		}
		if fn.LogicalID == "AccountManageFunction" {
			r.store = store.New(opts.DB, store.Tables{Accounts: config.Tables.Accounts, Agents: config.Tables.Agents})
			if r.skills, err = skills.FromConfig(opts.DB, opts.S3, skills.Config(config.Skills)); err != nil {
				return nil, err
			}
			if r.workspaces, err = workspaces.FromConfig(opts.DB, opts.S3, workspaces.Config(config.Workspaces)); err != nil {
				return nil, err
			}
			r.agents = accounts.AgentService(r.store, r.skills, r.workspaces, box, builtintools.ConfigChecks())
		}
		// Lambda's default timeout is 3 s.
		timeout := time.Duration(max(fn.Timeout, 3)) * time.Second
		if h.WebSocket != nil {
			// The WebSocket API's routes are resources of their own, not function events.
			mux.Handle("GET /ws", serveWebSocket(h.WebSocket, socks, timeout, logger))
		}
		for _, ev := range fn.Events {
			switch ev.Type {
			case "HttpApi", "Api":
				if h.HTTP == nil {
					return nil, fmt.Errorf("%s has HTTP event %s but its handler serves no HTTP", fn.LogicalID, ev.Name)
				}
				path := ev.Path
				if strings.HasSuffix(path, "/") {
					path += "{$}" // an exact path, as in API Gateway
				}
				if greedy, ok := strings.CutSuffix(path, "+}"); ok {
					path = greedy + "...}" // API Gateway's {name+} is the mux's {name...}
				}
				method := strings.ToUpper(ev.Method) + " "
				if method == "ANY " {
					method = ""
				}
				mux.Handle(method+path, h.HTTP)
			case "SQS":
				if h.SQS == nil {
					return nil, fmt.Errorf("%s has SQS event %s but its handler takes no SQS batches", fn.LogicalID, ev.Name)
				}
				r.sources = append(r.sources, &sqsSource{
					function: fn.LogicalID, event: ev, url: opts.Name(ev.Queue),
					handle: h.SQS, timeout: timeout, logger: logger.With("event", ev.Name),
				})
			case "Schedule":
				if h.Schedule == nil {
					return nil, fmt.Errorf("%s has Schedule event %s but its handler has no scheduled run", fn.LogicalID, ev.Name)
				}
				every := opts.ScheduleEvery
				if every <= 0 {
					every = ev.Rate
				}
				if every <= 0 {
					return nil, fmt.Errorf("%s: the local runner cannot time schedule %s (%s); set Options.ScheduleEvery", fn.LogicalID, ev.Name, ev.Schedule)
				}
				r.schedules = append(r.schedules, &schedule{
					function: fn.LogicalID, every: every, run: h.Schedule, timeout: timeout, logger: logger.With("event", ev.Name),
				})
			default:
				return nil, fmt.Errorf("%s: the local runner does not run %s events (%s)", fn.LogicalID, ev.Type, ev.Name)
			}
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

// Start starts the pollers of the template's SQS events (Options.Pollers per event) and the
// timers of its Schedule events. They run until ctx ends or Stop is called. Starting a runner
// that is already started is an error.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop != nil {
		return errors.New("the local runner is already started")
	}
	if len(r.sources) > 0 && r.sqs == nil {
		return errors.New("the template has SQS events but the runner has no SQS client (Options.SQS)")
	}
	for _, s := range r.sources {
		arn, err := template.QueueARN(ctx, r.sqs, s.url)
		if err != nil {
			return fmt.Errorf("%s: SQS event %s: %w", s.function, s.event.Name, err)
		}
		s.arn = arn
	}
	ctx, stop := context.WithCancel(ctx)
	r.stop = stop
	for _, s := range r.sources {
		for range r.pollers {
			r.running.Go(func() { r.poll(ctx, s) })
		}
	}
	for _, s := range r.schedules {
		r.running.Go(func() { s.loop(ctx) })
	}
	return nil
}

// Stop stops what Start started and waits for it to end. A batch being handled sees its context
// canceled; unless its handler had already succeeded, its messages come back after their
// visibility timeout, as after a Lambda timeout. Stopping a runner that is not started does
// nothing; a stopped runner can be started again.
func (r *Runner) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop == nil {
		return
	}
	r.stop()
	r.running.Wait()
	r.stop = nil
}
