// Command tool-async streams a turn whose slow tool runs async in the same invocation: the
// model's first step starts test_async (a 1.5 s job), the stream stays open while it runs, and
// the next step reports what it returned.
//
// With `make dev` running, in a second shell from the repository root:
//
//	source .dev.env
//	go run ./examples/tool-async
//
// It creates (or replaces) the agent tool-async-example, a scripted model whose tool test_async
// has async: true, posts a message to POST / and prints each UI message stream chunk as it
// arrives, with the seconds since the request; SSE comment lines (the heartbeats sent while the
// job runs) print as dots. It exits non-zero when the stream carries an error chunk or ends
// without [DONE].
//
// Flags override the environment: -url (HARNESS_URL), -secret (HARNESS_SECRET, the account
// secret), -timeout.
package main

import (
	"bufio"
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
)

// config is what run needs; main fills it from flags over the environment.
type config struct {
	HarnessURL string
	Secret     string
	Timeout    time.Duration
}

const agentID = "tool-async-example"

// agentConfig is the scripted agent the example runs.
const agentConfig = `{
  "name": "Async tool example",
  "model": {"provider": "scripted", "script": [
    {"text": "Starting a slow job. ", "toolCalls": [{"name": "test_async", "input": {"echo": "hello", "delayMs": 1500}}]},
    {"text": "The job said {{toolResults}}"}
  ]},
  "tools": {"test_async": {"async": true}}
}`

func main() {
	var cfg config
	harnessapi.Endpoint(&cfg.HarnessURL, &cfg.Secret)
	flag.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "how long the whole turn may take")
	flag.Parse()
	harnessapi.Main("tool-async", func(ctx context.Context) error { return run(ctx, cfg, os.Stdout) })
}

func run(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.HarnessURL == "" || cfg.Secret == "" {
		return errors.New("set HARNESS_URL and HARNESS_SECRET (source .dev.env) or pass -url and -secret")
	}
	base := strings.TrimRight(cfg.HarnessURL, "/")
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := putAgent(ctx, base, cfg.Secret); err != nil {
		return err
	}

	resp, err := send(ctx, http.MethodPost, base+"/", cfg.Secret, map[string]string{"agentId": agentID, "message": "run the slow job"})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return fmt.Errorf("POST / = %d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	fmt.Fprintf(stdout, "conversation %s\n", resp.Header.Get("X-Conversation-Id"))

	start := time.Now()
	done, dots := false, false
	var streamErr string
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 4<<20)
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, ":") {
			fmt.Fprint(stdout, ".")
			dots = true
			continue
		}
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // blank separators, event: and id: fields
		}
		data = strings.TrimSpace(data)
		if dots {
			fmt.Fprintln(stdout)
			dots = false
		}
		fmt.Fprintf(stdout, "%5.1fs %s\n", time.Since(start).Seconds(), data)
		if data == "[DONE]" {
			done = true
			continue
		}
		var chunk struct {
			Type      string `json:"type"`
			ErrorText string `json:"errorText"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return fmt.Errorf("chunk %s is not JSON: %w", data, err)
		}
		if chunk.Type == "error" && streamErr == "" {
			streamErr = chunk.ErrorText
		}
	}
	if dots {
		fmt.Fprintln(stdout)
	}
	if err := lines.Err(); err != nil && !done {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("timed out after %s before the stream ended", cfg.Timeout)
		}
		return fmt.Errorf("reading the stream: %w", err)
	}
	switch {
	case streamErr != "":
		return fmt.Errorf("the stream carried an error chunk: %s", streamErr)
	case !done:
		return errors.New("the stream ended without [DONE]")
	}
	return nil
}

// putAgent creates the example agent, or replaces its config when it already exists.
func putAgent(ctx context.Context, base, secret string) error {
	var fields map[string]any
	if err := json.Unmarshal([]byte(agentConfig), &fields); err != nil {
		return err
	}
	fields["agentId"] = agentID
	code, body, err := call(ctx, http.MethodPost, base+"/accounts/me/agents", secret, fields)
	if err == nil && code == http.StatusConflict {
		delete(fields, "agentId")
		code, body, err = call(ctx, http.MethodPatch, base+"/accounts/me/agents/"+agentID, secret, fields)
	}
	if err != nil {
		return err
	}
	if code != http.StatusCreated && code != http.StatusOK {
		return fmt.Errorf("writing agent %s = %d %s", agentID, code, body)
	}
	return nil
}

// call sends a JSON request and returns the answer's status and body.
func call(ctx context.Context, method, url, secret string, in any) (int, []byte, error) {
	resp, err := send(ctx, method, url, secret, in)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, bytes.TrimSpace(body), err
}

// send sends a JSON request with a bearer secret; the caller closes the answer's body.
func send(ctx context.Context, method, url, secret string, in any) (*http.Response, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}
