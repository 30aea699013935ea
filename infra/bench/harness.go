package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	harnessprocessing "github.com/agentharness/harness/functions/harness-processing/wire"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/lambda/logging"
	"github.com/agentharness/harness/shared/wire/awsclient"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// harnessTurn serves the harness-processing handler, wired as the function wires it, on a
// loopback server backed by DynamoDB Local and the mock at mockURL, and returns a turnRunner
// that posts one turn to it. Each turn starts a fresh conversation, so every turn does the same
// DynamoDB work however many ran before it; its storage clock times the DynamoDB requests. Without streamLog the function runs as if
// StreamsTable were not wired, to measure what keeping each turn's output costs. stop closes
// the server.
func harnessTurn(ctx context.Context, root, mockURL string, streamLog bool) (h harnessStackRun, stop func(), err error) {
	o := harnessOptions{agent: benchAgent(mockURL)}
	// The mock is the operator's own model server, as OPENAI_BASE_URL is in make dev: the agent's
	// baseURL names it, so its calls are not held to public addresses.
	o.getenv = func(k string) string {
		if k == "OPENAI_BASE_URL" {
			return mockURL + "/v1"
		}
		return ""
	}
	if !streamLog {
		o.handler = func(d agentdeps.Deps) (localrunner.Handlers, error) {
			d.Config.Streams.Table = ""
			h, err := harnessprocessing.Handler(d)
			return localrunner.Handlers{HTTP: h}, err
		}
	}
	s, err := startHarness(ctx, root, o)
	if err != nil {
		return h, nil, err
	}
	var n atomic.Int64
	h.storage = s.storage
	h.run = func(ctx context.Context) error {
		_, err := s.post(ctx, fmt.Sprintf("conv-%d", n.Add(1)), "What time is it?")
		return err
	}
	return h, s.srv.Close, nil
}

// harnessOptions vary the harness a row measures.
type harnessOptions struct {
	// agent is the config of the agent "bench" the turns run.
	agent map[string]any
	// getenv is the functions' environment beyond the template's; nil: empty.
	getenv func(string) string
	// handler builds harness-processing's handlers; nil: as the function builds them.
	handler localrunner.Constructor
	// apiOptions are added to the DynamoDB client the functions use.
	apiOptions []func(*middleware.Stack) error
}

// harnessServer is harness-processing behind the local runner on a loopback server, with the
// bench account's secret and the clock of its DynamoDB requests.
type harnessServer struct {
	srv     *httptest.Server
	secret  string
	storage *storageClock
}

// startHarness provisions a run's own tables, queues and bucket, seeds the bench agent and
// serves the runner. The functions' own logger runs at its default level; the lines are
// formatted, then dropped. Only HTTP turns are measured: the runner's pollers and schedules are
// not started. Close the server to stop it.
func startHarness(ctx context.Context, root string, o harnessOptions) (*harnessServer, error) {
	cfg, err := awsclient.Config(ctx)
	if err != nil {
		return nil, err
	}
	s := &harnessServer{storage: &storageClock{}}
	db := dynamodb.New(awsclient.DynamoDB(cfg).Options(), func(do *dynamodb.Options) {
		s.storage.next = do.HTTPClient
		do.HTTPClient = s.storage
		do.APIOptions = append(do.APIOptions, o.apiOptions...)
	})
	tpl, err := template.Load(filepath.Join(root, "template.yaml"))
	if err != nil {
		return nil, err
	}
	// A prefix of its own, so a run never meets another run's rows.
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	sqsc, s3c := awsclient.SQS(cfg), awsclient.S3(cfg)
	res, err := localrunner.Provision(ctx, localrunner.Clients{DB: db, SQS: sqsc, S3: s3c}, tpl, "bench-"+hex.EncodeToString(b)+"-")
	if err != nil {
		return nil, err
	}
	getenv := o.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	opts := localrunner.Options{
		Template: tpl, DB: db, SQS: sqsc, S3: s3c, Name: res.Name,
		Getenv: getenv, Logger: logging.New(io.Discard, ""),
	}
	if o.handler != nil {
		opts.Functions = map[string]localrunner.Constructor{"HarnessProcessingFunction": o.handler}
	}
	runner, err := localrunner.New(opts)
	if err != nil {
		return nil, err
	}
	if s.secret, err = seedAgent(ctx, runner, o.agent); err != nil {
		return nil, err
	}
	s.srv = httptest.NewServer(runner)
	return s, nil
}

// post runs one turn of the conversation id, reads its whole stream and checks it
// (checkTurn); it returns the turn's compactions.
func (s *harnessServer) post(ctx context.Context, id, message string) (compactions int, err error) {
	body, err := json.Marshal(map[string]string{"agentId": "bench", "id": id, "message": message})
	if err != nil {
		return 0, fmt.Errorf("encoding the turn: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL+"/", bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+s.secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		return 0, fmt.Errorf("posting the turn: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return 0, fmt.Errorf("the harness answered %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return checkTurn(resp.Body)
}

// harnessStackRun is a harness row's turn and the clock of its storage requests.
type harnessStackRun struct {
	run     turnRunner
	storage *storageClock
}

// storageClock is a DynamoDB client's HTTP client that counts the time at least one of its
// requests was in flight, the part of a turn's latency that is storage, and the round trips:
// the times a request went out while none was in flight (requests sent together count once).
type storageClock struct {
	next     dynamodb.HTTPClient
	mu       sync.Mutex
	inFlight int
	since    time.Time
	spent    time.Duration
	rounds   int
}

func (c *storageClock) Do(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.inFlight == 0 {
		c.since = time.Now()
		c.rounds++
	}
	c.inFlight++
	c.mu.Unlock()
	res, err := c.next.Do(req)
	c.mu.Lock()
	c.inFlight--
	if c.inFlight == 0 {
		c.spent += time.Since(c.since)
	}
	c.mu.Unlock()
	return res, err
}

// total is the time spent and the round trips made so far; zero for a nil clock.
func (c *storageClock) total() (time.Duration, int) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spent, c.rounds
}

// benchAgent calls current_time through the mock at mockURL.
func benchAgent(mockURL string) map[string]any {
	return map[string]any{
		"name":  "bench",
		"model": map[string]string{"provider": "openai", "model": "mock", "baseURL": mockURL + "/v1"},
		"tools": map[string]any{"current_time": map[string]bool{"enabled": true}},
	}
}

// seedAgent creates the bench account and its agent "bench" of config agent, and returns the
// account's secret.
func seedAgent(ctx context.Context, runner *localrunner.Runner, agent map[string]any) (string, error) {
	cfg, err := json.Marshal(agent)
	if err != nil {
		return "", fmt.Errorf("encoding the bench agent: %w", err)
	}
	seed := &localrunner.SeedFile{Username: "bench", Agents: []localrunner.SeedAgent{{AgentID: "bench", Config: cfg}}}
	_, secret, err := runner.Seed(ctx, seed, time.Now())
	if err != nil {
		return "", fmt.Errorf("seeding the bench agent: %w", err)
	}
	return secret, nil
}

// checkTurn reads a turn's SSE body to the end and fails unless the turn ran whole: the tool's
// output, a finish without an error, and the terminator. A broken turn is fast, and would
// otherwise flatter the numbers. It returns how many times the turn compacted its conversation
// (data-compaction chunks).
func checkTurn(body io.Reader) (compactions int, err error) {
	var sawOutput, sawFinish, sawDone bool
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			sawDone = true
			continue
		}
		var chunk struct {
			Type         string `json:"type"`
			FinishReason string `json:"finishReason"`
			ErrorText    string `json:"errorText"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return 0, fmt.Errorf("decoding chunk %q: %w", data, err)
		}
		switch chunk.Type {
		case "tool-output-available":
			sawOutput = true
		case "data-compaction":
			compactions++
		case "finish":
			if chunk.FinishReason == "error" {
				return 0, errors.New("the turn finished with an error")
			}
			sawFinish = true
		case "error", "tool-output-error", "tool-input-error":
			return 0, fmt.Errorf("the turn sent %s: %s", chunk.Type, chunk.ErrorText)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading the stream: %w", err)
	}
	switch {
	case !sawOutput:
		return 0, errors.New("the turn has no tool-output-available chunk")
	case !sawFinish:
		return 0, errors.New("the turn has no finish chunk")
	case !sawDone:
		return 0, errors.New("the stream has no data: [DONE] terminator")
	}
	return compactions, nil
}
