package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentharness/harness/functions/turnwire"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/toolresults"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/mcptools"
	"github.com/agentharness/harness/shared/turn"
)

// bigSystem is the system prompt of the agents whose tools return large results.
const bigSystem = "You read large results."

// newBigEnv runs turns (testenv.Turns) of agents that have the tool "dump" (returning
// testenv.BigText of the size asked for) whatever their config names, may call MCP servers on
// loopback, and keep the whole of a cut result in the stack's results bucket. The engine logs to
// the test.
func newBigEnv(t *testing.T) *testenv.Turns {
	t.Helper()
	dump := tool.Tool{Name: "dump", Description: "Returns a text of the given size.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"bytes":{"type":"integer"}},"required":["bytes"]}`),
		Execute: func(_ context.Context, input json.RawMessage) (any, error) {
			var args struct{ Bytes int }
			if err := json.Unmarshal(input, &args); err != nil {
				return nil, err
			}
			return testenv.BigText(args.Bytes), nil
		}}
	return testenv.NewTurns(t, func(e *testenv.Turns, o *turn.Options) {
		o.Tools = func(context.Context, map[string]json.RawMessage, tool.Vars) (*tool.Set, error) {
			return tool.NewSet(dump)
		}
		o.Toolsets = turnwire.Toolsets(o.Model, o.Tools, mcptools.New(mcptools.Options{HTTP: &http.Client{}}), nil, nil, nil)
		o.Results = toolresults.New(blobstore.NewS3(e.Stack.S3, e.Stack.Bucket))
		o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	})
}

// testWriter writes to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// truncationNote is the note a cut result ends with: the whole's size, what is shown, what was
// left out.
var truncationNote = regexp.MustCompile(`\n\n\[truncated: this result is (\d+) bytes; only its first (\d+) are shown and the other (\d+) were left out\. [^\]]*\]$`)

// cutText checks that out, a result the model got, is the text of whole (a JSON string's text,
// or any other JSON's text) cut with the note, within limit bytes, and returns what it shows.
func cutText(t *testing.T, out, whole json.RawMessage, limit int) string {
	t.Helper()
	if len(out) > limit {
		t.Errorf("the cut result takes %d bytes, more than %d", len(out), limit)
	}
	var got string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the cut result %.200s… is not a JSON string: %v", out, err)
	}
	want := string(whole)
	var s string
	if json.Unmarshal(whole, &s) == nil {
		want = s
	}
	m := truncationNote.FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("the cut result ends %q, without the note of what was left out", got[max(0, len(got)-300):])
	}
	shown := got[:len(got)-len(m[0])]
	total, _ := strconv.Atoi(m[1])
	first, _ := strconv.Atoi(m[2])
	left, _ := strconv.Atoi(m[3])
	if total != len(want) || first != len(shown) || left != total-first {
		t.Errorf("the note says %d bytes, %d shown, %d left out; want %d, %d, %d", total, first, left, len(want), len(shown), len(want)-len(shown))
	}
	if !strings.HasPrefix(want, shown) || len(shown) < limit/2 {
		t.Errorf("the cut result shows %d bytes, want the whole's first bytes, at least half of %d", len(shown), limit)
	}
	return shown
}

// keptResult checks the stored result p: its key is the account's and the conversation's, and
// the object there holds the whole result, which the cut one begins; it returns the whole.
func keptResult(t *testing.T, e *testenv.Turns, conv string, p model.Part, limit int) json.RawMessage {
	t.Helper()
	if prefix := "tool-results/" + e.Account + "/" + conv + "/"; !strings.HasPrefix(p.OutputKey, prefix) {
		t.Fatalf("the stored result of %s has key %q, want one under %s", p.ToolName, p.OutputKey, prefix)
	}
	whole, err := blobstore.NewS3(e.Stack.S3, e.Stack.Bucket).Get(e.Ctx, p.OutputKey)
	if err != nil {
		t.Fatalf("reading the kept result of %s: %v", p.ToolName, err)
	}
	if len(whole) != p.OutputBytes || !json.Valid(whole) {
		t.Errorf("the kept result of %s is %d bytes (valid JSON: %v), the stored result says %d", p.ToolName, len(whole), json.Valid(whole), p.OutputBytes)
	}
	cutText(t, p.Output, whole, limit)
	return whole
}

// A tool result far larger than a stored message holds, from an inline tool, an MCP server or a
// prompt tool, no longer fails the turn: the model gets it cut to agent.MaxResultBytes with a
// note of how much was left out, the conversation keeps that and the key of the whole, which is
// in the results bucket, and the client was shown the same cut result.
func TestLargeToolResultsAreCutAndKept(t *testing.T) {
	e := newBigEnv(t)
	mcpURL := testenv.BigMCPServer(t)
	const size = 1 << 20
	whole, _ := json.Marshal(testenv.BigText(size))
	caller := func(extra, tool string) string {
		return `{"name":"big","system":"` + bigSystem + `","model":{"provider":"scripted","script":[
			{"toolCalls":[{"name":"` + tool + `","input":{"bytes":` + strconv.Itoa(size) + `}}]},
			{"text":"Read it."}]}` + extra + `}`
	}
	for _, tt := range []struct {
		name, config, tool string
		// exact: the kept result is the whole text's JSON (a prompt's is the shape it returns).
		exact bool
	}{
		{name: "inline tool", config: caller("", "dump"), tool: "dump", exact: true},
		{name: "MCP tool", config: caller(`,"mcpServers":{"big":{"url":"`+mcpURL+`"}}`, "big__dump"), tool: "big__dump", exact: true},
		// The prompt's loop reads the same result, then answers with it; the shape returned
		// carries it twice.
		{name: "prompt tool", tool: "digest", config: caller(`,"prompts":{"digest":{"system":"You digest.","includeToolCalls":true,
			"inputSchema":{"type":"object","properties":{"bytes":{"type":"integer"}}},"tools":{"current_time":{"enabled":true}},
			"model":{"provider":"scripted","script":[{"toolCalls":[{"name":"dump","input":{"bytes":`+strconv.Itoa(size)+`}}]},{"text":"{{toolResults}}"}]}}}`, "digest")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			agentID := strings.ReplaceAll(tt.tool, "_", "-")
			e.Agent(agentID, tt.config)
			before := len(e.RequestsOf(bigSystem))
			conv := "conv-" + agentID
			o, events := e.Say(conv, agentID, "go")
			if o.Status != turn.StatusCompleted {
				t.Fatalf("the turn ended %s (%s), want completed", o.Status, o.Error)
			}
			// The client was told the cut result; the model's next request carries it.
			var told json.RawMessage
			for _, ev := range events {
				if ev.Kind == turn.Loop && ev.Loop.Type == agent.ToolOutput && ev.Loop.ToolName == tt.tool {
					told = ev.Loop.Output
				}
			}
			reqs := e.RequestsOf(bigSystem)[before:]
			if len(reqs) != 2 {
				t.Fatalf("the model was called %d times, want 2", len(reqs))
			}
			sent := testenv.ResultOf(t, reqs[1].Messages, tt.tool)
			stored := testenv.ResultOf(t, e.History(conv), tt.tool)
			if string(told) != string(sent.Output) || string(stored.Output) != string(sent.Output) {
				t.Errorf("the client was told %.100s…, the model sent %.100s…, the conversation keeps %.100s…: want the same cut result", told, sent.Output, stored.Output)
			}
			kept := keptResult(t, e, conv, stored, agent.MaxResultBytes)
			if tt.exact && string(kept) != string(whole) {
				t.Errorf("the kept result is %d bytes, want the tool's whole result of %d", len(kept), len(whole))
			}
			if tt.tool == "digest" {
				// The prompt's own loop got the same treatment: its nested result is cut and kept.
				for _, m := range e.History(conv) {
					for _, p := range m.Parts {
						if m.IsNested() && p.Type == model.PartToolResult && p.ToolName == "dump" {
							if got := keptResult(t, e, conv, p, agent.MaxResultBytes); string(got) != string(whole) {
								t.Errorf("the prompt's nested result kept %d bytes, want %d", len(got), len(whole))
							}
							return
						}
					}
				}
				t.Errorf("the conversation keeps no nested result of dump")
			}
		})
	}
}

// A step of many calls shares the stored message: each result is cut at its share of
// agent.StepResultBytes, so the step is saved and the model gets every result.
func TestManyLargeResultsShareTheirStep(t *testing.T) {
	e := newBigEnv(t)
	const calls, size = 10, 200 << 10
	var list []string
	for range calls {
		list = append(list, `{"name":"dump","input":{"bytes":`+strconv.Itoa(size)+`}}`)
	}
	e.Agent("many", `{"name":"many","system":"`+bigSystem+`","model":{"provider":"scripted","script":[
		{"toolCalls":[`+strings.Join(list, ",")+`]},{"text":"Read them."}]}}`)
	o, _ := e.Say("conv-many", "many", "go")
	if o.Status != turn.StatusCompleted {
		t.Fatalf("the turn ended %s (%s), want completed", o.Status, o.Error)
	}
	whole, _ := json.Marshal(testenv.BigText(size))
	for _, m := range e.History("conv-many") {
		if m.Role != model.RoleTool {
			continue
		}
		if len(m.Parts) != calls {
			t.Fatalf("the step's results are %d, want %d", len(m.Parts), calls)
		}
		if n := store.MessageBytes(m); n > store.MaxMessageBytes {
			t.Errorf("the results' message takes %d bytes, more than %d", n, store.MaxMessageBytes)
		}
		for i, p := range m.Parts {
			t.Run(fmt.Sprint("call ", i+1), func(t *testing.T) {
				if got := keptResult(t, e, "conv-many", p, agent.StepResultBytes/calls); string(got) != string(whole) {
					t.Errorf("the kept result is %d bytes, want %d", len(got), len(whole))
				}
			})
		}
		return
	}
	t.Fatal("the conversation keeps no tool results")
}
