package localrunner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// asyncWait bounds every wait of the async tests: they poll with short sleeps until what they
// wait for is there, and fail after this long. They are correctness tests, not timing tests.
const asyncWait = 30 * time.Second

// pollEvery is the sleep between two looks while waiting.
const pollEvery = 25 * time.Millisecond

// asyncEnv is a runner of every function of template.yaml on a stack of its own, served over
// loopback HTTP with its pollers and sweeper running, its logs recorded, and one account.
type asyncEnv struct {
	stack     *testenv.Resources
	runner    *localrunner.Runner
	srv       *httptest.Server
	logs      *logRecorder
	store     *store.Store
	accountID string
	secret    string
}

func newAsyncEnv(t *testing.T) *asyncEnv {
	t.Helper()
	return newAsyncEnvOn(t, testenv.Stack(t), nil)
}

// newAsyncEnvOn is newAsyncEnv on stack, with the runner's options changed by tune (when set).
func newAsyncEnvOn(t *testing.T, stack *testenv.Resources, tune func(*localrunner.Options)) *asyncEnv {
	t.Helper()
	env := map[string]string{"ADMIN_SECRET": adminSecret}
	opts := stack.Options(func(k string) string { return env[k] })
	logs := &logRecorder{}
	opts.Logger = slog.New(&recordingHandler{rec: logs})
	if tune != nil {
		tune(&opts)
	}
	r, srv := testenv.Serve(t, opts)
	e := &asyncEnv{stack: stack, runner: r, srv: srv, logs: logs, store: store.New(stack.DB, stack.Tables)}
	e.accountID, e.secret = createAccount(t, srv, "async-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runner warnings and errors:\n%s", logs.dump(slog.LevelWarn))
		}
	})
	return e
}

// agent creates an agent from a config and returns its id.
func (e *asyncEnv) agent(t *testing.T, config string) string {
	t.Helper()
	res := call(t, e.srv, http.MethodPost, "/accounts/me/agents", e.secret, config)
	if res.status != http.StatusCreated {
		t.Fatalf("creating the agent = %d %s, want 201", res.status, res.body)
	}
	id, _ := res.json(t)["agentId"].(string)
	if id == "" {
		t.Fatalf("the answer carries no agentId: %s", res.body)
	}
	return id
}

// started is the 202 answer of POST /async.
type started struct {
	EventID        string `json:"eventId"`
	ConversationID string `json:"conversationId"`
	Status         string `json:"status"`
	StatusURL      string `json:"statusUrl"`
}

// async posts body to POST /async and requires 202 with the event to poll.
func (e *asyncEnv) async(t *testing.T, body string) started {
	t.Helper()
	res := call(t, e.srv, http.MethodPost, "/async", e.secret, body)
	if res.status != http.StatusAccepted {
		t.Fatalf("POST /async %s = %d %s, want 202", body, res.status, res.body)
	}
	var s started
	if err := json.Unmarshal(res.body, &s); err != nil {
		t.Fatalf("POST /async answered %s: %v", res.body, err)
	}
	if s.EventID == "" || s.ConversationID == "" || s.Status != store.EventProcessing || s.StatusURL != "/status/"+s.EventID {
		t.Fatalf("POST /async answered %s, want an eventId, a conversationId, status processing and its statusUrl", res.body)
	}
	return s
}

// status is the answer of GET /status/{eventId}.
type status struct {
	EventID           string            `json:"eventId"`
	ConversationID    string            `json:"conversationId"`
	Status            string            `json:"status"`
	Text              *string           `json:"text"`
	Messages          []model.Message   `json:"messages"`
	PendingAsyncTools []pendingAsync    `json:"pendingAsyncTools"`
	PendingApprovals  []pendingApproval `json:"pendingApprovals"`
	Error             string            `json:"error"`
	UpdatedAt         string            `json:"updatedAt"`
	Usage             model.Usage       `json:"usage"`
	Children          []store.Child     `json:"children"`
	raw               string
}

type pendingAsync struct {
	ResultID   string `json:"resultId"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
}

type pendingApproval struct {
	ApprovalID string `json:"approvalId"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
}

func (e *asyncEnv) status(t *testing.T, eventID string) status {
	t.Helper()
	res := call(t, e.srv, http.MethodGet, "/status/"+eventID, e.secret, "")
	if res.status != http.StatusOK {
		t.Fatalf("GET /status/%s = %d %s, want 200", eventID, res.status, res.body)
	}
	var s status
	if err := json.Unmarshal(res.body, &s); err != nil {
		t.Fatalf("GET /status/%s answered %s: %v", eventID, res.body, err)
	}
	s.raw = string(res.body)
	return s
}

// waitStatus polls the event until its status is want and returns it with the statuses seen
// on the way (each change once, in order). It fails at once on a status that can no longer
// become want: failed, or completed when something else is wanted.
func (e *asyncEnv) waitStatus(t *testing.T, eventID, want string) (status, []string) {
	t.Helper()
	var seen []string
	deadline := time.Now().Add(asyncWait)
	for {
		s := e.status(t, eventID)
		if len(seen) == 0 || seen[len(seen)-1] != s.Status {
			seen = append(seen, s.Status)
		}
		switch {
		case s.Status == want:
			return s, seen
		case s.Status == store.EventFailed, s.Status == store.EventCompleted:
			t.Fatalf("event %s ended %s (statuses seen %v), want %s: %s", eventID, s.Status, seen, want, s.raw)
		case time.Now().After(deadline):
			t.Fatalf("event %s is still %s after %s (statuses seen %v), want %s: %s", eventID, s.Status, asyncWait, seen, want, s.raw)
		}
		time.Sleep(pollEvery)
	}
}

// job is what test_external_async puts on the ExternalJobsQueue.
type job struct {
	ResultID      string `json:"resultId"`
	Echo          string `json:"echo"`
	CompletePath  string `json:"completePath"`
	CompletionURL string `json:"completionUrl"`
	Token         string `json:"token"`
}

// jobs takes n jobs off the ExternalJobsQueue (deleting them) and fails unless exactly n come
// within the wait.
func (e *asyncEnv) jobs(t *testing.T, n int) []job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), asyncWait)
	defer cancel()
	queue := e.stack.Queues["ExternalJobsQueue"]
	var out []job
	for len(out) < n {
		res, err := e.stack.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatalf("receiving jobs (%d of %d so far): %v", len(out), n, err)
		}
		for _, m := range res.Messages {
			var j job
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &j); err != nil || j.ResultID == "" || j.Token == "" {
				t.Fatalf("a message on the jobs queue is not a job: %s", aws.ToString(m.Body))
			}
			out = append(out, j)
			if _, err := e.stack.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queue, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("deleting a job: %v", err)
			}
		}
	}
	if len(out) != n {
		t.Fatalf("took %d jobs off the queue, want %d: %+v", len(out), n, out)
	}
	return out
}

// complete answers a job as an outside worker does: its echo upper-cased, at its completion
// URL, with its own token.
func (e *asyncEnv) complete(t *testing.T, j job) response {
	t.Helper()
	url := j.CompletionURL
	if url == "" {
		url = e.srv.URL + j.CompletePath
	}
	if !strings.HasPrefix(url, e.srv.URL+"/async-tools/") {
		t.Fatalf("job %s has completion URL %q, want one on the runner (%s)", j.ResultID, url, e.srv.URL)
	}
	body := fmt.Sprintf(`{"status":"completed","response":{"echo":%q}}`, strings.ToUpper(j.Echo))
	return call(t, e.srv, http.MethodPost, strings.TrimPrefix(url, e.srv.URL), j.Token, body)
}

// conversation reads every message of a conversation from the table.
func (e *asyncEnv) conversation(t *testing.T, conversationID string) []model.Message {
	t.Helper()
	msgs, err := e.store.Messages(context.Background(), e.accountID, conversationID, 1, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// sendWork puts bodies on the AsyncWorkQueue in one batch, as duplicated deliveries.
func (e *asyncEnv) sendWork(t *testing.T, bodies ...string) {
	t.Helper()
	queue := e.stack.Queues["AsyncWorkQueue"]
	entries := make([]sqstypes.SendMessageBatchRequestEntry, 0, len(bodies))
	for i, b := range bodies {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)})
	}
	out, err := e.stack.SQS.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &queue, Entries: entries})
	if err != nil {
		t.Fatalf("sending to the work queue: %v", err)
	}
	if len(out.Failed) > 0 {
		t.Fatalf("sending to the work queue: %d failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
	}
}

// drained waits until the queue holds no message, visible or in flight, so everything sent
// to it has been handled and deleted.
func (e *asyncEnv) drained(t *testing.T, logicalID string) {
	t.Helper()
	queue := e.stack.Queues[logicalID]
	deadline := time.Now().Add(asyncWait)
	for {
		out, err := e.stack.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl: &queue,
			AttributeNames: []sqstypes.QueueAttributeName{
				sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
			},
		})
		if err != nil {
			t.Fatalf("reading %s's attributes: %v", logicalID, err)
		}
		left := 0
		for _, v := range out.Attributes {
			n, _ := strconv.Atoi(v)
			left += n
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still holds messages after %s: %v", logicalID, asyncWait, out.Attributes)
		}
		time.Sleep(pollEvery)
	}
}

// groupOf is the dispatch group of a resultId.
func groupOf(t *testing.T, resultID string) string {
	t.Helper()
	g, _, ok := strings.Cut(resultID, ".")
	if !ok || !strings.HasPrefix(g, "ag_") {
		t.Fatalf("resultId %q does not name its group", resultID)
	}
	return g
}

// logRecord is one record the runner's functions logged, with its attributes (those of
// Logger.With included) as text.
type logRecord struct {
	at    time.Time
	level slog.Level
	msg   string
	attrs map[string]string
}

// logRecorder keeps every record the runner logs at INFO and above.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
}

// count returns how many records have message msg and every attribute of where.
func (r *logRecorder) count(msg string, where map[string]string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		if rec.msg != msg {
			continue
		}
		match := true
		for k, v := range where {
			match = match && rec.attrs[k] == v
		}
		if match {
			n++
		}
	}
	return n
}

func (r *logRecorder) dump(min slog.Level) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rec := range r.records {
		if rec.level < min {
			continue
		}
		fmt.Fprintf(&b, "%s %s %q %v\n", rec.at.Format("15:04:05.000"), rec.level, rec.msg, rec.attrs)
	}
	return b.String()
}

type recordingHandler struct {
	rec   *logRecorder
	attrs []slog.Attr
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{at: r.Time, level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.rec.mu.Lock()
	h.rec.records = append(h.rec.records, rec)
	h.rec.mu.Unlock()
	return nil
}

func (h *recordingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordingHandler{rec: h.rec, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }
