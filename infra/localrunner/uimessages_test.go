package localrunner_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/google/go-cmp/cmp"
)

// toolUser's first step writes text and makes four calls: a sync tool, a prompt tool whose own
// loop calls a tool, a call whose arguments fail the schema, and a prompt tool whose model
// fails; its second step calls a tool again, its third answers.
const toolUser = `{"name":"worker","model":{"provider":"scripted","script":[
  {"text":"Let me look.","toolCalls":[
    {"name":"current_time","input":{}},
    {"name":"summarize","input":{"message":"the week"}},
    {"name":"test_async","input":{"delayMs":0}},
    {"name":"broken","input":{"message":"anything"}}]},
  {"toolCalls":[{"name":"current_time","input":{}}]},
  {"text":"Done: {{toolResults}}"}]},
 "tools":{"current_time":{},"test_async":{}},
 "prompts":{
   "summarize":{"system":"Summarise.","tools":{"current_time":{}},
     "model":{"provider":"scripted","script":[{"toolCalls":[{"name":"current_time","input":{}}]},{"text":"A quiet week."}]}},
   "broken":{"system":"Fail.","model":{"provider":"scripted","script":[{"error":"boom"}]}}}}`

// heldDeployer makes two calls in one step: one a person must approve, one its policy refuses.
const heldDeployer = `{"name":"approver","model":{"provider":"scripted","script":[
  {"toolCalls":[{"name":"test_async","input":{"delayMs":0,"echo":"deploy"}},{"name":"test_async","input":{"delayMs":60000,"echo":"slow"}}]},
  {"text":"Result: {{toolResults}}"}]},
 "tools":{"test_async":{"maxDelayMs":120000,"needsApproval":{"rules":[
   {"if":{"properties":{"delayMs":{"minimum":30000}}},"then":"denied","reason":"waits longer than 30 s are not allowed"},
   {"if":{"properties":{"echo":{"const":"deploy"}}},"then":"user-approval","reason":"deploys need a person"}]}}}}`

const greeter = `{"name":"chatty","model":{"provider":"scripted","script":[{"text":"Hello there, friend."}]}}`

// chatClient plays the AI SDK's chat client (useChat) over one conversation: it sends each user
// message as useChat does and builds each answer from the stream with the AI SDK's own stream
// reader (check-ui-stream), keeping the list of messages it would show.
type chatClient struct {
	e       *asyncEnv
	agentID string
	id      string
	list    []map[string]any
}

func (c *chatClient) post(t *testing.T, body map[string]any) []byte {
	t.Helper()
	b, _ := json.Marshal(body)
	res := call(t, c.e.srv, http.MethodPost, "/chat", c.e.secret, string(b))
	if res.status != http.StatusOK {
		t.Fatalf("POST /chat = %d %s", res.status, res.body)
	}
	return res.body
}

// read builds the assistant message a stream body gives, continuing from (nil: a new one).
func read(t *testing.T, from map[string]any, body []byte) map[string]any {
	t.Helper()
	var prev json.RawMessage
	if from != nil {
		prev, _ = json.Marshal(from)
	}
	out, stderr, err := testenv.CheckUIStreamFrom(t, prev, body)
	if err != nil {
		t.Fatalf("the AI SDK refused the stream: %v\n%s\n%s", err, stderr, body)
	}
	var checked struct{ Message map[string]any }
	if err := json.Unmarshal(out, &checked); err != nil {
		t.Fatal(err)
	}
	return checked.Message
}

// send sends a user message of parts, as sendMessage does: a fresh id, the whole list.
func (c *chatClient) send(t *testing.T, parts ...map[string]any) {
	t.Helper()
	user := map[string]any{"id": fmt.Sprintf("u-%s-%d", c.id, len(c.list)), "role": "user", "parts": parts}
	body := c.post(t, map[string]any{"id": c.id, "agentId": c.agentID, "trigger": "submit-message", "messages": append(c.list, user)})
	c.list = append(c.list, user, read(t, nil, body))
}

// answer decides the held call of approval id in the last message, as addToolApprovalResponse
// does, and sends it as the automatic send after approval responses does; the answer continues
// that message.
func (c *chatClient) answer(t *testing.T, id string, approved bool, reason string) {
	t.Helper()
	last := c.list[len(c.list)-1]
	for _, p := range last["parts"].([]any) {
		part := p.(map[string]any)
		if a, ok := part["approval"].(map[string]any); ok && a["id"] == id && part["state"] == "approval-requested" {
			part["state"] = "approval-responded"
			a["approved"], a["reason"] = approved, reason
		}
	}
	body := c.post(t, map[string]any{"id": c.id, "agentId": c.agentID, "trigger": "submit-message", "messageId": last["id"], "messages": c.list})
	c.list[len(c.list)-1] = read(t, last, body)
}

// checkReadBack checks that the conversation read back (GET /conversations/{id}/messages) is
// the client's list, and valid by the AI SDK.
func (c *chatClient) checkReadBack(t *testing.T) {
	t.Helper()
	res, got := getMessages(t, c.e, c.e.secret, c.id, "")
	if res.status != http.StatusOK {
		t.Fatalf("GET messages = %d %s", res.status, res.body)
	}
	if diff := cmp.Diff(asJSON(t, c.list), asJSON(t, got.Messages)); diff != "" {
		t.Errorf("the conversation read back differs from the chat client's list (-client +read):\n%s", diff)
	}
	validate(t, got.Messages)
}

// heldApproval is the id of the approval the last message asks the user for.
func (c *chatClient) heldApproval(t *testing.T) string {
	t.Helper()
	for _, p := range c.list[len(c.list)-1]["parts"].([]any) {
		part := p.(map[string]any)
		if a, ok := part["approval"].(map[string]any); ok && part["state"] == "approval-requested" {
			return a["id"].(string)
		}
	}
	t.Fatalf("the last message asks for no approval: %v", c.list[len(c.list)-1])
	return ""
}

// page is an answer of GET /conversations/{id}/messages.
type page struct {
	Messages   []map[string]any `json:"messages"`
	NextCursor *string          `json:"nextCursor"`
}

func getMessages(t *testing.T, e *asyncEnv, secret, conversation, query string) (response, page) {
	t.Helper()
	res := call(t, e.srv, http.MethodGet, "/conversations/"+conversation+"/messages"+query, secret, "")
	var p page
	if res.status == http.StatusOK {
		if err := json.Unmarshal(res.body, &p); err != nil {
			t.Fatalf("GET messages answered %s: %v", res.body, err)
		}
	}
	return res, p
}

// normalised is the answer with each file part's url, a signed address of the file's bytes,
// replaced by the data: URL the client sent: the one field the answer cannot give back as the
// client had it.
func normalised(t *testing.T, got, client []map[string]any) []map[string]any {
	t.Helper()
	var out, sent []map[string]any
	b, _ := json.Marshal(got)
	_ = json.Unmarshal(b, &out)
	b, _ = json.Marshal(client)
	_ = json.Unmarshal(b, &sent)
	for i, m := range out {
		parts, _ := m["parts"].([]any)
		for j, p := range parts {
			part := p.(map[string]any)
			if part["type"] != "file" {
				continue
			}
			u, _ := part["url"].(string)
			if parsed, err := url.Parse(u); err != nil || !strings.HasPrefix(parsed.Scheme, "http") {
				t.Errorf("message %d part %d: url %q is not an address of the file", i, j, u)
			}
			if i < len(sent) {
				if cp, ok := sent[i]["parts"].([]any); ok && j < len(cp) {
					part["url"] = cp[j].(map[string]any)["url"]
				}
			}
		}
	}
	return out
}

// validate checks messages with the AI SDK's validateUIMessages.
func validate(t *testing.T, messages []map[string]any) {
	t.Helper()
	b, _ := json.Marshal(messages)
	cmd := exec.Command(testenv.Node(t), filepath.Join(testenv.Root(t), "infra", "node", "validate-ui-messages.mjs"))
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("validateUIMessages refused the messages: %v\n%s\n%s", err, stderr.String(), b)
	}
	if got := strings.TrimSpace(string(out)); got != fmt.Sprint(len(messages)) {
		t.Errorf("validateUIMessages read %s messages, want %d", got, len(messages))
	}
}

// asJSON is v as plain JSON values, for comparing what the client built with what the route
// answers.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A conversation read back is the list the AI SDK's chat client built from its turns' streams:
// the same messages, ids, parts in order with their states and approvals, data parts and
// metadata, whatever the turns did (text alone, tools over several steps, a prompt tool's own
// loop, failed calls, a file, a call approved and one denied, each answer continuing its
// message, and calls a policy refused); only a file's url differs. The AI SDK's
// validateUIMessages takes it, and it reads back the same a page at a time.
func TestConversationMessagesAreTheChatClientsList(t *testing.T) {
	e := newAsyncEnv(t)
	data := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pixel)

	plain := &chatClient{e: e, agentID: e.agent(t, greeter), id: "uimsg-plain"}
	plain.send(t, map[string]any{"type": "text", "text": "hi"})
	plain.send(t, map[string]any{"type": "text", "text": "and again"})

	tools := &chatClient{e: e, agentID: e.agent(t, toolUser), id: "uimsg-tools"}
	// useChat puts the files before the text.
	tools.send(t, map[string]any{"type": "file", "mediaType": "image/png", "filename": "dot.png", "url": data}, map[string]any{"type": "text", "text": "what is this?"})
	tools.send(t, map[string]any{"type": "text", "text": "once more"})

	held := &chatClient{e: e, agentID: e.agent(t, heldDeployer), id: "uimsg-held"}
	held.send(t, map[string]any{"type": "text", "text": "deploy it"})
	held.answer(t, held.heldApproval(t), true, "looks fine")
	held.send(t, map[string]any{"type": "text", "text": "deploy again"})
	held.answer(t, held.heldApproval(t), false, "not now")
	held.send(t, map[string]any{"type": "text", "text": "and leave it waiting"})

	for _, c := range []*chatClient{plain, tools, held} {
		t.Run(c.id, func(t *testing.T) {
			res, got := getMessages(t, e, e.secret, c.id, "")
			if res.status != http.StatusOK {
				t.Fatalf("GET messages = %d %s", res.status, res.body)
			}
			if got.NextCursor != nil {
				t.Errorf("one page of %d messages has nextCursor %q", len(got.Messages), *got.NextCursor)
			}
			if diff := cmp.Diff(asJSON(t, c.list), asJSON(t, normalised(t, got.Messages, c.list))); diff != "" {
				t.Errorf("the conversation read back differs from the chat client's list (-client +read):\n%s", diff)
			}
			validate(t, got.Messages)

			// Page by page, at every size, the pages make the same list, each at most its size.
			for limit := 1; limit <= len(c.list)+1; limit++ {
				var all []map[string]any
				query := fmt.Sprintf("?limit=%d", limit)
				for pages := 0; ; pages++ {
					if pages > len(c.list) {
						t.Fatalf("limit %d: more pages than messages", limit)
					}
					res, p := getMessages(t, e, e.secret, c.id, query)
					if res.status != http.StatusOK {
						t.Fatalf("limit %d: GET %s = %d %s", limit, query, res.status, res.body)
					}
					if len(p.Messages) > limit || (p.NextCursor != nil && len(p.Messages) != limit) {
						t.Fatalf("limit %d: a page of %d messages, nextCursor %v", limit, len(p.Messages), p.NextCursor)
					}
					all = append(all, p.Messages...)
					if p.NextCursor == nil {
						break
					}
					query = fmt.Sprintf("?limit=%d&cursor=%s", limit, url.QueryEscape(*p.NextCursor))
				}
				if diff := cmp.Diff(asJSON(t, normalised(t, got.Messages, c.list)), asJSON(t, normalised(t, all, c.list))); diff != "" {
					t.Errorf("limit %d: the pages differ from the whole list (-whole +pages):\n%s", limit, diff)
				}
			}
		})
	}

	// What the read must show, beyond matching the client (which the comparison checks): the
	// parts a reader relies on are there.
	_, got := getMessages(t, e, e.secret, held.id, "")
	b, _ := json.Marshal(got.Messages)
	for _, want := range []string{`"state":"approval-requested"`, `"state":"output-denied"`, `"isAutomatic":true`, `"reason":"looks fine"`, `"reason":"not now"`, `"requestReason":"deploys need a person"`, `"pendingApprovals"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the held conversation read back lacks %s: %s", want, b)
		}
	}
	_, got = getMessages(t, e, e.secret, tools.id, "")
	b, _ = json.Marshal(got.Messages)
	for _, want := range []string{`"type":"data-prompt-tool"`, `"state":"failed"`, `"text":"A quiet week."`, `"state":"output-error"`, `"type":"file"`, `"type":"step-start"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the tools conversation read back lacks %s: %s", want, b)
		}
	}
}

// The route's refusals: an unknown conversation (or another account's) is 404 as the other
// conversation routes answer it; a bad limit or cursor, and a cursor of another conversation,
// are 400 naming the field.
func TestConversationMessagesRefusals(t *testing.T) {
	e := newAsyncEnv(t)
	a := &chatClient{e: e, agentID: e.agent(t, greeter), id: "uimsg-a"}
	a.send(t, map[string]any{"type": "text", "text": "hi"})
	a.send(t, map[string]any{"type": "text", "text": "hi again"})
	b := &chatClient{e: e, agentID: a.agentID, id: "uimsg-b"}
	b.send(t, map[string]any{"type": "text", "text": "hello"})
	_, first := getMessages(t, e, e.secret, a.id, "?limit=1")
	if first.NextCursor == nil {
		t.Fatalf("a page of 1 of 4 messages has no nextCursor")
	}
	_, otherSecret := createAccount(t, e.srv, "uimsg-other")

	for _, tt := range []struct {
		name, secret, conversation, query string
		status                            int
		field, message                    string
	}{
		{"unknown conversation", e.secret, "uimsg-none", "", 404, "", "conversation uimsg-none not found"},
		{"another account's conversation", otherSecret, a.id, "", 404, "", "conversation " + a.id + " not found"},
		{"no secret", "", a.id, "", 401, "", ""},
		{"limit 0", e.secret, a.id, "?limit=0", 400, "limit", ""},
		{"limit over 500", e.secret, a.id, "?limit=501", 400, "limit", ""},
		{"limit not a number", e.secret, a.id, "?limit=ten", 400, "limit", ""},
		{"cursor not base64", e.secret, a.id, "?cursor=%21%21", 400, "cursor", ""},
		{"cursor of another conversation", e.secret, b.id, "?cursor=" + url.QueryEscape(*first.NextCursor), 400, "cursor", ""},
		{"forged cursor", e.secret, a.id, "?cursor=" + base64.RawURLEncoding.EncodeToString([]byte(`{"c":"uimsg-a","s":0}`)), 400, "cursor", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := getMessages(t, e, tt.secret, tt.conversation, tt.query)
			if res.status != tt.status {
				t.Fatalf("status %d %s, want %d", res.status, res.body, tt.status)
			}
			body := res.json(t)
			if tt.field != "" && body["field"] != tt.field {
				t.Errorf("the refusal %s names field %v, want %s", res.body, body["field"], tt.field)
			}
			if tt.message != "" && body["error"] != tt.message {
				t.Errorf("the refusal says %v, want %q", body["error"], tt.message)
			}
		})
	}

	// A cursor opens its own conversation's next page.
	res, next := getMessages(t, e, e.secret, a.id, "?limit=1&cursor="+url.QueryEscape(*first.NextCursor))
	if res.status != http.StatusOK || len(next.Messages) != 1 || next.Messages[0]["role"] != "assistant" {
		t.Errorf("the next page = %d %s, want the first answer", res.status, res.body)
	}
}
