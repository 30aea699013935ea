package localrunner_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// fakeTemplate has one SQS consumer, Consumer, of the queue Jobs, whose messages come back one
// second after a failure, and one scheduled function, Ticker.
const fakeTemplate = `
Resources:
  Jobs:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 1
  Consumer:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/consumer/
      Timeout: 1
      Events:
        Work:
          Type: SQS
          Properties:
            Queue: !GetAtt Jobs.Arn
            BatchSize: 10
            FunctionResponseTypes: [%s]
  Ticker:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/ticker/
      Events:
        Tick:
          Type: Schedule
          Properties: {Schedule: rate(1 hour)}
`

// consumer records the batches it is given and answers each with what fail decides.
type consumer struct {
	mu      sync.Mutex
	batches [][]events.SQSMessage
	fail    func(call int, batch []events.SQSMessage) (events.SQSEventResponse, error)
	ticks   int
}

func (c *consumer) handle(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, ev.Records)
	return c.fail(len(c.batches), ev.Records)
}

func (c *consumer) tick(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ticks++
	return nil
}

// seen returns how many times each body was delivered, and the receive counts it came with.
func (c *consumer) seen() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]string{}
	for _, b := range c.batches {
		for _, m := range b {
			out[m.Body] = append(out[m.Body], m.Attributes["ApproximateReceiveCount"])
		}
	}
	return out
}

// startFake provisions the fake template's queue and starts a runner whose Consumer and Ticker
// are c, returning the queue's URL.
func startFake(t *testing.T, c *consumer, responseTypes string) (*localrunner.Runner, string) {
	t.Helper()
	tpl, err := template.Parse([]byte(fmt.Sprintf(fakeTemplate, responseTypes)))
	if err != nil {
		t.Fatal(err)
	}
	client := testenv.SQS(t)
	prefix := fmt.Sprintf("poll%d-", time.Now().UnixNano())
	urls, err := template.ProvisionQueues(t.Context(), client, tpl, func(id string) string { return prefix + id })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(urls["Jobs"])})
	})
	r, err := localrunner.New(localrunner.Options{
		Template: tpl, SQS: client, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Name:          func(id string) string { return urls[id] },
		ScheduleEvery: 50 * time.Millisecond,
		Functions: map[string]localrunner.Constructor{
			"Consumer": func(agentdeps.Deps) (localrunner.Handlers, error) { return localrunner.Handlers{SQS: c.handle}, nil },
			"Ticker": func(agentdeps.Deps) (localrunner.Handlers, error) {
				return localrunner.Handlers{Schedule: c.tick}, nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, urls["Jobs"]
}

func send(t *testing.T, url string, bodies ...string) {
	t.Helper()
	in := &sqs.SendMessageBatchInput{QueueUrl: &url}
	for i, b := range bodies {
		in.Entries = append(in.Entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)})
	}
	out, err := testenv.SQS(t).SendMessageBatch(t.Context(), in)
	if err != nil || len(out.Failed) > 0 {
		t.Fatalf("sending %v: %v %+v", bodies, err, out)
	}
}

// waitEmpty waits until the queue holds no message, visible or in flight.
func waitEmpty(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := testenv.SQS(t).GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue still holds messages: %v", out.Attributes)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A message the handler reports in BatchItemFailures comes back after the visibility timeout
// with its receive count raised; the rest of its batch is deleted and never seen again.
func TestPollerRedeliversReportedFailures(t *testing.T) {
	c := &consumer{}
	failedOnce := false
	c.fail = func(_ int, batch []events.SQSMessage) (events.SQSEventResponse, error) {
		var res events.SQSEventResponse
		for _, m := range batch {
			if m.Body == "bad" && !failedOnce {
				failedOnce = true
				res.BatchItemFailures = append(res.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
			}
		}
		return res, nil
	}
	r, url := startFake(t, c, "ReportBatchItemFailures")
	send(t, url, "ok-1", "bad", "ok-2")
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	waitFor(t, "the failed message to come back", func() bool { return len(c.seen()["bad"]) == 2 })
	waitEmpty(t, url)
	// Long enough for a wrongly kept message to become visible again and be redelivered.
	time.Sleep(1500 * time.Millisecond)
	r.Stop()

	seen := c.seen()
	if got := seen["bad"]; len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Errorf("the reported message came with receive counts %v, want [1 2]", got)
	}
	for _, body := range []string{"ok-1", "ok-2"} {
		if got := seen[body]; len(got) != 1 {
			t.Errorf("%s was delivered %d times, want once (receive counts %v)", body, len(got), got)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.batches {
		for _, m := range b {
			if !strings.HasSuffix(m.EventSourceARN, ":"+url[strings.LastIndex(url, "/")+1:]) || m.EventSource != "aws:sqs" || m.ReceiptHandle == "" || m.MessageId == "" {
				t.Errorf("record %+v lacks the event source, its queue's ARN, a receipt handle or a message id", m)
			}
		}
	}
}

// A handler error fails its whole batch: every message of it comes back; none is deleted.
func TestPollerKeepsTheBatchOnError(t *testing.T) {
	c := &consumer{}
	c.fail = func(call int, _ []events.SQSMessage) (events.SQSEventResponse, error) {
		if call == 1 {
			return events.SQSEventResponse{}, errors.New("the first invocation fails")
		}
		return events.SQSEventResponse{}, nil
	}
	r, url := startFake(t, c, "ReportBatchItemFailures")
	send(t, url, "a", "b", "c")
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	waitFor(t, "a first batch", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.batches) > 0 })
	c.mu.Lock()
	var first []string
	for _, m := range c.batches[0] {
		first = append(first, m.Body)
	}
	c.mu.Unlock()
	waitFor(t, "the failed batch to come back", func() bool {
		seen := c.seen()
		for _, b := range first {
			if len(seen[b]) < 2 {
				return false
			}
		}
		return true
	})
	waitEmpty(t, url)
	r.Stop()
	seen := c.seen()
	for _, b := range first {
		if got := seen[b]; len(got) != 2 || got[1] != "2" {
			t.Errorf("%s of the failed batch came with receive counts %v, want [1 2]", b, got)
		}
	}
}

// Without ReportBatchItemFailures, Lambda ignores the failures a handler reports: a batch that
// returns without error is deleted whole.
func TestPollerIgnoresReportsWithoutTheResponseType(t *testing.T) {
	c := &consumer{}
	c.fail = func(_ int, batch []events.SQSMessage) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: batch[0].MessageId}}}, nil
	}
	r, url := startFake(t, c, "")
	send(t, url, "only")
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	waitFor(t, "the message", func() bool { return len(c.seen()["only"]) == 1 })
	waitEmpty(t, url)
	time.Sleep(1500 * time.Millisecond)
	r.Stop()
	if got := c.seen()["only"]; len(got) != 1 {
		t.Errorf("the message was delivered %d times, want once", len(got))
	}
}

// Schedules run every ScheduleEvery, and Stop ends the pollers and schedules promptly (the
// pollers are in a 20-second long poll on an empty queue) and for good.
func TestScheduleAndStop(t *testing.T) {
	c := &consumer{fail: func(int, []events.SQSMessage) (events.SQSEventResponse, error) { return events.SQSEventResponse{}, nil }}
	r, _ := startFake(t, c, "ReportBatchItemFailures")
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err == nil {
		t.Error("a second Start succeeded, want an error")
	}
	waitFor(t, "three scheduled runs", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.ticks >= 3 })
	begin := time.Now()
	r.Stop()
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("Stop took %s, want it prompt", d)
	}
	c.mu.Lock()
	ticks := c.ticks
	c.mu.Unlock()
	time.Sleep(200 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ticks != ticks {
		t.Errorf("the schedule ran %d more times after Stop", c.ticks-ticks)
	}
	r.Stop() // stopping again does nothing
}

func TestNewRefusesHandlersThatMissEvents(t *testing.T) {
	tpl, err := template.Parse([]byte(fmt.Sprintf(fakeTemplate, "")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = localrunner.New(localrunner.Options{
		Template: tpl, Name: func(id string) string { return id },
		Functions: map[string]localrunner.Constructor{
			"Consumer": func(agentdeps.Deps) (localrunner.Handlers, error) { return localrunner.Handlers{}, nil },
			"Ticker": func(agentdeps.Deps) (localrunner.Handlers, error) {
				return localrunner.Handlers{Schedule: func(context.Context) error { return nil }}, nil
			},
		},
	})
	if err == nil || !strings.Contains(err.Error(), "Consumer has SQS event Work but its handler takes no SQS batches") {
		t.Errorf("New(consumer without SQS handler) = %v, want an error naming it", err)
	}
}

// Functions get the config of the template's environment, with queues resolved to their URLs and
// buckets to their names, the runner's own URL for an empty AGENT_SERVICE_URL, Options.Getenv for
// what the template leaves empty, and the clients of the options.
func TestFunctionEnvironment(t *testing.T) {
	tpl, err := template.Parse([]byte(`
Parameters:
  AgentServiceUrl: {Type: String, Default: ""}
  NatsStream: {Type: String, Default: ""}
Resources:
  Jobs:
    Type: AWS::SQS::Queue
  Results:
    Type: AWS::S3::Bucket
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/fn/
      Environment:
        Variables:
          ASYNC_WORK_QUEUE_URL: !Ref Jobs
          ASYNC_RESULTS_BUCKET: !Ref Results
          AGENT_SERVICE_URL: !Ref AgentServiceUrl
          NATS_STREAM: !Ref NatsStream
          SECRETS_KMS_KEY_ID: some-key
      Events:
        Get: {Type: HttpApi, Properties: {Path: /x, Method: GET}}
`))
	if err != nil {
		t.Fatal(err)
	}
	clients := localrunner.Clients{SQS: testenv.SQS(t), S3: testenv.S3(t)}
	res, err := localrunner.Provision(t.Context(), clients, tpl, fmt.Sprintf("Env%d-", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	var deps agentdeps.Deps
	_, err = localrunner.New(localrunner.Options{
		Template: tpl, SQS: clients.SQS, S3: clients.S3, Name: res.Name, BaseURL: "http://127.0.0.1:1234",
		Getenv: func(k string) string {
			return map[string]string{"NATS_STREAM": "from-getenv", "OPENAI_API_KEY": "sk-x"}[k]
		},
		Functions: map[string]localrunner.Constructor{"Fn": func(d agentdeps.Deps) (localrunner.Handlers, error) {
			deps = d
			c := d.Config
			got = map[string]string{
				"ASYNC_WORK_QUEUE_URL": c.Async.WorkQueue, "ASYNC_RESULTS_BUCKET": c.Async.ResultsBucket,
				"AGENT_SERVICE_URL": c.Accounts.ServiceURL, "NATS_STREAM": c.NATS.Stream,
				"SECRETS_KMS_KEY_ID": c.Secrets.KMSKeyID, "OPENAI_API_KEY": c.Models.OpenAIKey,
			}
			return localrunner.Handlers{HTTP: http.NotFoundHandler()}, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	url := res.QueueURLs["Jobs"]
	if !strings.HasPrefix(url, "http") || !strings.HasSuffix(url, "/"+res.Prefix+"Jobs") {
		t.Errorf("the queue's URL is %q", url)
	}
	want := map[string]string{
		"ASYNC_WORK_QUEUE_URL": url,
		"ASYNC_RESULTS_BUCKET": strings.ToLower(res.Prefix + "Results"),
		"AGENT_SERVICE_URL":    "http://127.0.0.1:1234",
		"NATS_STREAM":          "from-getenv",
		"SECRETS_KMS_KEY_ID":   "", // KMS is not emulated: the runner's local key seals secrets
		"OPENAI_API_KEY":       "sk-x",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the function's environment (-want +got):\n%s", diff)
	}
	if deps.SQS != clients.SQS || deps.S3 != clients.S3 || deps.Sealer == nil || deps.Tools == nil || deps.Checks.Tool == nil || deps.Logger == nil {
		t.Errorf("the function's deps lack a client, the sealer, the tools, the checks or the logger: %+v", deps)
	}
	if _, err := clients.S3.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(want["ASYNC_RESULTS_BUCKET"])}); err != nil {
		t.Errorf("the bucket was not created: %v", err)
	}
}
