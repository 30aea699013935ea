package workspacetools_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/sandbox"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/toolset"
	"github.com/agentharness/harness/shared/tool/workspacetools"
)

const account = "acct_ws"

// fixture is a workspaces store on the template's table and bucket and the bwrap the stack
// found, with one workspace.
type fixture struct {
	store  *workspaces.Store
	runner sandbox.Runner
	ws     string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	stack := testenv.Stack(t)
	st, err := workspaces.FromConfig(stack.DB, stack.S3, workspaces.Config{Table: stack.Name("WorkspacesTable"), Bucket: stack.Name("WorkspacesBucket")})
	if err != nil {
		t.Fatal(err)
	}
	bwrap := os.Getenv("HARNESS_BWRAP")
	if bwrap == "" {
		t.Fatal("HARNESS_BWRAP is not set: run the tests with `make test`, whose stack finds or installs bubblewrap")
	}
	f := &fixture{store: st, runner: &sandbox.Local{Bwrap: bwrap}, ws: "ws-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")}
	if _, err := st.Create(context.Background(), account, f.ws); err != nil {
		t.Fatal(err)
	}
	return f
}

// tools are the tools the toolset offers an agent of config (its "workspaces" naming the
// fixture's as WS).
func (f *fixture) tools(t *testing.T, config string) *tool.Set {
	t.Helper()
	return f.toolsIn(t, config, tool.Vars{})
}

// toolsIn are the tools offered an agent of config in a thread with vars.
func (f *fixture) toolsIn(t *testing.T, config string, vars tool.Vars) *tool.Set {
	t.Helper()
	cfg, err := agentconfig.Parse([]byte(strings.ReplaceAll(`{"name":"a","model":{"provider":"scripted"},`+config+`}`, "WS", f.ws)))
	if err != nil {
		t.Fatal(err)
	}
	o, err := workspacetools.New(f.store, f.runner).Offer(context.Background(), toolset.Build{AccountID: account, AgentID: "agt_1", Config: cfg, Vars: vars})
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(o.Tools...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// thread is the turn a call runs in, as the engine's tells a tool its thread.
type thread string

func (c thread) Thread() (string, string) { return account, string(c) }

// call runs one call of set's tool name, as the loop would, with the call id id.
func call(t *testing.T, set *tool.Set, name, id, input string) (map[string]any, error) {
	t.Helper()
	return testenv.RunTool(t, tool.WithTurn(tool.WithCallID(context.Background(), id), thread("conv_1")), set, name, input)
}

func must(t *testing.T, set *tool.Set, name, input string) map[string]any {
	t.Helper()
	out, err := call(t, set, name, "call_"+name, input)
	if err != nil {
		t.Fatalf("%s %s: %v", name, input, err)
	}
	return out
}

func wantErr(t *testing.T, set *tool.Set, name, input, says string) {
	t.Helper()
	if _, err := call(t, set, name, "call_"+name, input); err == nil || !strings.Contains(err.Error(), says) {
		t.Errorf("%s %s: %v, want an error saying %q", name, input, err, says)
	}
}

// read, write, edit, glob and grep act on the store: each write or edit is one commit, and reads
// see it.
func TestFileTools(t *testing.T) {
	f := newFixture(t)
	if got := strings.Join(f.tools(t, `"workspaces":[{"name":"WS"}]`).Names(), " "); got != "glob read" {
		t.Errorf("a workspace without a sandbox has %s, want glob and read", got)
	}
	if _, err := f.store.Create(context.Background(), account, f.ws+"-other"); err != nil {
		t.Fatal(err)
	}
	set := f.tools(t, `"sandbox":{},"workspaces":[{"name":"WS","permissionMode":"unrestricted"},{"name":"WS-other","sandbox":null}]`)
	want := "WS-other__glob WS-other__read WS__bash WS__edit WS__glob WS__grep WS__read WS__write"
	if got := strings.Join(set.Names(), " "); got != strings.ReplaceAll(want, "WS", f.ws) {
		t.Fatalf("tools %s, want all six of the workspace with a sandbox, read and glob of the other", got)
	}
	set = f.tools(t, `"sandbox":{},"workspaces":[{"name":"WS","permissionMode":"unrestricted"}]`)
	lines := "one\ntwo\nthree\nfour\nfive\n"
	if out := must(t, set, "write", `{"path":"notes/a.md","content":`+quote(lines)+`}`); out["version"] != 1.0 {
		t.Errorf("write = %v, want version 1", out)
	}
	out := must(t, set, "read", `{"path":"notes/a.md","offset":2,"limit":2}`)
	if out["content"] != "     2\ttwo\n     3\tthree\n" || !strings.Contains(out["note"].(string), "offset 4") || out["lines"] != 5.0 {
		t.Errorf("read offset 2 limit 2 = %v", out)
	}
	if out := must(t, set, "read", `{"path":"notes/a.md"}`); out["note"] != nil || !strings.HasSuffix(out["content"].(string), "     5\tfive\n") {
		t.Errorf("read = %v", out)
	}

	must(t, set, "edit", `{"path":"notes/a.md","old_string":"three","new_string":"3"}`)
	if out := must(t, set, "read", `{"path":"notes/a.md","offset":3,"limit":1}`); out["content"] != "     3\t3\n" || out["version"] != 2.0 {
		t.Errorf("read after edit = %v", out)
	}
	must(t, set, "write", `{"path":"notes/b.md","content":"o\no\n"}`)
	wantErr(t, set, "edit", `{"path":"notes/b.md","old_string":"o","new_string":"x"}`, "occurs 2 times")
	wantErr(t, set, "edit", `{"path":"notes/b.md","old_string":"zzz","new_string":"x"}`, "not found")
	wantErr(t, set, "edit", `{"path":"notes/none.md","old_string":"o","new_string":"x"}`, "no file")
	wantErr(t, set, "read", `{"path":"notes"}`, "is a directory")

	must(t, set, "write", `{"path":"top.txt","content":"three\n"}`)
	if out := must(t, set, "glob", `{"pattern":"**/*.md"}`); !same(out["paths"], "notes/a.md", "notes/b.md") {
		t.Errorf("glob **/*.md = %v", out)
	}
	if out := must(t, set, "glob", `{"pattern":"*.txt"}`); !same(out["paths"], "top.txt") {
		t.Errorf("glob *.txt = %v", out)
	}
	if out := must(t, set, "grep", `{"pattern":"^t"}`); !same(out["matches"], "notes/a.md:2: two", "top.txt:1: three") {
		t.Errorf("grep = %v", out)
	}
	if out := must(t, set, "grep", `{"pattern":"^t","path":"notes"}`); !same(out["matches"], "notes/a.md:2: two") {
		t.Errorf("grep in notes = %v", out)
	}
	wantErr(t, set, "grep", `{"pattern":"("}`, "pattern")

	for _, name := range []string{"read", "write", "edit"} {
		for _, p := range []string{"../x", "/etc/passwd"} {
			wantErr(t, set, name, argsFor(name, p), `path "`+p+`"`)
		}
	}
}

func argsFor(name, p string) string {
	switch name {
	case "write":
		return `{"path":"` + p + `","content":"x"}`
	case "edit":
		return `{"path":"` + p + `","old_string":"a","new_string":"b"}`
	}
	return `{"path":"` + p + `"}`
}

// bash runs in a copy of the workspace: a file it writes is committed as one commit by the tool,
// with the call's ids, and read sees it; a stateless bash keeps nothing.
func TestBashCommitsWhatItChanged(t *testing.T) {
	f := newFixture(t)
	set := f.tools(t, `"sandbox":{},"workspaces":[{"name":"WS","permissionMode":"unrestricted"}]`)
	must(t, set, "write", `{"path":"in.txt","content":"hello\n"}`)
	out, err := call(t, set, "bash", "call_b", `{"command":"pwd; mkdir out; tr a-z A-Z < in.txt > out/up.txt; rm in.txt"}`)
	if err != nil {
		t.Fatal(err)
	}
	if out["exitCode"] != 0.0 || out["stdout"] != sandbox.RootDir+"\n" || out["committed"] == nil {
		t.Fatalf("bash = %v", out)
	}
	if out := must(t, set, "read", `{"path":"out/up.txt"}`); out["content"] != "     1\tHELLO\n" {
		t.Errorf("read after bash = %v", out)
	}
	wantErr(t, set, "read", `{"path":"in.txt"}`, "no file")
	hist, _, err := f.store.History(context.Background(), account, f.ws, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	want := workspaces.Author{Kind: workspaces.ByTool, AgentID: "agt_1", ConversationID: "conv_1", ToolCallID: "call_b"}
	if hist[0].Author != want || len(hist[0].Changes) != 2 {
		t.Errorf("bash's commit %+v, want one commit of two changes by %+v", hist[0], want)
	}

	scratch := f.tools(t, `"sandbox":{"permissionMode":"unrestricted"}`)
	if got := scratch.Names(); len(got) != 1 || got[0] != "bash" {
		t.Fatalf("an agent with a sandbox and no workspace has %v, want bash alone", got)
	}
	if out := must(t, scratch, "bash", `{"command":"ls -A | wc -l; echo x > f"}`); out["stdout"] != "0\n" || out["committed"] != nil {
		t.Errorf("stateless bash = %v", out)
	}
}

// The thread's values of the variables sandbox.variables names reach bash's environment; no
// other variable does, and the harness's environment never stands in for a missing one.
func TestBashGetsTheSandboxVariables(t *testing.T) {
	f := newFixture(t)
	t.Setenv("UNSET_IN_THREAD", "from-the-harness")
	thread := map[string]string{"TOKEN": "tok-7781", "OTHER": "other-7781"}
	vars := tool.Vars{Get: func(name string) string { return thread[name] }}
	config := `"variables":[{"name":"TOKEN","type":"secret"},{"name":"OTHER"},{"name":"UNSET_IN_THREAD"}],` +
		`"sandbox":{"permissionMode":"unrestricted","variables":["TOKEN","UNSET_IN_THREAD"]}`
	cmd := `{"command":"echo \"$TOKEN|$OTHER|$UNSET_IN_THREAD\""}`
	if out := must(t, f.toolsIn(t, config, vars), "bash", cmd); out["stdout"] != "tok-7781||\n" {
		t.Errorf("stateless bash saw %q, want TOKEN alone", out["stdout"])
	}
	inWorkspace := f.toolsIn(t, config+`,"workspaces":[{"name":"WS","permissionMode":"unrestricted"}]`, vars)
	if out := must(t, inWorkspace, "bash", cmd); out["stdout"] != "tok-7781||\n" {
		t.Errorf("a workspace's bash saw %q, want TOKEN alone", out["stdout"])
	}
}

// What the sandbox cut or stopped is in the result.
func TestBashLimitsAreReported(t *testing.T) {
	f := newFixture(t)
	set := f.tools(t, `"sandbox":{"limits":{"outputBytes":100,"wallSeconds":10}},"workspaces":[{"name":"WS","permissionMode":"unrestricted"}]`)
	if out := must(t, set, "bash", `{"command":"head -c 1000 /dev/zero | tr '\\0' x"}`); len(out["stdout"].(string)) != 100 || out["stdoutNote"] == nil {
		t.Errorf("bash past outputBytes = %v", out)
	}
	if out := must(t, set, "bash", `{"command":"sleep 30","timeoutMs":1000}`); out["timedOut"] != true || !strings.Contains(out["killed"].(string), "wall time limit (1 s)") {
		t.Errorf("bash past timeoutMs = %v", out)
	}

	small := f.tools(t, `"sandbox":{"limits":{"maxFiles":1}},"workspaces":[{"name":"WS","permissionMode":"unrestricted"}]`)
	must(t, small, "write", `{"path":"a","content":"a"}`)
	must(t, small, "write", `{"path":"b","content":"b"}`)
	wantErr(t, small, "bash", `{"command":"true"}`, "more than the sandbox takes (sandbox.limits.maxFiles, 1)")
}

// racing runs a command after another writer commits to path, as if it had while the command
// ran.
type racing struct {
	sandbox.Runner
	f    *fixture
	path string
}

func (r racing) Run(ctx context.Context, req sandbox.Request) (sandbox.Result, error) {
	if _, err := r.f.store.Commit(ctx, account, r.f.ws, workspaces.Latest, []workspaces.Change{{Path: r.path, Data: []byte("theirs")}}, workspaces.Author{Kind: workspaces.ByAPI}); err != nil {
		return sandbox.Result{}, err
	}
	return r.Runner.Run(ctx, req)
}

// A write over a path another writer changed since the turn read it, or a bash whose files
// another writer changed while it ran, is a conflict the result reports; the other write stays.
func TestConflictsAreReported(t *testing.T) {
	f := newFixture(t)
	set := f.tools(t, `"sandbox":{},"workspaces":[{"name":"WS","permissionMode":"unrestricted"}]`)
	must(t, set, "write", `{"path":"f.txt","content":"mine"}`)
	must(t, set, "read", `{"path":"f.txt"}`)
	if _, err := f.store.Commit(context.Background(), account, f.ws, workspaces.Latest, []workspaces.Change{{Path: "f.txt", Data: []byte("theirs")}}, workspaces.Author{Kind: workspaces.ByAPI}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, set, "write", `{"path":"f.txt","content":"mine again"}`, "f.txt changed since the base version")
	wantErr(t, set, "edit", `{"path":"f.txt","old_string":"theirs","new_string":"mine"}`, "f.txt changed since the base version")

	f.runner = racing{Runner: f.runner, f: f, path: "g.txt"}
	set = f.tools(t, `"sandbox":{},"workspaces":[{"name":"WS","permissionMode":"unrestricted"}]`)
	out := must(t, set, "bash", `{"command":"echo mine > g.txt"}`)
	if !strings.Contains(out["notCommitted"].(string), "g.txt changed since the base version") || out["committed"] != nil {
		t.Errorf("bash racing another writer = %v", out)
	}
	if got, err := f.store.File(context.Background(), account, f.ws, "g.txt", workspaces.Latest); err != nil || string(got.Data) != "theirs" {
		t.Errorf("g.txt = %q, %v, want the other writer's", got.Data, err)
	}
}

// An agent is refused where its config asks what the deployment or the account lacks.
func TestOfferRefusals(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct {
		config string
		st     workspacetools.Store
		runner sandbox.Runner
		says   string
	}{
		{`"sandbox":{}`, f.store, nil, "no sandbox backend"},
		{`"workspaces":[{"name":"WS"}]`, nil, f.runner, "keeps none"},
		{`"workspaces":[{"name":"other"}]`, f.store, f.runner, "workspaces[0].name: there is no workspace named other"},
	} {
		cfg, err := agentconfig.Parse([]byte(strings.ReplaceAll(`{"name":"a","model":{"provider":"scripted"},`+tt.config+`}`, "WS", f.ws)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = workspacetools.New(tt.st, tt.runner).Offer(context.Background(), toolset.Build{AccountID: account, Config: cfg})
		var refused *toolset.ConfigError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: %v, want a ConfigError saying %q", tt.config, err, tt.says)
		}
	}
	// Another account's workspace of the same name is not found.
	cfg, _ := agentconfig.Parse([]byte(`{"name":"a","model":{"provider":"scripted"},"workspaces":[{"name":"` + f.ws + `"}]}`))
	if _, err := workspacetools.New(f.store, f.runner).Offer(context.Background(), toolset.Build{AccountID: "acct_other", Config: cfg}); err == nil || !strings.Contains(err.Error(), "there is no workspace") {
		t.Errorf("another account's workspace: %v", err)
	}
}

// Which calls each permission mode holds for the user's approval.
func TestApprovalPerMode(t *testing.T) {
	inputs := map[string]string{"": `{"path":"notes.md"}`, "@memory": `{"path":"memory/notes.md"}`}
	for _, tt := range []struct {
		mode string
		// held are the calls held, in the order of agentconfig.WorkspaceTools: a tool's name for
		// a path outside memory/, with @memory for one under it.
		held string
	}{
		{"", "write write@memory edit edit@memory bash bash@memory"},
		{agentconfig.Standard, "write write@memory edit edit@memory bash bash@memory"},
		{agentconfig.AcceptEdits, "bash bash@memory"},
		{agentconfig.MemoryMode, "write edit bash bash@memory"},
		{agentconfig.Unrestricted, ""},
		{agentconfig.Strict, "read read@memory write write@memory edit edit@memory glob glob@memory grep grep@memory bash bash@memory"},
	} {
		var got []string
		for _, name := range agentconfig.WorkspaceTools {
			for _, where := range []string{"", "@memory"} {
				if workspacetools.Approval(tt.mode, name).Decide(json.RawMessage(inputs[where])).Status == approval.UserApproval {
					got = append(got, name+where)
				}
			}
		}
		if strings.Join(got, " ") != tt.held {
			t.Errorf("mode %q holds %v, want %s", tt.mode, got, tt.held)
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// same reports whether v, a JSON array, holds exactly want, in order.
func same(v any, want ...string) bool {
	list, ok := v.([]any)
	if !ok || len(list) != len(want) {
		return false
	}
	for i := range list {
		if list[i] != want[i] {
			return false
		}
	}
	return true
}
