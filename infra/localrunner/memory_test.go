package localrunner_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/mockopenai"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/store"
)

// rememberer is a model that keeps what a user message asks it to remember ("remember: …") in
// its pinned memory with memory_insert, and otherwise answers.
func rememberer(r *mockopenai.Request) mockopenai.Reply {
	last := r.Messages[len(r.Messages)-1]
	fact, ok := strings.CutPrefix(last.Text(), "remember: ")
	switch {
	case last.Role == "tool":
		return mockopenai.Reply{Text: "Noted."}
	case ok:
		args, _ := json.Marshal(map[string]string{"path": "system/facts.md", "text": fact})
		return mockopenai.Reply{ToolCalls: []mockopenai.ToolCall{{Function: mockopenai.FunctionCall{Name: "memory_insert", Arguments: string(args)}}}}
	}
	return mockopenai.Reply{Text: "Hello."}
}

// systemPrompt is the system message of the model's latest request.
func systemPrompt(t *testing.T, mock *mockopenai.Server) string {
	t.Helper()
	reqs := mock.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == "system" || m.Role == "developer" {
			return m.Text()
		}
	}
	return ""
}

// What an agent writes to its memory with a tool in one conversation is in the system prompt of
// its next conversation with the same end user, and, with endUser scope, in no other end user's;
// the account reads the file over the workspace files API.
func TestMemoryOutlivesAConversation(t *testing.T) {
	e, mock, block := newScriptedModelEnv(t, testenv.Stack(t), rememberer)
	if res := call(t, e.srv, http.MethodPost, "/accounts/me/workspaces", e.secret, `{"name":"memory"}`); res.status != http.StatusCreated {
		t.Fatalf("creating the workspace = %d %s", res.status, res.body)
	}
	agentID := e.agent(t, `{"name":"rememberer","model":`+block+`,"memory":{"workspace":"memory","scope":"endUser"}}`)
	ada, _ := mintToken(t, e.srv, e.secret, "ada", nil, 600)
	bob, _ := mintToken(t, e.srv, e.secret, "bob", nil, 600)
	const fact = "Ada takes her tea with lemon (fact 7781)."

	if text := streamText(chat(t, e.srv, ada, `{"agentId":"`+agentID+`","id":"mem-ada-1","message":"remember: `+fact+`"}`)); text != "Noted." {
		t.Fatalf("conversation A answered %q, want the model's answer after memory_insert", text)
	}
	if prompt := systemPrompt(t, mock); !strings.Contains(prompt, "## Memory") || strings.Contains(prompt, fact) {
		t.Errorf("conversation A's system prompt, before the write, shows no memory section or the fact already:\n%s", prompt)
	}
	if code, body := e.file(t, e.secret, "memory", "agents/"+agentID+"/end-users/ada/system/facts.md"); code != http.StatusOK || body != fact+"\n" {
		t.Fatalf("GET the memory file = %d %q, want the fact", code, body)
	}

	chat(t, e.srv, ada, `{"agentId":"`+agentID+`","id":"mem-ada-2","message":"hi again"}`)
	if prompt := systemPrompt(t, mock); !strings.Contains(prompt, "### system/facts.md (") || !strings.Contains(prompt, fact) {
		t.Errorf("conversation B of the same end user has not the fact in its system prompt:\n%s", prompt)
	}

	// The account's own turns on ada's conversation, streamed or queued, have her memory; on a
	// conversation of its own, the account's.
	e.stream(t, `{"agentId":"`+agentID+`","id":"mem-ada-2","message":"the account says hi"}`)
	if prompt := systemPrompt(t, mock); !strings.Contains(prompt, fact) {
		t.Errorf("the account's streamed turn on ada's conversation lacks her memory:\n%s", prompt)
	}
	ev := e.async(t, `{"agentId":"`+agentID+`","id":"mem-ada-2","message":"the account says hi again"}`)
	e.waitStatus(t, ev.EventID, store.EventCompleted)
	if prompt := systemPrompt(t, mock); !strings.Contains(prompt, fact) {
		t.Errorf("the account's queued turn on ada's conversation lacks her memory:\n%s", prompt)
	}
	e.stream(t, `{"agentId":"`+agentID+`","id":"mem-account-1","message":"remember: the account's own note"}`)
	if code, body := e.file(t, e.secret, "memory", "agents/"+agentID+"/end-users/_account/system/facts.md"); code != http.StatusOK || body != "the account's own note\n" {
		t.Errorf("the account's own memory file = %d %q", code, body)
	}

	chat(t, e.srv, bob, `{"agentId":"`+agentID+`","id":"mem-bob-1","message":"hi"}`)
	if prompt := systemPrompt(t, mock); !strings.Contains(prompt, "## Memory") || strings.Contains(prompt, fact) {
		t.Errorf("another end user's conversation shows the fact, or no memory:\n%s", prompt)
	}
	if code, _ := e.file(t, e.secret, "memory", "agents/"+agentID+"/end-users/bob/system/facts.md"); code != http.StatusNotFound {
		t.Errorf("bob's memory file = %d, want 404: he wrote none", code)
	}

	// The account edits the memory over the API, and the next turn sees it.
	path := "/accounts/me/workspaces/memory/files/agents/" + agentID + "/end-users/bob/system/facts.md"
	if res := call(t, e.srv, http.MethodPut, path, e.secret, "Bob prefers coffee."); res.status != http.StatusCreated {
		t.Fatalf("PUT bob's memory file = %d %s", res.status, res.body)
	}
	chat(t, e.srv, bob, `{"agentId":"`+agentID+`","id":"mem-bob-2","message":"hi"}`)
	if prompt := systemPrompt(t, mock); !strings.Contains(prompt, "Bob prefers coffee.") || strings.Contains(prompt, fact) {
		t.Errorf("bob's next conversation lacks what the account wrote, or shows ada's fact:\n%s", prompt)
	}
}

// A workspace used for memory cannot also be one the agent works in.
func TestMemoryWorkspaceIsNotAlsoAWorkspace(t *testing.T) {
	e := newSandboxEnv(t)
	res := call(t, e.srv, http.MethodPost, "/accounts/me/agents", e.secret, scripted(t, `"workspaces":[{"name":"notes"}],"memory":{"workspace":"notes"}`))
	if res.status != http.StatusBadRequest || res.json(t)["field"] != "memory.workspace" {
		t.Errorf("an agent whose memory is one of its workspaces = %d %s, want 400 naming memory.workspace", res.status, res.body)
	}
}
