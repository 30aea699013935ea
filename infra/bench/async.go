package main

// The async benchmark (-async): outside workers completing external-dispatch tool calls on the
// local stack. Every function of template.yaml runs in the local runner, served over loopback
// HTTP with its SQS pollers, on DynamoDB Local and fauxqs. An account's agent calls
// test_external_async -calls times in one step; -groups /async turns dispatch their jobs; the
// jobs are taken off the ExternalJobsQueue and completed over HTTP with -concurrency requests in
// flight. Measured: completions per second over the completion phase; per group, the time from
// the HTTP answer of its last completion (the one that found the group complete and re-drove
// it) to async-worker's "continuation started" record, and to the continuation's model answer;
// and the DynamoDB write units, per table, of the dispatch and of the completions with their
// continuations, read from the consumed capacity of every write the runner made. A second,
// smaller run meters asynctools.Store alone on the same table: register + settle per call, seal
// + claim + consume per group.
//
//	go run ./infra/cmd/stack -- go run ./infra/bench -async

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/wire/awsclient"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
)

// asyncConfig is the async benchmark's workload.
type asyncConfig struct {
	enabled     bool
	groups      int
	calls       int
	concurrency int
	pollers     int
	warmup      int
	idle        int
	meterGroups int
	timeout     time.Duration
}

// asyncFlags registers the async benchmark's flags; main reads them after flag.Parse.
func asyncFlags() *asyncConfig {
	c := &asyncConfig{}
	flag.BoolVar(&c.enabled, "async", false, "run the async tools benchmark (completions of external-dispatch calls) instead of the turn benchmark")
	flag.IntVar(&c.groups, "groups", 200, "async: measured dispatch groups (/async turns)")
	flag.IntVar(&c.calls, "calls", 3, "async: test_external_async calls per group, made in one model step")
	flag.IntVar(&c.concurrency, "concurrency", 32, "async: completion requests in flight (and /async requests while dispatching)")
	flag.IntVar(&c.pollers, "pollers", 5, "async: concurrent SQS pollers of async-worker's queue, each taking up to 10 messages (Lambda starts with 5)")
	flag.IntVar(&c.warmup, "async-warmup", 20, "async: groups run end to end before measuring")
	flag.IntVar(&c.idle, "idle-groups", 20, "async: groups measured again one request at a time, for the latency without load (0: skip)")
	flag.IntVar(&c.meterGroups, "meter-groups", 50, "async: groups of the metered asynctools.Store run")
	flag.DurationVar(&c.timeout, "async-timeout", 90*time.Second, "async: how long one phase may take")
	return c
}

func (c asyncConfig) check() error {
	switch {
	case c.groups < 1, c.calls < 1, c.concurrency < 1, c.pollers < 1, c.warmup < 0, c.idle < 0, c.meterGroups < 1:
		return fmt.Errorf("-groups, -calls, -concurrency, -pollers and -meter-groups must be at least 1, -async-warmup and -idle-groups at least 0")
	case c.calls > 20:
		return fmt.Errorf("-calls is %d: the scripted step makes at most 20 calls here", c.calls)
	case os.Getenv("AWS_ENDPOINT_URL_SQS") == "" && os.Getenv("AWS_ENDPOINT_URL") == "":
		return errors.New("AWS_ENDPOINT_URL_SQS is not set: the async benchmark needs fauxqs; run it with go run ./infra/cmd/stack -- go run ./infra/bench -async")
	}
	return nil
}

// runAsync runs the async benchmark and prints its tables.
func runAsync(ctx context.Context, root string, c asyncConfig) error {
	if err := c.check(); err != nil {
		return err
	}
	b, err := newAsyncBench(ctx, root, c)
	if err != nil {
		return err
	}
	defer b.stop()

	if c.warmup > 0 {
		log.Printf("warming up: %d groups of %d calls end to end", c.warmup, c.calls)
		if _, err := b.round(ctx, c.warmup, c.concurrency); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	log.Printf("measuring: %d groups of %d calls, %d completions in flight, %d pollers", c.groups, c.calls, c.concurrency, c.pollers)
	r, err := b.round(ctx, c.groups, c.concurrency)
	if err != nil {
		return err
	}
	var idle *roundResult
	if c.idle > 0 {
		log.Printf("measuring without load: %d groups, one request at a time", c.idle)
		r, err := b.round(ctx, c.idle, 1)
		if err != nil {
			return err
		}
		idle = &r
	}
	log.Printf("metering asynctools.Store alone: %d groups of %d calls", c.meterGroups, c.calls)
	micro, err := meterStore(ctx, b.plainDB, b.asyncTable, c.meterGroups, c.calls)
	if err != nil {
		return err
	}

	fmt.Printf("%s %s/%s, %d CPUs; everything (runner, pollers, clients) in this process, DynamoDB Local and fauxqs in their own.\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	printAsync(os.Stdout, c, r, idle, b.tables, micro)
	return nil
}

// asyncBench is the runner under test and what the benchmark reads around it.
type asyncBench struct {
	cfg        asyncConfig
	srv        *httptest.Server
	runner     *localrunner.Runner
	sqs        *sqs.Client
	plainDB    *dynamodb.Client
	meter      *writeMeter
	events     *eventLog
	secret     string
	jobsQueue  string
	workQueue  string
	asyncTable string
	// tables maps the provisioned table names to their logical ids, for the report.
	tables map[string]string
	client *http.Client
}

func newAsyncBench(ctx context.Context, root string, c asyncConfig) (*asyncBench, error) {
	cfg, err := awsclient.Config(ctx)
	if err != nil {
		return nil, err
	}
	meter := &writeMeter{tables: map[string]*units{}}
	metered := cfg.Copy()
	metered.APIOptions = append(slices.Clone(cfg.APIOptions), meter.middleware)
	db := awsclient.DynamoDB(metered)
	sqsc, s3c := awsclient.SQS(cfg), awsclient.S3(cfg)
	tpl, err := template.Load(filepath.Join(root, "template.yaml"))
	if err != nil {
		return nil, err
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	res, err := localrunner.Provision(ctx, localrunner.Clients{DB: db, SQS: sqsc, S3: s3c}, tpl, "bencha-"+hex.EncodeToString(suffix)+"-")
	if err != nil {
		return nil, err
	}
	b := &asyncBench{
		cfg: c, sqs: sqsc, plainDB: awsclient.DynamoDB(cfg), meter: meter, events: newEventLog(),
		jobsQueue: res.QueueURLs["ExternalJobsQueue"], workQueue: res.QueueURLs["AsyncWorkQueue"], asyncTable: res.TableNames["AsyncToolResultsTable"],
		tables: map[string]string{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * c.concurrency}},
	}
	for logical, name := range res.TableNames {
		b.tables[name] = logical
	}
	if b.jobsQueue == "" || b.workQueue == "" || b.asyncTable == "" {
		return nil, errors.New("template.yaml has no ExternalJobsQueue, AsyncWorkQueue or AsyncToolResultsTable")
	}
	b.srv = httptest.NewUnstartedServer(nil)
	b.runner, err = localrunner.New(localrunner.Options{
		Template: tpl, DB: db, SQS: sqsc, S3: s3c, Name: res.Name,
		Getenv:  func(string) string { return "" },
		Logger:  slog.New(b.events.handler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		BaseURL: "http://" + b.srv.Listener.Addr().String(),
		Pollers: c.pollers,
	})
	if err != nil {
		b.srv.Close()
		return nil, err
	}
	b.srv.Config.Handler = b.runner
	b.srv.Start()
	if err := b.runner.Start(ctx); err != nil {
		b.srv.Close()
		return nil, err
	}
	if b.secret, err = b.seed(ctx); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

func (b *asyncBench) stop() {
	b.runner.Stop()
	b.srv.Close()
}

// seed creates the bench account and its agent: one step with cfg.calls external calls, then
// an answer with their results.
func (b *asyncBench) seed(ctx context.Context) (string, error) {
	var calls []map[string]any
	for i := range b.cfg.calls {
		calls = append(calls, map[string]any{"name": "test_external_async", "input": map[string]string{"echo": fmt.Sprintf("job%d", i)}})
	}
	cfg, err := json.Marshal(map[string]any{
		"name": "async bench",
		"model": map[string]any{"provider": "scripted", "script": []any{
			map[string]any{"toolCalls": calls},
			map[string]any{"text": "Done: {{toolResults}}"},
		}},
		"tools": map[string]any{"test_external_async": map[string]any{"async": true, "execution": "external-dispatch"}},
	})
	if err != nil {
		return "", err
	}
	seed := &localrunner.SeedFile{Username: "bench", Agents: []localrunner.SeedAgent{{AgentID: "async", Config: cfg}}}
	_, secret, err := b.runner.Seed(ctx, seed, time.Now())
	if err != nil {
		return "", fmt.Errorf("seeding the async bench agent: %w", err)
	}
	return secret, nil
}

// roundResult is what one measured round found.
type roundResult struct {
	groups, completions int
	concurrency         int
	dispatch            time.Duration // first /async request to the last turn waiting
	completion          time.Duration // first completion request to the last answer
	completionMs        []float64     // each completion request's latency
	toStartMs           []float64     // per group: last completion answer → continuation started
	toAnswerMs          []float64     // per group: last completion answer → continuation's model answer
	dispatchUnits       map[string]units
	completionUnits     map[string]units
}

// round runs n groups end to end with at most concurrency requests in flight: dispatch, take
// the jobs, complete them, wait for every continuation and check every turn's answer. Each
// phase's write units are counted once its work queue messages are all handled.
func (b *asyncBench) round(ctx context.Context, n, concurrency int) (roundResult, error) {
	r := roundResult{groups: n, completions: n * b.cfg.calls, concurrency: concurrency}
	b.events.reset()

	// Dispatch: n /async turns, each ending with its group sealed and its jobs queued.
	before := b.meter.snapshot()
	start := time.Now()
	events := make([]string, n)
	err := parallel(ctx, n, concurrency, func(ctx context.Context, i int) error {
		var out struct {
			EventID string `json:"eventId"`
		}
		code, body, err := b.post(ctx, "/async", b.secret, fmt.Sprintf(`{"agentId":"async","message":"run %d"}`, i), &out)
		if err != nil {
			return err
		}
		if code != http.StatusAccepted || out.EventID == "" {
			return fmt.Errorf("POST /async = %d %s", code, body)
		}
		events[i] = out.EventID
		return nil
	})
	if err != nil {
		return r, err
	}
	groupOf, err := b.events.waitGroups(ctx, events, b.cfg.timeout)
	if err != nil {
		return r, err
	}
	if err := b.waitEvents(ctx, events, concurrency, "waiting_for_async_tools"); err != nil {
		return r, err
	}
	r.dispatch = time.Since(start)
	if err := b.drained(ctx); err != nil {
		return r, err
	}
	r.dispatchUnits = b.meter.since(before)

	jobs, err := b.takeJobs(ctx, r.completions)
	if err != nil {
		return r, err
	}

	// Completions, in the order the queue gave them, r.completions of them with bounded
	// concurrency; the meter now counts the completions and the continuations they start.
	before = b.meter.snapshot()
	var mu sync.Mutex
	last := map[string]time.Time{} // group → answer of the completion that found it complete
	r.completionMs = make([]float64, len(jobs))
	var settled atomic.Int64
	start = time.Now()
	var end time.Time
	err = parallel(ctx, len(jobs), concurrency, func(ctx context.Context, i int) error {
		j := jobs[i]
		sent := time.Now()
		var out struct {
			Group string `json:"group"`
		}
		code, body, err := b.post(ctx, strings.TrimPrefix(j.CompletionURL, b.srv.URL), j.Token,
			fmt.Sprintf(`{"status":"completed","response":{"echo":%q}}`, strings.ToUpper(j.Echo)), &out)
		answered := time.Now()
		if err != nil {
			return err
		}
		if code != http.StatusOK && code != http.StatusAccepted {
			return fmt.Errorf("completing %s = %d %s", j.ResultID, code, body)
		}
		settled.Add(1)
		r.completionMs[i] = ms(answered.Sub(sent))
		group, _, _ := strings.Cut(j.ResultID, ".")
		mu.Lock()
		defer mu.Unlock()
		if answered.After(end) {
			end = answered
		}
		if out.Group == "complete" {
			if t, ok := last[group]; !ok || answered.Before(t) {
				last[group] = answered
			}
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	r.completion = end.Sub(start)
	if int(settled.Load()) != r.completions {
		return r, fmt.Errorf("%d of %d completions settled", settled.Load(), r.completions)
	}

	// Every group's continuation starts and answers; every turn ends completed with the echoes.
	groups := make([]string, 0, n)
	for _, g := range groupOf {
		groups = append(groups, g)
	}
	answered, err := b.events.waitAnswers(ctx, groups, b.cfg.timeout)
	if err != nil {
		return r, err
	}
	if err := b.waitEvents(ctx, events, concurrency, "completed"); err != nil {
		return r, err
	}
	if err := b.drained(ctx); err != nil {
		return r, err
	}
	r.completionUnits = b.meter.since(before)
	for _, g := range groups {
		done, ok := last[g]
		if !ok {
			return r, fmt.Errorf("no completion of group %s answered that the group was complete", g)
		}
		started, _ := b.events.at("continuation started", g)
		r.toStartMs = append(r.toStartMs, ms(started.Sub(done)))
		r.toAnswerMs = append(r.toAnswerMs, ms(answered[g].Sub(done)))
	}
	if n := b.events.count("duplicate continuation ignored"); n > 0 {
		log.Printf("note: %d duplicate continuations were ignored", n)
	}
	return r, nil
}

// waitEvents polls every event's status until it is want. A completed event's answer must
// carry every job's echo upper-cased: a broken round is fast, and would flatter the numbers.
func (b *asyncBench) waitEvents(ctx context.Context, events []string, concurrency int, want string) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.timeout)
	defer cancel()
	return parallel(ctx, len(events), concurrency, func(ctx context.Context, i int) error {
		var st struct {
			Status, Text, Error string
		}
		for {
			code, body, err := b.do(ctx, http.MethodGet, "/status/"+events[i], b.secret, "", &st)
			if err != nil {
				return err
			}
			if code != http.StatusOK || st.Status == "failed" || st.Status == "completed" && want != "completed" {
				return fmt.Errorf("event %s = %d %s, want %s", events[i], code, body, want)
			}
			if st.Status == want {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		for c := range b.cfg.calls {
			if want == "completed" && !strings.Contains(st.Text, fmt.Sprintf("JOB%d", c)) {
				return fmt.Errorf("event %s answered %q, without JOB%d", events[i], st.Text, c)
			}
		}
		return nil
	})
}

// drained waits until async-worker's queue holds no message, visible or in flight: every
// turn and continuation sent to it has been handled, its writes made.
func (b *asyncBench) drained(ctx context.Context) error {
	deadline := time.Now().Add(b.cfg.timeout)
	for {
		out, err := b.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: &b.workQueue,
			AttributeNames: []sqstypes.QueueAttributeName{
				sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			},
		})
		if err != nil {
			return fmt.Errorf("reading the work queue's attributes: %w", err)
		}
		left := 0
		for _, v := range out.Attributes {
			var n int
			fmt.Sscan(v, &n)
			left += n
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the work queue still holds messages after %s: %v", b.cfg.timeout, out.Attributes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchJob is what test_external_async puts on the ExternalJobsQueue.
type benchJob struct {
	ResultID      string `json:"resultId"`
	Echo          string `json:"echo"`
	CompletionURL string `json:"completionUrl"`
	Token         string `json:"token"`
}

// takeJobs takes n jobs off the ExternalJobsQueue with a few concurrent receivers, deleting
// them, in the order they came.
func (b *asyncBench) takeJobs(ctx context.Context, n int) ([]benchJob, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.timeout)
	defer cancel()
	var mu sync.Mutex
	var jobs []benchJob
	have := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(jobs)
	}
	err := parallel(ctx, 8, 8, func(ctx context.Context, _ int) error {
		for have() < n {
			out, err := b.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &b.jobsQueue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil {
				return fmt.Errorf("receiving jobs (%d of %d): %w", have(), n, err)
			}
			var entries []sqstypes.DeleteMessageBatchRequestEntry
			var got []benchJob
			for i, m := range out.Messages {
				var j benchJob
				if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &j); err != nil || j.Token == "" || j.CompletionURL == "" {
					return fmt.Errorf("a message on the jobs queue is not a job with a completionUrl: %s", aws.ToString(m.Body))
				}
				got = append(got, j)
				entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
			}
			if len(entries) > 0 {
				if _, err := b.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &b.jobsQueue, Entries: entries}); err != nil {
					return fmt.Errorf("deleting jobs: %w", err)
				}
			}
			mu.Lock()
			jobs = append(jobs, got...)
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(jobs) != n {
		return nil, fmt.Errorf("took %d jobs off the queue, want %d", len(jobs), n)
	}
	return jobs, nil
}

func (b *asyncBench) post(ctx context.Context, path, token, body string, out any) (int, []byte, error) {
	return b.do(ctx, http.MethodPost, path, token, body, out)
}

// do sends one request to the runner; a 2xx JSON answer is decoded into out.
func (b *asyncBench) do(ctx context.Context, method, path, token, body string, out any) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(got, out); err != nil {
			return resp.StatusCode, got, fmt.Errorf("%s %s: decoding %s: %w", method, path, got, err)
		}
	}
	return resp.StatusCode, bytes.TrimSpace(got), nil
}

// parallel runs f for 0..n-1 with at most limit at once and returns the first error, which
// cancels the rest.
func parallel(ctx context.Context, n, limit int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(limit, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// eventLog keeps, from the runner's log records, the times the benchmark reads: by groupId,
// when a continuation started and when its model pass finished; by eventId, the group an
// /async turn waits for.
type eventLog struct {
	mu      sync.Mutex
	times   map[string]time.Time // message + "\x00" + groupId → first time
	groups  map[string]string    // eventId → groupId
	counts  map[string]int
	changed chan struct{}
}

func newEventLog() *eventLog {
	l := &eventLog{changed: make(chan struct{}, 1)}
	l.reset()
	return l
}

func (l *eventLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.times, l.groups, l.counts = map[string]time.Time{}, map[string]string{}, map[string]int{}
}

func (l *eventLog) record(r slog.Record, attrs map[string]string) {
	switch r.Message {
	case "continuation started", "pass finished", "turn waits for async tools", "duplicate continuation ignored":
	default:
		return
	}
	group := attrs["groupId"]
	if group == "" {
		return // a pass of a first turn, not of a continuation
	}
	l.mu.Lock()
	k := r.Message + "\x00" + group
	if _, ok := l.times[k]; !ok {
		l.times[k] = r.Time
	}
	l.counts[r.Message]++
	if r.Message == "turn waits for async tools" && attrs["eventId"] != "" {
		l.groups[attrs["eventId"]] = group
	}
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *eventLog) at(msg, group string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.times[msg+"\x00"+group]
	return t, ok
}

func (l *eventLog) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[msg]
}

// wait calls done under the lock each time a record arrives until it reports true.
func (l *eventLog) wait(ctx context.Context, timeout time.Duration, what string, done func() (bool, string)) error {
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		ok, progress := done()
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-l.changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			return fmt.Errorf("timed out after %s waiting for %s (%s)", timeout, what, progress)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitGroups waits until every event's turn waits for its group, and returns event → group.
func (l *eventLog) waitGroups(ctx context.Context, events []string, timeout time.Duration) (map[string]string, error) {
	out := map[string]string{}
	err := l.wait(ctx, timeout, "the /async turns to dispatch their jobs", func() (bool, string) {
		n := 0
		for _, ev := range events {
			if g, ok := l.groups[ev]; ok {
				out[ev] = g
				n++
			}
		}
		return n == len(events), fmt.Sprintf("%d of %d waiting", n, len(events))
	})
	return out, err
}

// waitAnswers waits until every group's continuation has started and its model pass has
// finished, and returns when each pass finished.
func (l *eventLog) waitAnswers(ctx context.Context, groups []string, timeout time.Duration) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	err := l.wait(ctx, timeout, "every continuation to answer", func() (bool, string) {
		n := 0
		for _, g := range groups {
			_, started := l.times["continuation started\x00"+g]
			t, finished := l.times["pass finished\x00"+g]
			if started && finished {
				out[g] = t
				n++
			}
		}
		return n == len(groups), fmt.Sprintf("%d of %d answered", n, len(groups))
	})
	return out, err
}

// handler returns a slog handler that records into l and passes records on to next.
func (l *eventLog) handler(next slog.Handler) slog.Handler {
	return &eventHandler{log: l, next: next, attrs: map[string]string{}}
}

type eventHandler struct {
	log   *eventLog
	next  slog.Handler
	attrs map[string]string // of Logger.With
}

func (h *eventHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *eventHandler) Handle(ctx context.Context, r slog.Record) error {
	attrs := h.attrs
	if r.NumAttrs() > 0 {
		attrs = make(map[string]string, len(h.attrs)+r.NumAttrs())
		for k, v := range h.attrs {
			attrs[k] = v
		}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
	}
	h.log.record(r, attrs)
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *eventHandler) WithAttrs(as []slog.Attr) slog.Handler {
	attrs := make(map[string]string, len(h.attrs)+len(as))
	for k, v := range h.attrs {
		attrs[k] = v
	}
	for _, a := range as {
		attrs[a.Key] = a.Value.String()
	}
	return &eventHandler{log: h.log, next: h.next.WithAttrs(as), attrs: attrs}
}

func (h *eventHandler) WithGroup(name string) slog.Handler {
	return &eventHandler{log: h.log, next: h.next.WithGroup(name), attrs: h.attrs}
}

// units are write capacity units, on a table and on its indexes.
type units struct{ table, index float64 }

// writeMeter adds up the write units DynamoDB reports for every write made with a client it
// is installed on, by table. It asks each write for its consumed capacity; a write refused by
// its condition costs a unit in AWS too, but DynamoDB does not report it, so it is not counted.
type writeMeter struct {
	mu     sync.Mutex
	tables map[string]*units
}

// middleware is an APIOptions entry for a DynamoDB client.
func (m *writeMeter) middleware(s *middleware.Stack) error {
	return s.Initialize.Add(middleware.InitializeMiddlewareFunc("benchWriteMeter", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		const want = dbtypes.ReturnConsumedCapacityIndexes
		switch p := in.Parameters.(type) { // copies: the caller's input is left as it was
		case *dynamodb.PutItemInput:
			c := *p
			c.ReturnConsumedCapacity = want
			in.Parameters = &c
		case *dynamodb.UpdateItemInput:
			c := *p
			c.ReturnConsumedCapacity = want
			in.Parameters = &c
		case *dynamodb.DeleteItemInput:
			c := *p
			c.ReturnConsumedCapacity = want
			in.Parameters = &c
		case *dynamodb.TransactWriteItemsInput:
			c := *p
			c.ReturnConsumedCapacity = want
			in.Parameters = &c
		case *dynamodb.BatchWriteItemInput:
			c := *p
			c.ReturnConsumedCapacity = want
			in.Parameters = &c
		}
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		switch r := out.Result.(type) {
		case *dynamodb.PutItemOutput:
			m.add(r.ConsumedCapacity)
		case *dynamodb.UpdateItemOutput:
			m.add(r.ConsumedCapacity)
		case *dynamodb.DeleteItemOutput:
			m.add(r.ConsumedCapacity)
		case *dynamodb.TransactWriteItemsOutput:
			for i := range r.ConsumedCapacity {
				m.add(&r.ConsumedCapacity[i])
			}
		case *dynamodb.BatchWriteItemOutput:
			for i := range r.ConsumedCapacity {
				m.add(&r.ConsumedCapacity[i])
			}
		}
		return out, md, err
	}), middleware.After)
}

func (m *writeMeter) add(c *dbtypes.ConsumedCapacity) {
	if c == nil {
		return
	}
	u := splitUnits(c)
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.tables[aws.ToString(c.TableName)]
	if t == nil {
		t = &units{}
		m.tables[aws.ToString(c.TableName)] = t
	}
	t.table += u.table
	t.index += u.index
}

// splitUnits reads a consumed capacity as table and index units, as asynctools.Meter does.
func splitUnits(c *dbtypes.ConsumedCapacity) units {
	var index float64
	for _, ix := range c.GlobalSecondaryIndexes {
		index += aws.ToFloat64(ix.CapacityUnits)
	}
	for _, ix := range c.LocalSecondaryIndexes {
		index += aws.ToFloat64(ix.CapacityUnits)
	}
	table := aws.ToFloat64(c.CapacityUnits) - index
	if c.Table != nil {
		table = aws.ToFloat64(c.Table.CapacityUnits)
	}
	return units{table: table, index: index}
}

func (m *writeMeter) snapshot() map[string]units {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]units{}
	for k, v := range m.tables {
		out[k] = *v
	}
	return out
}

// since returns the units counted after snapshot before.
func (m *writeMeter) since(before map[string]units) map[string]units {
	out := map[string]units{}
	for k, v := range m.snapshot() {
		b := before[k]
		if d := (units{v.table - b.table, v.index - b.index}); d != (units{}) {
			out[k] = d
		}
	}
	return out
}

// storeUnits is what the metered asynctools.Store run found, per call and per group.
type storeUnits struct {
	groups, calls      int
	register, settle   units // per call
	seal, claim, drain units // per group (drain: consume)
}

// meterStore drives asynctools.Store alone, with a meter, through what one group's life
// writes: each call registered (an external-dispatch row with its token hash) and settled,
// the group sealed, claimed and consumed.
func meterStore(ctx context.Context, db *dynamodb.Client, table string, groups, calls int) (storeUnits, error) {
	out := storeUnits{groups: groups, calls: calls}
	base := asynctools.NewStore(db, table, nil)
	step := func(dst *units, f func(s *asynctools.Store) error) error {
		m := &asynctools.Meter{}
		if err := f(base.WithMeter(m)); err != nil {
			return err
		}
		t, i := m.Writes()
		dst.table += t
		dst.index += i
		return nil
	}
	now := time.Now()
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	for g := range groups {
		id := asynctools.NewGroupID("bench-meter-"+hex.EncodeToString(nonce), g)
		group := asynctools.Group{ID: id, AccountID: "acc_bench", AgentID: "async", ConversationID: fmt.Sprintf("conv_meter_%d", g),
			Delivery: asynctools.Delivery{EventID: fmt.Sprintf("evt_meter_%d", g), GroupSeed: "seed"}, SealedBy: "parent"}
		for c := range calls {
			_, hash := asynctools.NewToken()
			row := asynctools.Result{
				ID: asynctools.ResultID(id, fmt.Sprintf("call_1_%d", c+1)), AccountID: group.AccountID, AgentID: group.AgentID,
				ConversationID: group.ConversationID, TurnID: group.Delivery.EventID, ToolCallID: fmt.Sprintf("call_1_%d", c+1),
				ToolName: "test_external_async", Mode: asynctools.ExternalDispatch, TokenHash: hash,
				Deadline: now.Add(time.Hour), ParentUntil: now.Add(15 * time.Minute), Delivery: group.Delivery, CreatedAt: now,
			}
			group.Expected = append(group.Expected, row.ID)
			if err := step(&out.register, func(s *asynctools.Store) error {
				_, created, err := s.Register(ctx, row)
				if err == nil && !created {
					err = fmt.Errorf("row %s existed", row.ID)
				}
				return err
			}); err != nil {
				return out, err
			}
		}
		if err := step(&out.seal, func(s *asynctools.Store) error {
			_, sealed, err := s.Seal(ctx, group, now, now.Add(asynctools.DefaultRecheck))
			if err == nil && !sealed {
				err = fmt.Errorf("group %s existed", id)
			}
			return err
		}); err != nil {
			return out, err
		}
		for c, rid := range group.Expected {
			if err := step(&out.settle, func(s *asynctools.Store) error {
				_, _, err := s.Settle(ctx, rid, asynctools.Outcome{Status: asynctools.Completed, Response: json.RawMessage(fmt.Sprintf(`{"echo":"JOB%d"}`, c))}, now)
				return err
			}); err != nil {
				return out, err
			}
		}
		if err := step(&out.claim, func(s *asynctools.Store) error {
			ok, err := s.Claim(ctx, id, now, now.Add(asynctools.DefaultResendAfter))
			if err == nil && !ok {
				err = fmt.Errorf("group %s was claimed already", id)
			}
			return err
		}); err != nil {
			return out, err
		}
		if err := step(&out.drain, func(s *asynctools.Store) error { return s.Consume(ctx, id, now) }); err != nil {
			return out, err
		}
	}
	per := func(u *units, n int) { u.table /= float64(n); u.index /= float64(n) }
	per(&out.register, groups*calls)
	per(&out.settle, groups*calls)
	per(&out.seal, groups)
	per(&out.claim, groups)
	per(&out.drain, groups)
	return out, nil
}

func printAsync(w io.Writer, c asyncConfig, r roundResult, idle *roundResult, tables map[string]string, s storeUnits) {
	fmt.Fprintf(w, "Workload: %d /async turns (after %d warm-up), each a dispatch group of %d test_external_async calls made in one model step "+
		"(scripted model); %d completions over HTTP with %d in flight; async-worker with %d SQS pollers of up to 10 messages.\n\n",
		r.groups, c.warmup, c.calls, r.completions, c.concurrency, c.pollers)
	rounds := []roundResult{r}
	head := fmt.Sprintf("| measure | %d groups, %d in flight |", r.groups, r.concurrency)
	if idle != nil {
		rounds = append(rounds, *idle)
		head += fmt.Sprintf(" %d groups, 1 at a time |", idle.groups)
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, "| --- |"+strings.Repeat(" ---: |", len(rounds)))
	line := func(name string, f func(r roundResult) string) {
		fmt.Fprintf(w, "| %s |", name)
		for _, r := range rounds {
			fmt.Fprintf(w, " %s |", f(r))
		}
		fmt.Fprintln(w)
	}
	p := func(vs []float64) string {
		v := slices.Sorted(slices.Values(vs))
		return fmt.Sprintf("%.1f / %.1f ms", percentile(v, 50), percentile(v, 99))
	}
	line("dispatch: /async turns until every one waits for its group", func(r roundResult) string {
		return fmt.Sprintf("%.2f s (%.0f turns/s)", r.dispatch.Seconds(), float64(r.groups)/r.dispatch.Seconds())
	})
	line("completion phase", func(r roundResult) string {
		return fmt.Sprintf("%d in %.2f s", r.completions, r.completion.Seconds())
	})
	line("**completion throughput**", func(r roundResult) string {
		return fmt.Sprintf("**%.0f completions/s**", float64(r.completions)/r.completion.Seconds())
	})
	line("completion request, p50 / p99", func(r roundResult) string { return p(r.completionMs) })
	line("**last completion's answer → continuation started**, p50 / p99", func(r roundResult) string { return "**" + p(r.toStartMs) + "**" })
	line("last completion's answer → continuation's model answer, p50 / p99", func(r roundResult) string { return p(r.toAnswerMs) })
	fmt.Fprintf(w, "\nDynamoDB write units the runner consumed in the %d-group round, as DynamoDB Local reports them on each write "+
		"(index units in parentheses; writes refused by their condition are not reported):\n\n", r.groups)
	fmt.Fprintln(w, "| table | dispatch, per group | completions + continuation, per group | whole life, per group | whole life, per call |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	names := map[string]bool{}
	for k := range r.dispatchUnits {
		names[k] = true
	}
	for k := range r.completionUnits {
		names[k] = true
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool { return label(tables, sorted[i]) < label(tables, sorted[j]) })
	var sumD, sumC units
	g, calls := float64(r.groups), float64(r.completions)
	cell := func(u units, n float64) string {
		if u.index == 0 {
			return fmt.Sprintf("%.2f", u.table/n)
		}
		return fmt.Sprintf("%.2f (%.2f)", u.table/n, u.index/n)
	}
	for _, k := range sorted {
		d, cu := r.dispatchUnits[k], r.completionUnits[k]
		sumD = units{sumD.table + d.table, sumD.index + d.index}
		sumC = units{sumC.table + cu.table, sumC.index + cu.index}
		all := units{d.table + cu.table, d.index + cu.index}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", label(tables, k), cell(d, g), cell(cu, g), cell(all, g), cell(all, calls))
	}
	all := units{sumD.table + sumC.table, sumD.index + sumC.index}
	fmt.Fprintf(w, "| all tables | %s | %s | %s | %s |\n", cell(sumD, g), cell(sumC, g), cell(all, g), cell(all, calls))

	fmt.Fprintf(w, "\nasynctools.Store alone, metered with WithMeter on the same table (%d groups of %d calls):\n\n", s.groups, s.calls)
	fmt.Fprintln(w, "| writes | table WCU | index WCU |")
	fmt.Fprintln(w, "| --- | ---: | ---: |")
	row := func(name string, u units) { fmt.Fprintf(w, "| %s | %.2f | %.2f |\n", name, u.table, u.index) }
	row("per call: register", s.register)
	row("per call: settle", s.settle)
	row("per call: register + settle", units{s.register.table + s.settle.table, s.register.index + s.settle.index})
	row("per group: seal", s.seal)
	row("per group: claim", s.claim)
	row("per group: consume", s.drain)
	row("per group: seal + claim + consume", units{s.seal.table + s.claim.table + s.drain.table, s.seal.index + s.claim.index + s.drain.index})
	perGroup := float64(s.calls)*(s.register.table+s.settle.table) + s.seal.table + s.claim.table + s.drain.table
	perGroupIx := float64(s.calls)*(s.register.index+s.settle.index) + s.seal.index + s.claim.index + s.drain.index
	fmt.Fprintf(w, "| per group of %d calls, all of it | %.2f | %.2f |\n", s.calls, perGroup, perGroupIx)
}

// label names a table by its logical id in template.yaml.
func label(tables map[string]string, name string) string {
	if l, ok := tables[name]; ok {
		return l
	}
	return name
}
