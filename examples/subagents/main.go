// Command subagents runs a planner agent that fans a task out to two researcher children at
// once. Each call of the planner's researcher tool is non-blocking: the call returns at once, the
// child runs as a turn of its own on async-worker, in a conversation of its own, and the planner
// goes on once, with both answers, when the second child has finished.
//
// With `make dev` running, in a second shell from the repository root:
//
//	source .dev.env
//	go run ./examples/subagents          # over /async, polling GET /status/{eventId}
//	go run ./examples/subagents -sse     # over SSE, then the resume route
//
// It creates (or replaces) the agents subagents-researcher and subagents-planner, both scripted,
// runs the planner's turn and prints what each child was asked and answered (read from the
// child's own status), then the planner's final text. It exits non-zero when the turn fails or
// times out, or when it did not end with two children's answers.
//
// Flags override the environment: -url (HARNESS_URL), -secret (HARNESS_SECRET, the account
// secret), -timeout, -sse.
package main

import (
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
)

// config is what run needs; main fills it from flags over the environment.
type config struct {
	HarnessURL string
	Secret     string
	Timeout    time.Duration
	SSE        bool
}

const (
	researcherID = "subagents-researcher"
	plannerID    = "subagents-planner"
)

// researcherConfig answers any question with a short finding.
const researcherConfig = `{
  "name": "Researcher",
  "system": "Research one question and answer in one sentence.",
  "model": {"provider": "scripted", "script": [{"text": "Three recent sources agree on it."}]}
}`

// plannerConfig asks the researcher two questions in one step, without waiting. Its model is
// called again at once with the calls' placeholders, then once more with both answers.
const plannerConfig = `{
  "name": "Planner",
  "system": "Split the task into questions and give each to a researcher.",
  "model": {"provider": "scripted", "script": [
    {"text": "Asking two researchers. ", "toolCalls": [
      {"name": "researcher", "input": {"question": "How large is the market?"}},
      {"name": "researcher", "input": {"question": "Which technologies lead it?"}}
    ]},
    {"text": "Two researchers are on it."},
    {"text": "Both researchers answered: {{toolResults}}"}
  ]},
  "subagent": {"agents": [{"name": "researcher", "agentId": "` + researcherID + `", "blocking": false,
    "initUserMessageProperty": "question", "description": "Researches one question."}]}
}`

// answer is a subagent call's result.
type answer struct {
	Agent    string `json:"agent"`
	ThreadID string `json:"threadId"`
	EventID  string `json:"eventId"`
	Status   string `json:"status"`
	Text     string `json:"text"`
}

func main() {
	var cfg config
	harnessapi.Endpoint(&cfg.HarnessURL, &cfg.Secret)
	flag.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "how long to wait for the turn to end")
	flag.BoolVar(&cfg.SSE, "sse", false, "run the turn over SSE (POST /chat) and read its end at GET /chat/{id}/stream")
	flag.Parse()
	harnessapi.Main("subagents", func(ctx context.Context) error { return run(ctx, cfg, os.Stdout) })
}

func run(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.HarnessURL == "" || cfg.Secret == "" {
		return errors.New("set HARNESS_URL and HARNESS_SECRET (source .dev.env) or pass -url and -secret")
	}
	base := strings.TrimRight(cfg.HarnessURL, "/")
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	// The researcher first: a config may only name agents the account has.
	for _, a := range [][2]string{{researcherID, researcherConfig}, {plannerID, plannerConfig}} {
		if err := harnessapi.PutAgent(ctx, base, cfg.Secret, a[0], a[1]); err != nil {
			return err
		}
	}
	var answers []answer
	var final string
	var err error
	if cfg.SSE {
		answers, final, err = runSSE(ctx, base, cfg.Secret, stdout)
	} else {
		answers, final, err = runAsync(ctx, base, cfg.Secret, stdout)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %s waiting for the turn to end", cfg.Timeout)
	}
	if err != nil {
		return err
	}
	for _, a := range answers {
		asked, err := childQuestion(ctx, base, cfg.Secret, a.EventID)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "child %s in %s was asked %q and answered %q\n", a.Agent, a.ThreadID, asked, a.Text)
	}
	fmt.Fprintf(stdout, "final text: %s\n", final)
	if len(answers) != 2 {
		return fmt.Errorf("the planner ended with %d children's answers, want 2", len(answers))
	}
	return nil
}

// runAsync runs the planner's turn over /async and polls its status until it ends.
func runAsync(ctx context.Context, base, secret string, stdout io.Writer) ([]answer, string, error) {
	var started struct {
		EventID string `json:"eventId"`
	}
	code, body, err := harnessapi.Call(ctx, http.MethodPost, base+"/async", secret, map[string]string{"agentId": plannerID, "message": "Size up the market for agent harnesses."}, &started)
	if err != nil {
		return nil, "", err
	}
	if code != http.StatusAccepted {
		return nil, "", fmt.Errorf("POST /async = %d %s, want 202", code, body)
	}
	fmt.Fprintf(stdout, "planner turn %s started\n", started.EventID)
	last := ""
	for ctx.Err() == nil {
		var st struct {
			Status   string `json:"status"`
			Text     string `json:"text"`
			Error    string `json:"error"`
			Messages []struct {
				Kind  string `json:"kind"`
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"messages"`
		}
		code, body, err := harnessapi.Call(ctx, http.MethodGet, base+"/status/"+started.EventID, secret, nil, &st)
		if err != nil {
			return nil, "", err
		}
		if code != http.StatusOK {
			return nil, "", fmt.Errorf("GET /status/%s = %d %s", started.EventID, code, body)
		}
		if st.Status != last {
			last = st.Status
			fmt.Fprintln(stdout, "status:", st.Status)
		}
		switch st.Status {
		case "failed":
			return nil, "", fmt.Errorf("the planner's turn failed: %s", st.Error)
		case "completed":
			var answers []answer
			for _, m := range st.Messages {
				if m.Kind != "async-results" || len(m.Parts) == 0 {
					continue
				}
				var results struct {
					AsyncToolResults []struct {
						Response answer `json:"response"`
					} `json:"asyncToolResults"`
				}
				if err := json.Unmarshal([]byte(m.Parts[0].Text), &results); err != nil {
					return nil, "", fmt.Errorf("reading the async results: %w", err)
				}
				for _, r := range results.AsyncToolResults {
					answers = append(answers, r.Response)
				}
			}
			return answers, st.Text, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, "", ctx.Err()
}

// runSSE runs the planner's turn over SSE: its response ends while the children run, and the
// rest of the turn, their answers included, is read at the resume route.
func runSSE(ctx context.Context, base, secret string, stdout io.Writer) ([]answer, string, error) {
	conv := fmt.Sprintf("subagents-sse-%d", time.Now().UnixNano())
	chunks, err := harnessapi.Stream(ctx, http.MethodPost, base+"/chat", secret, map[string]string{"agentId": plannerID, "id": conv, "message": "Size up the market for agent harnesses."})
	if err != nil {
		return nil, "", err
	}
	fin := chunks[len(chunks)-1]
	fmt.Fprintf(stdout, "sse response ended: %s %s\n", fin["type"], fin["finishReason"])
	for ctx.Err() == nil {
		chunks, err = harnessapi.Stream(ctx, http.MethodGet, base+"/chat/"+conv+"/stream", secret, nil)
		if err != nil {
			return nil, "", err
		}
		if last := chunks[len(chunks)-1]; last["type"] != "finish" || last["finishReason"] != "stop" {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		fmt.Fprintln(stdout, "resumed turn ended: finish stop")
		var answers []answer
		texts, last := map[string]string{}, ""
		for _, c := range chunks {
			switch c["type"] {
			case "text-delta":
				id := fmt.Sprint(c["id"])
				texts[id] += fmt.Sprint(c["delta"])
				last = id
			case "data-async-result":
				// A non-blocking call's answer, once its child has finished.
				b, _ := json.Marshal(c["data"])
				var r struct {
					Response answer `json:"response"`
				}
				if json.Unmarshal(b, &r) == nil && r.Response.Status == "completed" {
					answers = append(answers, r.Response)
				}
			}
		}
		return answers, texts[last], nil
	}
	return nil, "", ctx.Err()
}

// childQuestion reads a child's turn at GET /status/{eventId} and returns the message it was given.
func childQuestion(ctx context.Context, base, secret, eventID string) (string, error) {
	var st struct {
		Messages []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"messages"`
	}
	code, body, err := harnessapi.Call(ctx, http.MethodGet, base+"/status/"+eventID, secret, nil, &st)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK || len(st.Messages) == 0 || st.Messages[0].Role != "user" || len(st.Messages[0].Parts) == 0 {
		return "", fmt.Errorf("GET /status/%s = %d %s, want the child's turn", eventID, code, body)
	}
	return st.Messages[0].Parts[0].Text, nil
}
