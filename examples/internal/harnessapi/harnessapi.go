// Package harnessapi is the little HTTP client the runnable examples share: JSON calls with a
// bearer token, UI message streams read whole, and writing an example's agent under a fixed id.
package harnessapi

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
)

// Endpoint registers the flags by which every example reaches the harness: -url and -secret,
// HARNESS_URL and HARNESS_SECRET (from .dev.env) by default.
func Endpoint(url, secret *string) {
	flag.StringVar(url, "url", os.Getenv("HARNESS_URL"), "harness base URL (HARNESS_URL)")
	flag.StringVar(secret, "secret", os.Getenv("HARNESS_SECRET"), "account secret (HARNESS_SECRET)")
}

// Main runs an example's run with a context Ctrl-C cancels; a failure is printed after the
// example's name and exits 1.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Call sends a JSON request with a bearer token and returns the status and body; a 2xx body is
// decoded into out when out is not nil.
func Call(ctx context.Context, method, url, token string, in, out any) (int, []byte, error) {
	var reader io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		reader = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, reader)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(body, out); err != nil {
			return resp.StatusCode, body, fmt.Errorf("%s %s: decoding %s: %w", method, url, body, err)
		}
	}
	return resp.StatusCode, body, nil
}

// Stream sends a request whose answer is a UI message stream and returns its chunks; it fails
// unless the answer is 200 and the stream has a chunk.
func Stream(ctx context.Context, method, url, token string, in any) ([]map[string]any, error) {
	code, body, err := Call(ctx, method, url, token, in, nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s %s = %d %s, want 200", method, url, code, body)
	}
	var chunks []map[string]any
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return nil, fmt.Errorf("%s %s: a chunk is not JSON: %s", method, url, data)
		}
		chunks = append(chunks, c)
	}
	if len(chunks) == 0 {
		return nil, fmt.Errorf("%s %s: an empty stream", method, url)
	}
	return chunks, nil
}

// PutAgent creates the agent id from config (a JSON object), or replaces its config when it
// already exists.
func PutAgent(ctx context.Context, base, secret, id, config string) error {
	var fields map[string]any
	if err := json.Unmarshal([]byte(config), &fields); err != nil {
		return err
	}
	fields["agentId"] = id
	code, body, err := Call(ctx, http.MethodPost, base+"/accounts/me/agents", secret, fields, nil)
	if err == nil && code == http.StatusConflict {
		delete(fields, "agentId")
		code, body, err = Call(ctx, http.MethodPatch, base+"/accounts/me/agents/"+id, secret, fields, nil)
	}
	if err != nil {
		return err
	}
	if code != http.StatusCreated && code != http.StatusOK {
		return fmt.Errorf("writing agent %s = %d %s", id, code, body)
	}
	return nil
}
