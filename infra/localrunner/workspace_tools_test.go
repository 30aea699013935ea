package localrunner_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/sandbox/sandboxtest"
	"github.com/agentharness/harness/shared/state/store"
)

// newSandboxEnv is newAsyncEnv whose functions run bash in the bubblewrap the stack found, and
// whose account has the workspace notes.
func newSandboxEnv(t *testing.T) *asyncEnv {
	t.Helper()
	e := newAsyncEnvOn(t, testenv.Stack(t), withBwrap)
	if res := call(t, e.srv, http.MethodPost, "/accounts/me/workspaces", e.secret, `{"name":"notes"}`); res.status != http.StatusCreated {
		t.Fatalf("creating the workspace = %d %s", res.status, res.body)
	}
	return e
}

// withBwrap has the runner's functions run bash in the bubblewrap the stack found.
func withBwrap(o *localrunner.Options) {
	base := o.Getenv
	o.Getenv = func(k string) string {
		if k == "HARNESS_BWRAP" {
			return os.Getenv(k)
		}
		return base(k)
	}
}

// scripted is an agent config on the scripted model: one step per tool call, in order, then an
// answer with the last results.
func scripted(t *testing.T, extra string, calls ...string) string {
	t.Helper()
	var steps []string
	for _, c := range calls {
		steps = append(steps, `{"toolCalls":[`+c+`]}`)
	}
	steps = append(steps, `{"text":"Results: {{toolResults}}"}`)
	return `{"name":"ws","model":{"provider":"scripted","script":[` + strings.Join(steps, ",") + `]},` + extra + `}`
}

// file is a workspace file's bytes, as the API returns them.
func (e *asyncEnv) file(t *testing.T, secret, ws, path string) (int, string) {
	t.Helper()
	res := call(t, e.srv, http.MethodGet, "/accounts/me/workspaces/"+ws+"/files/"+path, secret, "")
	return res.status, string(res.body)
}

// An unrestricted agent's bash writes a file that its read sees in the same turn, and the API
// serves it afterwards.
func TestWorkspaceToolsInATurn(t *testing.T) {
	e := newSandboxEnv(t)
	agentID := e.agent(t, scripted(t, `"sandbox":{},"workspaces":[{"name":"notes","permissionMode":"unrestricted"}]`,
		`{"name":"bash","input":{"command":"mkdir -p out && echo from-bash > out/note.txt"}}`,
		`{"name":"read","input":{"path":"out/note.txt"}}`))
	ev := e.async(t, `{"agentId":"`+agentID+`","message":"go"}`)
	st, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
	if st.Text == nil || !strings.Contains(*st.Text, `1\tfrom-bash`) {
		t.Errorf("the turn's answer %v, want read's numbered line: %s", st.Text, st.raw)
	}
	if code, body := e.file(t, e.secret, "notes", "out/note.txt"); code != http.StatusOK || body != "from-bash\n" {
		t.Errorf("GET the file = %d %q", code, body)
	}
}

// In standard mode write and bash wait for the user; approved, they run and their files land.
func TestWorkspaceToolsHeldInStandardMode(t *testing.T) {
	e := newSandboxEnv(t)
	agentID := e.agent(t, scripted(t, `"sandbox":{},"workspaces":[{"name":"notes"}]`,
		`{"name":"write","input":{"path":"w.txt","content":"written"}},{"name":"bash","input":{"command":"echo ran > b.txt"}}`))
	ev := e.async(t, `{"agentId":"`+agentID+`","message":"go"}`)
	waiting, _ := e.waitStatus(t, ev.EventID, store.EventWaiting)
	var approvals []string
	for _, p := range waiting.PendingApprovals {
		approvals = append(approvals, `{"approvalId":"`+p.ApprovalID+`","approved":true}`)
	}
	if len(approvals) != 2 {
		t.Fatalf("pendingApprovals %+v, want write's and bash's: %s", waiting.PendingApprovals, waiting.raw)
	}
	if code, _ := e.file(t, e.secret, "notes", "w.txt"); code != http.StatusNotFound {
		t.Errorf("w.txt before the approval = %d, want 404", code)
	}
	answer := e.async(t, `{"agentId":"`+agentID+`","id":"`+ev.ConversationID+`","approvals":[`+strings.Join(approvals, ",")+`]}`)
	e.waitStatus(t, answer.EventID, store.EventCompleted)
	for path, want := range map[string]string{"w.txt": "written", "b.txt": "ran\n"} {
		if code, body := e.file(t, e.secret, "notes", path); code != http.StatusOK || body != want {
			t.Errorf("GET %s after the approval = %d %q, want %q", path, code, body, want)
		}
	}
}

// bash reaches no listener of the machine's, loopback included.
func TestWorkspaceBashReachesNoNetwork(t *testing.T) {
	ln := sandboxtest.Listen(t)
	e := newSandboxEnv(t)
	command, _ := json.Marshal(fmt.Sprintf("bash -c 'echo hi > /dev/tcp/127.0.0.1/%d' && echo reached", ln.Port()))
	agentID := e.agent(t, scripted(t, `"sandbox":{"permissionMode":"unrestricted"}`, `{"name":"bash","input":{"command":`+string(command)+`}}`))
	ev := e.async(t, `{"agentId":"`+agentID+`","message":"go"}`)
	st, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
	if st.Text == nil || strings.Contains(*st.Text, `reached\n`) || !strings.Contains(*st.Text, "exitCode") {
		t.Errorf("the turn's answer %v, want bash's result without reached: %s", st.Text, st.raw)
	}
	if n := ln.Accepted(); n != 0 {
		t.Errorf("the listener accepted %d connections from the sandbox", n)
	}
}

// A workspace of another account is not found: a config that names it is refused, naming the
// field, and so is one naming a workspace the account deleted since, when its turn starts.
func TestWorkspaceOfAnotherAccountIsNotFound(t *testing.T) {
	e := newSandboxEnv(t)
	_, other := createAccount(t, e.srv, "other-ws")
	if res := call(t, e.srv, http.MethodPost, "/accounts/me/workspaces", other, `{"name":"private"}`); res.status != http.StatusCreated {
		t.Fatalf("creating the other account's workspace = %d %s", res.status, res.body)
	}
	res := call(t, e.srv, http.MethodPost, "/accounts/me/agents", e.secret, scripted(t, `"workspaces":[{"name":"private"}]`))
	if res.status != http.StatusBadRequest || !strings.Contains(string(res.body), "workspaces[0].name") || !strings.Contains(string(res.body), "no workspace named private") {
		t.Errorf("an agent naming another account's workspace = %d %s, want 400 naming workspaces[0].name", res.status, res.body)
	}

	agentID := e.agent(t, scripted(t, `"workspaces":[{"name":"notes","permissionMode":"unrestricted"}]`, `{"name":"read","input":{"path":"a"}}`))
	if res := call(t, e.srv, http.MethodDelete, "/accounts/me/workspaces/notes", e.secret, ""); res.status != http.StatusNoContent {
		t.Fatalf("deleting the workspace = %d %s", res.status, res.body)
	}
	res = call(t, e.srv, http.MethodPost, "/async", e.secret, `{"agentId":"`+agentID+`","message":"go"}`)
	said := string(res.body)
	if res.status == http.StatusAccepted {
		var s started
		_ = json.Unmarshal(res.body, &s)
		st, _ := e.waitStatus(t, s.EventID, store.EventFailed)
		said = st.Error
	}
	if !strings.Contains(said, "workspaces[0].name: there is no workspace named notes") {
		t.Errorf("a turn of an agent naming a deleted workspace = %d %s, want it refused naming the field", res.status, said)
	}
}
