package localrunner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/testenv"
)

// The chat API at /chat and its resume route, as the AI SDK's DefaultChatTransport calls them
// with api: '/chat': the resume stream replays the conversation's latest turn from its stream
// log, chunk for chunk as it was streamed (only the start chunk's message id differs).
func TestResumeReplaysTheLatestTurn(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "resumer")
	agentID := createAgent(t, srv, secret, `{"name":"clock","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"current_time","input":{}}]},{"text":"It is {{toolResults}}"}]},
		"tools":{"current_time":{}}}`)

	if res := call(t, srv, http.MethodGet, "/chat/conv-none/stream", secret, ""); res.status != http.StatusNoContent {
		t.Fatalf("resume of a conversation without turns = %d %s, want 204", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/chat/conv-1/stream", "", ""); res.status != http.StatusUnauthorized {
		t.Fatalf("resume without a secret = %d %s, want 401", res.status, res.body)
	}

	live := call(t, srv, http.MethodPost, "/chat", secret, `{"agentId":"`+agentID+`","id":"conv-1","message":"What time is it?"}`)
	if live.status != http.StatusOK {
		t.Fatalf("POST /chat = %d %s, want 200", live.status, live.body)
	}
	resumed := call(t, srv, http.MethodGet, "/chat/conv-1/stream", secret, "")
	if resumed.status != http.StatusOK {
		t.Fatalf("resume = %d %s, want 200", resumed.status, resumed.body)
	}
	want, got := testenv.Chunks(t, bytes.NewReader(live.body)), testenv.Chunks(t, bytes.NewReader(resumed.body))
	if len(want) < 6 || len(got) != len(want) {
		t.Fatalf("resume streamed %d chunks, the turn %d:\nlive:    %s\nresumed: %s", len(got), len(want), live.body, resumed.body)
	}
	for i := range want {
		if want[i]["type"] == "start" {
			continue // a new message id: the resumed stream rebuilds the message whole
		}
		w, _ := json.Marshal(want[i])
		g, _ := json.Marshal(got[i])
		if !bytes.Equal(w, g) {
			t.Errorf("chunk %d: resumed %s, streamed %s", i, g, w)
		}
	}

	// Another account cannot read it: the log is keyed by account.
	_, other := createAccount(t, srv, "someone-else")
	if res := call(t, srv, http.MethodGet, "/chat/conv-1/stream", other, ""); res.status != http.StatusNoContent {
		t.Fatalf("another account's resume = %d %s, want 204", res.status, res.body)
	}
}

// A page reload mid-turn, with the AI SDK's own chat client (infra/node/chat-resume.mjs): the
// first client drops the connection after the tool's output, the turn goes on without it, and a
// new client that resumes the conversation ends with the same assistant message, part for part,
// as a client that was never interrupted.
func TestPageReloadResumesTheTurnWithTheAISDKClient(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "reloader")
	agentID := createAgent(t, srv, secret, `{"name":"deployer","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"test_async","input":{"delayMs":0,"echo":"deployed"}}]},
		{"text":"The deploy said {{toolResults}}","delayMs":1500}]},
		"tools":{"test_async":{}}}`)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Node(t), filepath.Join(testenv.Root(t), "infra", "node", "chat-resume.mjs"), srv.URL, secret, agentID)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the AI SDK chat client failed: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	var got struct {
		Uninterrupted, Resumed []struct {
			Role  string
			Parts []map[string]any
		}
		DroppedAfter []string
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("client output: %v: %s", err, stdout.String())
	}
	if len(got.Uninterrupted) != 2 || len(got.Resumed) != 2 || got.Resumed[1].Role != "assistant" {
		t.Fatalf("messages: uninterrupted %+v, resumed %+v; want the user's and the assistant's", got.Uninterrupted, got.Resumed)
	}
	if !slices.Contains(got.DroppedAfter, "tool-output-available") || slices.Contains(got.DroppedAfter, "text-delta") {
		t.Fatalf("the first client saw %v before it dropped, want the tool output and no text yet", got.DroppedAfter)
	}
	want, _ := json.Marshal(got.Uninterrupted[1].Parts)
	resumed, _ := json.Marshal(got.Resumed[1].Parts)
	if !bytes.Equal(want, resumed) {
		t.Fatalf("the resumed assistant message differs from the uninterrupted one:\nresumed:       %s\nuninterrupted: %s", resumed, want)
	}
	if !strings.Contains(string(resumed), `The deploy said`) || !strings.Contains(string(resumed), `"state":"output-available"`) {
		t.Fatalf("the assistant message %s lacks the tool output or the answer", resumed)
	}
}

// sseFrame is one frame of a UI message stream with its SSE id ("" when it has none).
type sseFrame struct {
	id    string
	chunk map[string]any
}

func framesOf(t *testing.T, body []byte) []sseFrame {
	t.Helper()
	var out []sseFrame
	for _, block := range strings.Split(string(body), "\n\n") {
		var f sseFrame
		for _, line := range strings.Split(block, "\n") {
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				f.id = id
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
				if err := json.Unmarshal([]byte(data), &f.chunk); err != nil {
					t.Fatalf("a frame is not JSON: %s", data)
				}
			}
		}
		if f.chunk != nil {
			out = append(out, f)
		}
	}
	return out
}

// The turn's frames carry their place in the stream log as their SSE id, live and resumed
// alike; a client that names the last id it got (Last-Event-ID, or ?after=) gets only what
// came after it.
func TestResumeAfterAFrameID(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "resume-after")
	agentID := createAgent(t, srv, secret, `{"name":"clock","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"current_time","input":{}}]},{"text":"It is {{toolResults}}"}]},
		"tools":{"current_time":{}}}`)
	live := call(t, srv, http.MethodPost, "/chat", secret, `{"agentId":"`+agentID+`","id":"conv-ids","message":"What time is it?"}`)
	frames := framesOf(t, live.body)
	var ids []string
	for _, f := range frames {
		if f.id != "" {
			ids = append(ids, f.id)
		}
	}
	if len(ids) < 5 {
		t.Fatalf("the live stream's frames carry ids %v, want one on every event's frame: %s", ids, live.body)
	}
	cut := ids[len(ids)/2]
	after, _ := strconv.Atoi(cut)
	var want []sseFrame
	for i, f := range frames {
		n, err := strconv.Atoi(f.id)
		if err == nil && n > after || f.id == "" && i > 0 && f.chunk["type"] == "finish" {
			want = append(want, f)
		}
	}
	for name, get := range map[string]func() response{
		"?after": func() response { return call(t, srv, http.MethodGet, "/chat/conv-ids/stream?after="+cut, secret, "") },
		"Last-Event-ID": func() response {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/chat/conv-ids/stream", nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			req.Header.Set("Last-Event-ID", cut)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var b bytes.Buffer
			_, _ = b.ReadFrom(res.Body)
			return response{status: res.StatusCode, body: b.Bytes()}
		},
	} {
		res := get()
		got := framesOf(t, res.body)
		if res.status != http.StatusOK || len(got) != len(want)+1 || got[0].chunk["type"] != "start" {
			t.Fatalf("%s %s: %d frames %s, want a start and the %d after it", name, cut, len(got), res.body, len(want))
		}
		for i, w := range want {
			g := got[i+1]
			wb, _ := json.Marshal(w.chunk)
			gb, _ := json.Marshal(g.chunk)
			if g.id != w.id || !bytes.Equal(wb, gb) {
				t.Errorf("%s: frame %d is %s %s, want %s %s", name, i, g.id, gb, w.id, wb)
			}
		}
	}
	if res := call(t, srv, http.MethodGet, "/chat/conv-ids/stream?after=x", secret, ""); res.status != http.StatusBadRequest || res.json(t)["field"] != "after" {
		t.Fatalf("?after=x = %d %s, want 400 naming after", res.status, res.body)
	}
}

// An /async turn runs on async-worker; its status names the conversation, whose resume route
// streams the same turn live while it runs and ends with its finish. Until the worker takes the
// turn up the route answers 204, as for a conversation with no turn yet.
func TestAnAsyncTurnIsWatchedAtTheResumeRoute(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "watcher")
	agentID := createAgent(t, srv, secret, `{"name":"thinker","model":{"provider":"scripted","script":[
		{"text":"Thought it through","delayMs":1500}]}}`)

	accepted := call(t, srv, http.MethodPost, "/async", secret, `{"agentId":"`+agentID+`","message":"Think"}`)
	if accepted.status != http.StatusAccepted {
		t.Fatalf("POST /async = %d %s, want 202", accepted.status, accepted.body)
	}
	eventID, _ := accepted.json(t)["eventId"].(string)
	status := call(t, srv, http.MethodGet, "/status/"+eventID, secret, "").json(t)
	conv, _ := status["conversationId"].(string)
	if conv == "" || status["status"] != "processing" {
		t.Fatalf("status while the model thinks: %v, want processing with its conversation", status)
	}
	watched := call(t, srv, http.MethodGet, "/chat/"+conv+"/stream", secret, "")
	for deadline := time.Now().Add(10 * time.Second); watched.status == http.StatusNoContent && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		watched = call(t, srv, http.MethodGet, "/chat/"+conv+"/stream", secret, "")
	}
	if watched.status != http.StatusOK {
		t.Fatalf("resume of the /async turn = %d %s, want 200", watched.status, watched.body)
	}
	out, stderr, err := testenv.CheckUIStream(t, watched.body)
	if err != nil {
		t.Fatalf("the watched stream fails the AI SDK's checks: %v: %s\n%s", err, stderr, watched.body)
	}
	var checked struct {
		ChunkTypes []string `json:"chunkTypes"`
		Message    struct {
			Parts []map[string]any `json:"parts"`
		} `json:"message"`
	}
	if err := json.Unmarshal(out, &checked); err != nil {
		t.Fatal(err)
	}
	if text := partsText(checked.Message.Parts); text != "Thought it through" || !slices.Contains(checked.ChunkTypes, "finish") {
		t.Errorf("the watched stream built %q with chunks %v, want the answer and a finish", text, checked.ChunkTypes)
	}
	if final := call(t, srv, http.MethodGet, "/status/"+eventID, secret, "").json(t); final["status"] != "completed" {
		t.Errorf("status after the stream ended: %v, want completed", final)
	}
}
