// Command workspace runs an agent on a workspace, a versioned file tree of the account: the agent
// reads a file there, then runs a shell command in the sandbox that appends to it. In standard
// mode the command waits for the user's approval, which the example gives; what the command
// changed is committed back to the workspace as the tool call's commit.
//
// With `make dev` running, in a second shell from the repository root:
//
//	source .dev.env
//	go run ./examples/workspace
//
// It creates (or replaces) the workspace example-notes with a todo.md of two lines and the agent
// workspace-example, scripted, with a sandbox and that workspace in standard mode. It runs the
// agent's turn over /async, prints the bash call held for approval, approves it, polls GET
// /status/{eventId} until the turn ends and prints its final text; then it prints todo.md (three
// lines now) and the workspace's history, oldest first: the API's commit, then the tool call's.
// It exits non-zero when a request or the turn fails, the turn times out, or the file or the
// history is not what the turn should have left.
//
// Flags override the environment: -url (HARNESS_URL), -secret (HARNESS_SECRET, the account
// secret), -timeout.
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
)

// config is what run needs; main fills it from flags over the environment.
type config struct {
	HarnessURL string
	Secret     string
	Timeout    time.Duration
}

const (
	workspaceName = "example-notes"
	agentID       = "workspace-example"
	todo          = "- write the example\n- run it\n"
)

// agentConfig reads todo.md, appends a line to it with bash (held for approval: the workspace
// is in standard mode) and answers with what bash printed.
const agentConfig = `{
  "name": "Workspace example",
  "system": "Keep the to-do list in the workspace up to date.",
  "model": {"provider": "scripted", "script": [
    {"text": "Reading the list. ", "toolCalls": [{"name": "read", "input": {"path": "todo.md"}}]},
    {"text": "Adding an item. ", "toolCalls": [{"name": "bash", "input": {"command": "echo \"- ship it\" >> todo.md && wc -l todo.md"}}]},
    {"text": "Done: {{toolResults}}"}
  ]},
  "sandbox": {},
  "workspaces": [{"name": "` + workspaceName + `", "permissionMode": "standard"}]
}`

// status is what the example reads of GET /status/{eventId}.
type status struct {
	Status           string `json:"status"`
	Text             string `json:"text"`
	Error            string `json:"error"`
	PendingApprovals []struct {
		ApprovalID string `json:"approvalId"`
		ToolCallID string `json:"toolCallId"`
		ToolName   string `json:"toolName"`
	} `json:"pendingApprovals"`
}

// commit is one entry of the workspace's history.
type commit struct {
	Version int64 `json:"version"`
	Author  struct {
		Kind       string `json:"kind"`
		AgentID    string `json:"agentId"`
		ToolCallID string `json:"toolCallId"`
	} `json:"author"`
	Changes []struct {
		Path   string `json:"path"`
		Change string `json:"change"`
	} `json:"changes"`
}

func main() {
	var cfg config
	harnessapi.Endpoint(&cfg.HarnessURL, &cfg.Secret)
	flag.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "how long the whole run may take")
	flag.Parse()
	harnessapi.Main("workspace", func(ctx context.Context) error { return run(ctx, cfg, os.Stdout) })
}

func run(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.HarnessURL == "" || cfg.Secret == "" {
		return errors.New("set HARNESS_URL and HARNESS_SECRET (source .dev.env) or pass -url and -secret")
	}
	base := strings.TrimRight(cfg.HarnessURL, "/")
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	err := runTurn(ctx, base, cfg.Secret, stdout)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %s", cfg.Timeout)
	}
	return err
}

func runTurn(ctx context.Context, base, secret string, stdout io.Writer) error {
	// The workspace first: a config may only name workspaces the account has.
	if err := resetWorkspace(ctx, base, secret, stdout); err != nil {
		return err
	}
	if err := harnessapi.PutAgent(ctx, base, secret, agentID, agentConfig); err != nil {
		return err
	}

	var started struct {
		EventID        string `json:"eventId"`
		ConversationID string `json:"conversationId"`
	}
	code, body, err := harnessapi.Call(ctx, http.MethodPost, base+"/async", secret, map[string]string{"agentId": agentID, "message": "Add shipping to the list."}, &started)
	if err != nil {
		return err
	}
	if code != http.StatusAccepted {
		return fmt.Errorf("POST /async = %d %s, want 202", code, body)
	}
	fmt.Fprintf(stdout, "turn %s started in conversation %s\n", started.EventID, started.ConversationID)

	st, err := poll(ctx, base, secret, started.EventID, stdout)
	if err != nil {
		return err
	}
	if st.Status != "waiting_for_approval" || len(st.PendingApprovals) != 1 || st.PendingApprovals[0].ToolName != "bash" {
		return fmt.Errorf("the turn ended %s with %d pending approvals, want it waiting for bash's approval", st.Status, len(st.PendingApprovals))
	}
	held := st.PendingApprovals[0]
	input, err := heldInput(ctx, base, secret, started.ConversationID, held.ToolCallID)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "held for approval: %s %s %s\n", held.ToolCallID, held.ToolName, input)

	// Answered under the paused turn's own event, which goes on to report the turn's end.
	decision := map[string]any{
		"agentId": agentID, "id": started.ConversationID, "eventId": started.EventID,
		"approvals": []map[string]any{{"approvalId": held.ApprovalID, "approved": true}},
	}
	code, body, err = harnessapi.Call(ctx, http.MethodPost, base+"/async", secret, decision, nil)
	if err != nil {
		return err
	}
	if code != http.StatusAccepted {
		return fmt.Errorf("approving %s = %d %s, want 202", held.ApprovalID, code, body)
	}
	fmt.Fprintf(stdout, "approved %s\n", held.ApprovalID)
	if st, err = poll(ctx, base, secret, started.EventID, stdout); err != nil {
		return err
	}
	if st.Status != "completed" {
		return fmt.Errorf("the turn ended %s after the approval, want completed", st.Status)
	}
	fmt.Fprintf(stdout, "final text: %s\n", st.Text)

	return showWorkspace(ctx, base, secret, stdout)
}

// resetWorkspace creates the workspace, deleting one of the name first, and writes todo.md to it.
func resetWorkspace(ctx context.Context, base, secret string, stdout io.Writer) error {
	ws := base + "/accounts/me/workspaces"
	code, body, err := harnessapi.Call(ctx, http.MethodPost, ws, secret, map[string]string{"name": workspaceName}, nil)
	if err == nil && code == http.StatusConflict {
		if code, body, err = harnessapi.Call(ctx, http.MethodDelete, ws+"/"+workspaceName, secret, nil, nil); err == nil && code != http.StatusNoContent {
			return fmt.Errorf("DELETE workspace %s = %d %s, want 204", workspaceName, code, body)
		}
		if err == nil {
			code, body, err = harnessapi.Call(ctx, http.MethodPost, ws, secret, map[string]string{"name": workspaceName}, nil)
		}
	}
	if err != nil {
		return err
	}
	if code != http.StatusCreated {
		return fmt.Errorf("creating workspace %s = %d %s, want 201", workspaceName, code, body)
	}
	// A file's bytes are the raw body, not JSON.
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, ws+"/"+workspaceName+"/files/todo.md", strings.NewReader(todo))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("PUT todo.md = %d %s, want 201", resp.StatusCode, bytes.TrimSpace(answer))
	}
	fmt.Fprintf(stdout, "workspace %s: put todo.md %s\n", workspaceName, bytes.TrimSpace(answer))
	return nil
}

// poll reads the turn's status until it is neither processing nor waiting for async tools, and
// fails when it failed.
func poll(ctx context.Context, base, secret, eventID string, stdout io.Writer) (status, error) {
	last := ""
	for ctx.Err() == nil {
		var st status
		code, body, err := harnessapi.Call(ctx, http.MethodGet, base+"/status/"+eventID, secret, nil, &st)
		if err != nil {
			return st, err
		}
		if code != http.StatusOK {
			return st, fmt.Errorf("GET /status/%s = %d %s", eventID, code, body)
		}
		if st.Status != last {
			last = st.Status
			fmt.Fprintln(stdout, "status:", st.Status)
		}
		switch st.Status {
		case "failed", "cancelled":
			return st, fmt.Errorf("the turn %s: %s", st.Status, st.Error)
		case "completed", "waiting_for_approval":
			return st, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return status{}, ctx.Err()
}

// heldInput reads the held call's arguments back from the conversation: the status names the
// call, its part in the conversation's messages carries its input.
func heldInput(ctx context.Context, base, secret, conversationID, toolCallID string) (string, error) {
	var conv struct {
		Messages []struct {
			Parts []struct {
				ToolCallID string          `json:"toolCallId"`
				State      string          `json:"state"`
				Input      json.RawMessage `json:"input"`
			} `json:"parts"`
		} `json:"messages"`
	}
	code, body, err := harnessapi.Call(ctx, http.MethodGet, base+"/conversations/"+conversationID+"/messages", secret, nil, &conv)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET /conversations/%s/messages = %d %s", conversationID, code, body)
	}
	for _, m := range conv.Messages {
		for _, p := range m.Parts {
			if p.ToolCallID == toolCallID {
				// Printed as written: the answer's JSON escapes & and >, which a command is full of.
				var v any
				if err := json.Unmarshal(p.Input, &v); err != nil {
					return "", err
				}
				var b bytes.Buffer
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false)
				err := enc.Encode(v)
				return strings.TrimSpace(b.String()), err
			}
		}
	}
	return "", fmt.Errorf("the conversation has no call %s", toolCallID)
}

// showWorkspace prints todo.md and the workspace's history, oldest first, and fails unless the
// file has the appended line and the history the API's commit and then the tool call's.
func showWorkspace(ctx context.Context, base, secret string, stdout io.Writer) error {
	ws := base + "/accounts/me/workspaces/" + workspaceName
	code, file, err := harnessapi.Call(ctx, http.MethodGet, ws+"/files/todo.md", secret, nil, nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET todo.md = %d %s", code, file)
	}
	fmt.Fprintf(stdout, "todo.md:\n%s", file)

	var history struct {
		Commits []commit `json:"commits"`
	}
	code, body, err := harnessapi.Call(ctx, http.MethodGet, ws+"/history", secret, nil, &history)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET history = %d %s", code, body)
	}
	fmt.Fprintln(stdout, "history:")
	var authors []string
	for i := len(history.Commits) - 1; i >= 0; i-- {
		c := history.Commits[i]
		var changes []string
		for _, ch := range c.Changes {
			changes = append(changes, ch.Change+" "+ch.Path)
		}
		by := c.Author.Kind
		if c.Author.ToolCallID != "" {
			by += " " + c.Author.AgentID + " " + c.Author.ToolCallID
		}
		if len(changes) == 0 {
			changes = []string{"the empty tree"}
		}
		fmt.Fprintf(stdout, "  version %d by %s: %s\n", c.Version, by, strings.Join(changes, ", "))
		if c.Version > 0 {
			authors = append(authors, c.Author.Kind)
		}
	}

	if want := todo + "- ship it\n"; string(file) != want {
		return fmt.Errorf("todo.md is %q, want %q", file, want)
	}
	if strings.Join(authors, ",") != "api,tool" {
		return fmt.Errorf("the history's commits are by %v, want api, then tool", authors)
	}
	return nil
}
