package chathttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/scriptedmodel"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"
)

// logCapture collects a harness's logs as JSON lines. It is safe for the handler's goroutines
// to write while the test reads.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// logger is a JSON logger, at every level, that writes to c.
func (c *logCapture) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// records parses every line written so far; it fails the test on a line that is not JSON.
func (c *logCapture) records(t *testing.T) []map[string]any {
	t.Helper()
	c.mu.Lock()
	text := c.buf.String()
	c.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		out = append(out, r)
	}
	return out
}

// failingProvider fails as a provider adapter does: with a *model.ProviderError whose own text
// carries the provider's words.
type failingProvider struct{ status int }

func (m failingProvider) Stream(context.Context, *model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		yield(model.Event{}, &model.ProviderError{Provider: "anthropic", Status: m.status, RequestID: "req_1",
			Err: errors.New("prompt echo: the user's private text")})
	}
}

func TestProviderErrorsReachTheClientSafely(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{429, "the anthropic model is rate limited; try again shortly"},
		{529, "the anthropic model is unavailable (HTTP 529); try again shortly"},
		{401, "the anthropic model refused the harness's credentials"},
		{400, "the anthropic model rejected the request (HTTP 400)"},
		{0, "the anthropic model could not be reached"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			logs := &logCapture{}
			f := newFixtureWith(t, fixtureOptions{model: failingProvider{status: tt.status}, logger: logs.logger()})
			body, err := io.ReadAll(f.post(t, f.secret, `{"agentId":"demo","id":"c","message":"hi"}`).Body)
			if err != nil {
				t.Fatal(err)
			}
			cs := testenv.Chunks(t, bytes.NewReader(body))
			// The client sees neither the provider's words nor its request id...
			for _, private := range []string{"private text", "req_1"} {
				if bytes.Contains(body, []byte(private)) {
					t.Errorf("the SSE body shows the provider's %q: %s", private, body)
				}
			}
			// ...but the log keeps the provider's error in full, to find the call again.
			var logged []string
			for _, r := range logs.records(t) {
				if r["msg"] == "turn failed" && r["level"] == "ERROR" && r["conversationId"] == "c" {
					logged = append(logged, fmt.Sprint(r["err"]))
				}
			}
			if len(logged) != 1 || !strings.Contains(logged[0], "prompt echo: the user's private text") || !strings.Contains(logged[0], "[request req_1]") ||
				!strings.Contains(logged[0], "anthropic model call failed") {
				t.Errorf("logged turn failures = %q, want one holding the provider's error in full (its text and request id req_1)", logged)
			}
			if diff := cmp.Diff([]string{"start", "start-step", "error", "finish"}, types(cs)); diff != "" {
				t.Fatalf("chunk types (-want +got):\n%s", diff)
			}
			text := cs[2]["errorText"].(string)
			if !strings.HasPrefix(text, tt.want) || strings.Contains(text, "private text") {
				t.Errorf("errorText = %q, want it to start with %q and not to echo the provider's words", text, tt.want)
			}
			if got := cs[3]["finishReason"]; got != "error" {
				t.Errorf("finishReason = %v, want error", got)
			}
		})
	}
}

// The tokens a turn used are stored with it: on each assistant message and in the
// conversation's totals, matching the finish chunk's metadata.
func TestTurnUsageIsStored(t *testing.T) {
	f := newFixture(t, nil)
	var sent []model.Usage
	for _, msg := range []string{"what time is it?", "and now?"} {
		cs := chunks(t, f.post(t, f.secret, `{"agentId":"demo","id":"c","message":"`+msg+`"}`))
		meta := cs[len(cs)-1]["messageMetadata"].(map[string]any)["usage"].(map[string]any)
		sent = append(sent, model.Usage{InputTokens: int(meta["inputTokens"].(float64)), OutputTokens: int(meta["outputTokens"].(float64))})
		if sent[len(sent)-1].InputTokens == 0 {
			t.Fatalf("finish metadata usage = %v, want the scripted model's token counts", meta)
		}
	}
	total := sent[0].Add(sent[1])
	got, err := f.store.ConversationUsage(context.Background(), f.acc.ID, "c")
	if err != nil {
		t.Fatal(err)
	}
	if got.Turns != 2 || got.Usage != total {
		t.Errorf("stored totals = %+v, want 2 turns and %+v", got, total)
	}
	var perMessage model.Usage
	for _, m := range history(t, f, "c") {
		if m.Role == model.RoleAssistant {
			if m.Usage == nil {
				t.Fatalf("assistant message %s has no usage", m.ID)
			}
			perMessage = perMessage.Add(*m.Usage)
		}
	}
	if perMessage != total {
		t.Errorf("usage summed over the stored assistant messages = %+v, want %+v", perMessage, total)
	}
}

// Tool runs are logged as structured JSON: a start, then a finish with its duration or a
// failure with its duration and error, each naming the tool, the call, and the account, agent
// and conversation of the turn.
func TestToolRunsAreLogged(t *testing.T) {
	const toolTime = 30 * time.Millisecond
	m, err := scriptedmodel.New([]scriptedmodel.Step{
		{ToolCalls: []scriptedmodel.ToolCall{{Name: "works"}, {Name: "breaks"}}},
		{Text: "done"},
	})
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(
		tool.Tool{Name: "works", Execute: func(context.Context, json.RawMessage) (any, error) {
			time.Sleep(toolTime)
			return "fine", nil
		}},
		tool.Tool{Name: "breaks", Execute: func(context.Context, json.RawMessage) (any, error) {
			time.Sleep(toolTime)
			return nil, errors.New("disk on fire")
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logCapture{}
	f := newFixtureWith(t, fixtureOptions{model: m, logger: logs.logger(),
		tools: func(map[string]json.RawMessage) (*tool.Set, error) { return set, nil }})
	cs := chunks(t, f.post(t, f.secret, `{"agentId":"demo","id":"c-logs","message":"go"}`))

	// The call ids the client saw, by tool.
	ids := map[string]string{}
	outcome := map[string]string{}
	for _, c := range cs {
		switch c["type"] {
		case "tool-input-available":
			ids[c["toolName"].(string)] = c["toolCallId"].(string)
		case "tool-output-available", "tool-output-error":
			outcome[c["toolCallId"].(string)] = c["type"].(string)
		}
	}
	if outcome[ids["works"]] != "tool-output-available" || outcome[ids["breaks"]] != "tool-output-error" || ids["works"] == ids["breaks"] {
		t.Fatalf("tool calls %v ended %v, want works to succeed and breaks to fail", ids, outcome)
	}

	// find returns the one record with this message for this tool, checking the fields every
	// tool record carries.
	recs := logs.records(t)
	find := func(msg, toolName, level string) map[string]any {
		t.Helper()
		var found []map[string]any
		for _, r := range recs {
			if r["msg"] == msg && r["tool"] == toolName {
				found = append(found, r)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d %q records for tool %s, want 1; all records:\n%v", len(found), msg, toolName, recs)
		}
		r := found[0]
		want := map[string]any{"level": level, "toolCallId": ids[toolName], "accountId": f.acc.ID, "agentId": "demo", "conversationId": "c-logs"}
		for k, v := range want {
			if r[k] != v {
				t.Errorf("%q record of %s: %s = %v, want %v (record %v)", msg, toolName, k, r[k], v, r)
			}
		}
		if _, ok := r["time"].(string); !ok {
			t.Errorf("%q record of %s has no time: %v", msg, toolName, r)
		}
		return r
	}
	wantDuration := func(r map[string]any) {
		t.Helper()
		ms, ok := r["ms"].(float64)
		if !ok || ms < float64(toolTime.Milliseconds()) {
			t.Errorf("%q record of %s: ms = %v, want the run's duration, at least %d", r["msg"], r["tool"], r["ms"], toolTime.Milliseconds())
		}
	}
	find("tool started", "works", "INFO")
	find("tool started", "breaks", "INFO")
	finished := find("tool finished", "works", "INFO")
	wantDuration(finished)
	if n, _ := finished["outputBytes"].(float64); n <= 0 {
		t.Errorf("tool finished: outputBytes = %v, want the output's size", finished["outputBytes"])
	}
	failed := find("tool failed", "breaks", "WARN")
	wantDuration(failed)
	if e, _ := failed["err"].(string); !strings.Contains(e, "disk on fire") {
		t.Errorf("tool failed: err = %v, want the tool's error", failed["err"])
	}
	for _, r := range recs {
		if (r["msg"] == "tool finished" && r["tool"] == "breaks") || (r["msg"] == "tool failed" && r["tool"] == "works") {
			t.Errorf("record %v contradicts the tool's outcome", r)
		}
	}
}

// A tool whose required variable resolves neither from the agent's config nor from the
// environment stops the turn with a 400 naming it, before the model is called and before
// anything of the request is written.
func TestMissingToolVariableStopsTheTurnBeforeTheModel(t *testing.T) {
	f := newFixtureWith(t, fixtureOptions{tools: func(c map[string]json.RawMessage) (*tool.Set, error) {
		return builtintools.Build(c, tool.Env{Getenv: func(string) string { return "" }})
	}})
	f.agent(t, f.acc.ID, "keyless", `{"name":"keyless","model":{"provider":"scripted","script":[{"text":"hi"}]},"tools":{"current_time":{},"tavilySearch":{"maxResults":3}}}`)
	f.agent(t, f.acc.ID, "helper", helperConfig)
	ctx := context.Background()

	// rows returns the items of the turn tables that hold any of the strings.
	rows := func(t *testing.T, strs ...string) []string {
		t.Helper()
		var found []string
		for _, table := range []string{f.tables.Conversations, f.tables.Events, f.tables.Approvals} {
			out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: &table})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range out.Items {
				for _, s := range strs {
					if p := testenv.FindString(it, s); p != "" {
						found = append(found, table+": "+p+" holds "+s)
					}
				}
			}
		}
		return found
	}

	status, _, body := f.turn(t, f.secret, `{"agentId":"keyless","id":"conv-missing","eventId":"ev-missing","message":"search the news"}`)
	var got struct{ Error string }
	_ = json.Unmarshal(body, &got)
	if status != http.StatusBadRequest || !strings.Contains(got.Error, "TAVILY_API_KEY") || !strings.Contains(got.Error, "config.tools.tavilySearch.apiKey") {
		t.Errorf("turn = %d %s, want 400 with a JSON error naming TAVILY_API_KEY and config.tools.tavilySearch.apiKey", status, body)
	}
	f.mu.Lock()
	calls := len(f.prompts)
	f.mu.Unlock()
	if calls != 0 {
		t.Errorf("the model was called %d times, want never", calls)
	}
	if found := rows(t, "conv-missing", "ev-missing", "search the news"); len(found) != 0 {
		t.Errorf("the refused turn wrote rows:\n%s", strings.Join(found, "\n"))
	}

	// The same look at the tables finds what a turn that runs writes.
	f.mustTurn(t, f.secret, `{"agentId":"helper","id":"conv-ok","eventId":"ev-ok","message":"say hi"}`)
	for _, s := range []string{"conv-ok", "ev-ok", "say hi"} {
		if len(rows(t, s)) == 0 {
			t.Errorf("no row holds %q after a turn that ran", s)
		}
	}
}

// A turn's tools get the key the agent's config keeps sealed, also after updates that leave it
// out or send it back redacted.
func TestATurnRunsWithItsAgentsStoredSecret(t *testing.T) {
	const tavilyKey = "tvly-0b7d1c55-do-not-leak"
	f := newFixture(t, nil)
	f.agent(t, f.acc.ID, "searcher", `{"name":"searcher","model":{"provider":"scripted","script":[{"text":"hi"}]},"tools":{"tavilySearch":{"apiKey":"`+tavilyKey+`","maxResults":3}}}`)
	for _, patch := range []string{"", `{"system":"You search briefly."}`, `{"tools":{"tavilySearch":{"apiKey":"` + agentconfig.Redacted + `","maxResults":5}}}`} {
		if patch != "" {
			if _, err := f.agents.Update(context.Background(), f.acc.ID, "searcher", []byte(patch)); err != nil {
				t.Fatalf("update %s: %v", patch, err)
			}
		}
		f.mustTurn(t, f.secret, `{"agentId":"searcher","message":"hi"}`)
		if got := f.lastToolOption(t, "tavilySearch", "apiKey"); got != tavilyKey {
			t.Errorf("after update %q the turn ran tavilySearch with apiKey %q, want %q", patch, got, tavilyKey)
		}
	}
}
