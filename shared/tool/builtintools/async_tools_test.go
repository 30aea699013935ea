package builtintools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/google/go-cmp/cmp"
)

// sent is one message a fake Send received.
type sent struct {
	QueueURL string
	Body     string
}

// fakeSend records what the tool sends, and fails with err when it is set.
func fakeSend(got *[]sent, err error) func(context.Context, string, string) error {
	return func(_ context.Context, queueURL, body string) error {
		*got = append(*got, sent{queueURL, body})
		return err
	}
}

func envOf(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// ticket is the ticket the harness puts in the context of an external-dispatch call.
func ticket() asynctools.Ticket {
	id := asynctools.ResultID(asynctools.NewGroupID("turn-nonce", 1), "call_1_1")
	return asynctools.Ticket{ResultID: id, CompletePath: asynctools.CompletePath(id), Token: "act_secret"}
}

// prepare builds test_external_async from entry and env and prepares a call with input.
func prepare(t *testing.T, entry string, env tool.Env, input string) *tool.Call {
	t.Helper()
	set, err := builtintools.Build(config(t, `{"test_external_async":`+entry+`}`), env)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	call, err := set.Prepare("test_external_async", json.RawMessage(input))
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	return call
}

func TestTestExternalAsyncQueuesAJob(t *testing.T) {
	tk := ticket()
	tests := []struct {
		name    string
		entry   string
		env     map[string]string
		wantURL string
		want    map[string]any
	}{
		{
			name:    "variables from the environment, trailing slash trimmed",
			entry:   `{"async":true,"execution":"external-dispatch"}`,
			env:     map[string]string{"EXTERNAL_JOBS_QUEUE_URL": "http://sqs.local/000000000000/jobs", "AGENT_SERVICE_URL": "http://127.0.0.1:3000/"},
			wantURL: "http://sqs.local/000000000000/jobs",
			want: map[string]any{
				"resultId": tk.ResultID, "echo": "alpha", "completePath": tk.CompletePath,
				"completionUrl": "http://127.0.0.1:3000" + tk.CompletePath, "token": tk.Token,
			},
		},
		{
			name:    "the agent's completion base wins over the environment",
			entry:   `{"async":true,"execution":"external-dispatch","completionBaseUrl":"https://api.example.com/v1"}`,
			env:     map[string]string{"EXTERNAL_JOBS_QUEUE_URL": "http://sqs.local/000000000000/jobs", "AGENT_SERVICE_URL": "http://127.0.0.1:3000"},
			wantURL: "http://sqs.local/000000000000/jobs",
			want: map[string]any{
				"resultId": tk.ResultID, "echo": "alpha", "completePath": tk.CompletePath,
				"completionUrl": "https://api.example.com/v1" + tk.CompletePath, "token": tk.Token,
			},
		},
		{
			name:    "no completion base: completionUrl is left out",
			entry:   `{"async":true,"execution":"external-dispatch"}`,
			env:     map[string]string{"EXTERNAL_JOBS_QUEUE_URL": "http://sqs.local/000000000000/jobs"},
			wantURL: "http://sqs.local/000000000000/jobs",
			want:    map[string]any{"resultId": tk.ResultID, "echo": "alpha", "completePath": tk.CompletePath, "token": tk.Token},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []sent
			call := prepare(t, tt.entry, tool.Env{Getenv: envOf(tt.env), Send: fakeSend(&got, nil)}, `{"echo":"alpha"}`)
			out, err := call.Run(asynctools.WithTicket(context.Background(), tk))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if string(out) != `{"queued":true}` {
				t.Errorf("result = %s, want {\"queued\":true}", out)
			}
			if len(got) != 1 {
				t.Fatalf("Send got %d messages, want 1", len(got))
			}
			if got[0].QueueURL != tt.wantURL {
				t.Errorf("queue = %q, want %q", got[0].QueueURL, tt.wantURL)
			}
			var body map[string]any
			if err := json.Unmarshal([]byte(got[0].Body), &body); err != nil {
				t.Fatalf("body %s is not JSON: %v", got[0].Body, err)
			}
			if diff := cmp.Diff(tt.want, body); diff != "" {
				t.Errorf("job body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTestExternalAsyncFailures(t *testing.T) {
	env := envOf(map[string]string{"EXTERNAL_JOBS_QUEUE_URL": "http://sqs.local/000000000000/jobs"})
	entry := `{"async":true,"execution":"external-dispatch"}`
	withTicket := asynctools.WithTicket(context.Background(), ticket())

	t.Run("no ticket", func(t *testing.T) {
		var got []sent
		call := prepare(t, entry, tool.Env{Getenv: env, Send: fakeSend(&got, nil)}, `{"echo":"alpha"}`)
		_, err := call.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "test_external_async must run with execution external-dispatch") {
			t.Errorf("Run without a ticket = %v, want the external-dispatch error", err)
		}
		if len(got) != 0 {
			t.Errorf("Send got %v, want nothing sent", got)
		}
	})
	t.Run("no queue wired", func(t *testing.T) {
		call := prepare(t, entry, tool.Env{Getenv: env}, `{"echo":"alpha"}`)
		if _, err := call.Run(withTicket); err == nil || !strings.Contains(err.Error(), "no queue") {
			t.Errorf("Run with a nil Send = %v, want an error saying no queue is wired", err)
		}
	})
	t.Run("send fails", func(t *testing.T) {
		var got []sent
		boom := errors.New("queue does not exist")
		call := prepare(t, entry, tool.Env{Getenv: env, Send: fakeSend(&got, boom)}, `{"echo":"alpha"}`)
		if _, err := call.Run(withTicket); !errors.Is(err, boom) {
			t.Errorf("Run = %v, want the Send error", err)
		}
	})
	t.Run("input without echo", func(t *testing.T) {
		set, err := builtintools.Build(config(t, `{"test_external_async":`+entry+`}`), tool.Env{Getenv: env})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := set.Prepare("test_external_async", json.RawMessage(`{}`)); err == nil {
			t.Error("Prepare({}) succeeded, want the schema to require echo")
		}
	})
}

// Without a queue from the environment (the only place it may come from), the turn stops before its first model
// call, naming the variable and where to set it.
func TestTestExternalAsyncNeedsAQueue(t *testing.T) {
	_, err := builtintools.Build(config(t, `{"test_external_async":{"async":true,"execution":"external-dispatch"}}`), tool.Env{Getenv: envOf(map[string]string{"AGENT_SERVICE_URL": "http://127.0.0.1:3000"})})
	var me *builtintools.MissingVariableError
	if !errors.As(err, &me) {
		t.Fatalf("Build = %v, want *MissingVariableError", err)
	}
	if me.Tool != "test_external_async" || me.Variable.Name != "EXTERNAL_JOBS_QUEUE_URL" {
		t.Errorf("missing %s of %s, want EXTERNAL_JOBS_QUEUE_URL of test_external_async", me.Variable.Name, me.Tool)
	}
	if !strings.Contains(err.Error(), "set the harness environment variable EXTERNAL_JOBS_QUEUE_URL") {
		t.Errorf("error = %q, want it to say where to set the queue", err)
	}
}

// Only a tool whose execute dispatches may use execution "external-dispatch".
func TestCheckExternalDispatch(t *testing.T) {
	if _, err := builtintools.Check("test_external_async", json.RawMessage(`{"async":true,"execution":"external-dispatch"}`), agentconfig.Model{}); err != nil {
		t.Errorf("Check(test_external_async external-dispatch) = %v, want it accepted", err)
	}
	var fe *builtintools.FieldError
	_, err := builtintools.Check("test_async", json.RawMessage(`{"async":true,"execution":"external-dispatch"}`), agentconfig.Model{})
	if !errors.As(err, &fe) || fe.Field != "tools.test_async.execution" {
		t.Errorf("Check(test_async external-dispatch) = %v, want a field error at tools.test_async.execution", err)
	}
	for _, tt := range []struct{ raw, field string }{
		{`{"queueUrl":"sqs://jobs"}`, "tools.test_external_async.queueUrl"},
		{`{"completionBaseUrl":7}`, "tools.test_external_async.completionBaseUrl"},
		{`{"echo":"x"}`, "tools.test_external_async.echo"},
	} {
		if _, err := builtintools.Check("test_external_async", json.RawMessage(tt.raw), agentconfig.Model{}); !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("Check(%s) = %v, want a field error at %s", tt.raw, err, tt.field)
		}
	}
}
