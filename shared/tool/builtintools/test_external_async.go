package builtintools

// test_external_async: an external-dispatch tool for trying async tools with an outside worker.
// Its execute does no work: it puts one job on the queue EXTERNAL_JOBS_QUEUE_URL and returns
// {"queued": true}. The queue comes from the harness environment only, never from an agent's
// config, so an account cannot aim the harness's queue access at another queue. The job carries the
// call's ticket (resultId, completePath, the per-call token) and, when a base is known
// (completionBaseUrl, else AGENT_SERVICE_URL), the full completionUrl; the worker answers with
// POST <completionUrl> {"status":"completed","response":…}, Authorization: Bearer <token>.
// It only runs as config.tools.test_external_async {"async": true, "execution":
// "external-dispatch"}: without a ticket there is nowhere for the worker's answer to go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
)

var (
	externalJobsQueue = Variable{Name: "EXTERNAL_JOBS_QUEUE_URL", Type: Text, Required: true, Deployment: true, Description: "URL of the SQS queue the outside worker takes jobs from"}
	agentServiceURL   = Variable{Name: "AGENT_SERVICE_URL", Option: "completionBaseUrl", Type: Text, Description: "base URL of the harness API, to give the worker a full completionUrl"}
)

var testExternalAsyncSpec = Spec{
	New: testExternalAsync,
	Options: json.RawMessage(`{"type":"object","properties":{
		"completionBaseUrl":{"type":"string","pattern":"^https?://"}
	},"additionalProperties":false}`),
	Variables:  []Variable{externalJobsQueue, agentServiceURL},
	Dispatches: true,
}

// externalJob is the body of the message an outside worker takes from the queue.
type externalJob struct {
	ResultID     string `json:"resultId"`
	Echo         string `json:"echo"`
	CompletePath string `json:"completePath"`
	// CompletionURL is the base URL + CompletePath; absent when no base is known, so the worker
	// prefixes the harness URL it knows.
	CompletionURL string `json:"completionUrl,omitempty"`
	Token         string `json:"token"`
}

func testExternalAsync(c Context) ([]tool.Tool, error) {
	queueURL := c.Vars[externalJobsQueue.Name]
	base := strings.TrimRight(c.Vars[agentServiceURL.Name], "/")
	send := c.Send
	return []tool.Tool{{
		Name:        "test_external_async",
		Description: "Hands a job to an outside worker, which answers later with the echo it was given, upper-cased. For testing tools whose work happens elsewhere.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"echo":{"type":"string","maxLength":1000,"description":"Text for the worker to echo."}
		},"required":["echo"],"additionalProperties":false}`),
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			var args struct {
				Echo string `json:"echo"`
			}
			if err := json.Unmarshal(input, &args); err != nil {
				return nil, err
			}
			t, ok := asynctools.TicketFrom(ctx)
			if !ok {
				return nil, errors.New("test_external_async must run with execution external-dispatch")
			}
			if send == nil {
				return nil, errors.New("no queue is wired to send the job to")
			}
			job := externalJob{ResultID: t.ResultID, Echo: args.Echo, CompletePath: t.CompletePath, Token: t.Token}
			if base != "" {
				job.CompletionURL = base + t.CompletePath
			}
			body, err := json.Marshal(job)
			if err != nil {
				return nil, err
			}
			if err := send(ctx, queueURL, string(body)); err != nil {
				return nil, fmt.Errorf("queueing the job: %w", err)
			}
			return map[string]bool{"queued": true}, nil
		},
	}}, nil
}
