// Command external-async is a mock outside worker for the test_external_async tool: it runs an
// /async turn whose tool calls are dispatched to a queue, does the jobs, completes them through
// the harness API, and waits for the turn to finish.
//
// With `make dev` running, in a second shell from the repository root:
//
//	source .dev.env
//	go run ./examples/external-async
//
// It creates (or replaces) the agent external-async-example, a scripted model that calls
// test_external_async twice in one step ("alpha" and "beta") with async: true and execution
// external-dispatch, then answers with the tool results; posts "run the external jobs" to
// POST /async; takes each job from EXTERNAL_JOBS_QUEUE_URL, answers it with the echo upper-cased
// at its completionUrl (else HARNESS_URL + completePath) with the job's own token, and deletes
// it; and polls GET /status/{eventId} until the turn is completed or failed, printing each
// change and the final text. It exits non-zero on a failed turn or a timeout.
//
// With -sse it runs the turn over SSE instead (POST /chat): the response ends waiting for the
// two calls; it does the jobs, then reads the rest of the turn at GET /chat/{id}/stream until
// the final answer.
//
// With -jobs N it is the worker alone: it starts no turn, completes the next N jobs that arrive
// (those of a chat channel's turn, say) and exits.
//
// Flags override the environment: -url (HARNESS_URL), -secret (HARNESS_SECRET, the account
// secret), -queue (EXTERNAL_JOBS_QUEUE_URL), -timeout, -sse, -jobs. The SQS client follows the usual AWS
// variables (AWS_ENDPOINT_URL_SQS, AWS_REGION, credentials), as .dev.env sets them.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentharness/harness/examples/internal/harnessapi"
	"github.com/agentharness/harness/shared/wire/awsclient"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// config is what run needs; main fills it from flags over the environment.
type config struct {
	HarnessURL string
	Secret     string
	QueueURL   string
	Timeout    time.Duration
	SSE        bool
	// Jobs, when set, makes it the worker alone: it completes that many jobs and exits.
	Jobs int
}

const agentID = "external-async-example"

// agentConfig is the scripted agent the example runs.
const agentConfig = `{
  "name": "External worker example",
  "model": {"provider": "scripted", "script": [
    {"text": "Handing two jobs to the worker. ", "toolCalls": [
      {"name": "test_external_async", "input": {"echo": "alpha"}},
      {"name": "test_external_async", "input": {"echo": "beta"}}
    ]},
    {"text": "The worker answered {{toolResults}}"}
  ]},
  "tools": {"test_external_async": {"async": true, "execution": "external-dispatch"}}
}`

// job is the message test_external_async puts on the queue.
type job struct {
	ResultID      string `json:"resultId"`
	Echo          string `json:"echo"`
	CompletePath  string `json:"completePath"`
	CompletionURL string `json:"completionUrl"`
	Token         string `json:"token"`
}

// status is the answer of GET /status/{eventId}.
type status struct {
	Status            string `json:"status"`
	PendingAsyncTools []struct {
		ResultID string `json:"resultId"`
		ToolName string `json:"toolName"`
	} `json:"pendingAsyncTools"`
	Text  string `json:"text"`
	Error string `json:"error"`
}

func main() {
	var cfg config
	harnessapi.Endpoint(&cfg.HarnessURL, &cfg.Secret)
	flag.StringVar(&cfg.QueueURL, "queue", os.Getenv("EXTERNAL_JOBS_QUEUE_URL"), "queue the jobs arrive on (EXTERNAL_JOBS_QUEUE_URL)")
	flag.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "how long to wait for the turn to end")
	flag.BoolVar(&cfg.SSE, "sse", false, "run the turn over SSE (POST /chat) and resume it at GET /chat/{id}/stream")
	flag.IntVar(&cfg.Jobs, "jobs", 0, "start no turn: complete this many jobs as they arrive, then exit")
	flag.Parse()
	harnessapi.Main("external-async", func(ctx context.Context) error { return run(ctx, cfg, os.Stdout) })
}

func run(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.Jobs > 0 {
		return workOnly(ctx, cfg, stdout)
	}
	if cfg.HarnessURL == "" || cfg.Secret == "" || cfg.QueueURL == "" {
		return errors.New("set HARNESS_URL, HARNESS_SECRET and EXTERNAL_JOBS_QUEUE_URL (source .dev.env) or pass -url, -secret and -queue")
	}
	base := strings.TrimRight(cfg.HarnessURL, "/")
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	awsCfg, err := awsclient.Config(ctx)
	if err != nil {
		return err
	}
	queue := awsclient.SQS(awsCfg)

	if err := harnessapi.PutAgent(ctx, base, cfg.Secret, agentID, agentConfig); err != nil {
		return err
	}
	if cfg.SSE {
		return runSSE(ctx, cfg, base, queue, stdout)
	}
	var started struct {
		EventID        string `json:"eventId"`
		ConversationID string `json:"conversationId"`
	}
	code, body, err := harnessapi.Call(ctx, http.MethodPost, base+"/async", cfg.Secret, map[string]string{"agentId": agentID, "message": "run the external jobs"}, &started)
	if err != nil {
		return err
	}
	if code != http.StatusAccepted || started.EventID == "" {
		return fmt.Errorf("POST /async = %d %s, want 202 with an eventId", code, body)
	}
	fmt.Fprintf(stdout, "turn %s started (conversation %s)\n", started.EventID, started.ConversationID)

	completed, last := 0, ""
	for {
		n, err := work(ctx, queue, cfg.QueueURL, base, stdout)
		completed += n
		var st status
		if err == nil {
			code, body, err = harnessapi.Call(ctx, http.MethodGet, base+"/status/"+started.EventID, cfg.Secret, nil, &st)
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("timed out after %s waiting for the turn to end (last status: %q)", cfg.Timeout, last)
		}
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET /status/%s = %d %s", started.EventID, code, body)
		}
		line := st.Status
		for _, p := range st.PendingAsyncTools {
			line += fmt.Sprintf(" [%s %s]", p.ToolName, p.ResultID)
		}
		if line != last {
			last = line
			fmt.Fprintln(stdout, "status:", line)
		}
		switch st.Status {
		case "completed":
			fmt.Fprintf(stdout, "final text: %s\n", st.Text)
			if completed == 0 {
				return errors.New("the turn completed but the worker completed no job: was test_external_async dispatched?")
			}
			return nil
		case "failed":
			return fmt.Errorf("the turn failed: %s", st.Error)
		}
	}
}

// workOnly completes cfg.Jobs jobs as they arrive, whoever's turn dispatched them.
func workOnly(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.HarnessURL == "" || cfg.QueueURL == "" {
		return errors.New("set HARNESS_URL and EXTERNAL_JOBS_QUEUE_URL (source .dev.env) or pass -url and -queue")
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	awsCfg, err := awsclient.Config(ctx)
	if err != nil {
		return err
	}
	queue := awsclient.SQS(awsCfg)
	for done := 0; done < cfg.Jobs; {
		n, err := work(ctx, queue, cfg.QueueURL, strings.TrimRight(cfg.HarnessURL, "/"), stdout)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("timed out after %s with %d of %d jobs completed", cfg.Timeout, done, cfg.Jobs)
		}
		if err != nil {
			return err
		}
		done += n
	}
	return nil
}

// work takes the jobs waiting on the queue (waiting a second for some), completes each and
// deletes it. A job whose completion got no answer or a 5xx stays on the queue for a retry.
func work(ctx context.Context, queue *sqs.Client, queueURL, base string, stdout io.Writer) (int, error) {
	out, err := queue.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		return 0, fmt.Errorf("receiving jobs: %w", err)
	}
	done := 0
	for _, m := range out.Messages {
		var j job
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &j); err != nil || j.Token == "" || (j.CompletePath == "" && j.CompletionURL == "") {
			fmt.Fprintf(stdout, "dropping a message that is not a job: %s\n", aws.ToString(m.Body))
		} else {
			url := j.CompletionURL
			if url == "" {
				url = base + j.CompletePath
			}
			answer := map[string]any{"status": "completed", "response": map[string]string{"echo": strings.ToUpper(j.Echo)}}
			code, body, err := harnessapi.Call(ctx, http.MethodPost, url, j.Token, answer, nil)
			if err != nil {
				return done, fmt.Errorf("completing %s: %w", j.ResultID, err)
			}
			fmt.Fprintf(stdout, "job %s (echo %q): completion answered %d %s\n", j.ResultID, j.Echo, code, bytes.TrimSpace(body))
			if code >= 500 {
				continue
			}
			if code < 300 {
				done++
			}
		}
		if _, err := queue.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			return done, fmt.Errorf("deleting a job: %w", err)
		}
	}
	return done, nil
}

// runSSE runs the turn over SSE: the response ends waiting for the dispatched calls, the worker
// does them, and the rest of the turn is read where a client resumes, until its final answer.
func runSSE(ctx context.Context, cfg config, base string, queue *sqs.Client, stdout io.Writer) error {
	conv := fmt.Sprintf("external-sse-%d", time.Now().UnixNano())
	chunks, err := harnessapi.Stream(ctx, http.MethodPost, base+"/chat", cfg.Secret, map[string]string{"agentId": agentID, "id": conv, "message": "run the external jobs"})
	if err != nil {
		return err
	}
	fin := chunks[len(chunks)-1]
	fmt.Fprintf(stdout, "sse response ended: %s %s\n", fin["type"], fin["finishReason"])
	completed := 0
	for {
		n, err := work(ctx, queue, cfg.QueueURL, base, stdout)
		completed += n
		if err == nil {
			chunks, err = harnessapi.Stream(ctx, http.MethodGet, base+"/chat/"+conv+"/stream", cfg.Secret, nil)
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("timed out after %s waiting for the turn to end", cfg.Timeout)
		}
		if err != nil {
			return err
		}
		last := chunks[len(chunks)-1]
		if last["type"] == "finish" && last["finishReason"] == "stop" {
			var text strings.Builder
			for _, c := range chunks {
				if c["type"] == "text-delta" {
					text.WriteString(fmt.Sprint(c["delta"]))
				}
			}
			fmt.Fprintf(stdout, "resumed turn ended: finish stop\nfinal text: %s\n", text.String())
			if completed == 0 {
				return errors.New("the turn completed but the worker completed no job: was test_external_async dispatched?")
			}
			return nil
		}
	}
}
