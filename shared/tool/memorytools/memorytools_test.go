package memorytools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/memorytools"
	"github.com/agentharness/harness/shared/tool/toolset"
)

const account = "acct_mem"

// fixture is a workspaces store on the template's table and bucket, with one workspace for
// memory.
type fixture struct {
	store *workspaces.Store
	ws    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	stack := testenv.Stack(t)
	st := workspaces.New(stack.DB, stack.Name("WorkspacesTable"), stack.S3, stack.Name("WorkspacesBucket"))
	f := &fixture{store: st, ws: "mem-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")}
	if _, err := st.Create(context.Background(), account, f.ws); err != nil {
		t.Fatal(err)
	}
	return f
}

// offer is what the toolset offers agent agt_1 with memory of scope in conversation conv of
// endUser.
func (f *fixture) offer(t *testing.T, scope, conv, endUser string) (toolset.Offer, error) {
	t.Helper()
	cfg, err := agentconfig.Parse([]byte(`{"name":"a","model":{"provider":"scripted"},"memory":{"workspace":"` + f.ws + `","scope":"` + scope + `"}}`))
	if err != nil {
		t.Fatal(err)
	}
	return memorytools.New(f.store).Offer(context.Background(), toolset.Build{AccountID: account, AgentID: "agt_1", ConversationID: conv, EndUser: endUser, Config: cfg})
}

// tools are the offered tools and the system prompt's addition.
func (f *fixture) tools(t *testing.T, scope, conv, endUser string) (*tool.Set, string) {
	t.Helper()
	o, err := f.offer(t, scope, conv, endUser)
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(o.Tools...)
	if err != nil {
		t.Fatal(err)
	}
	return set, o.System
}

// must runs one call of set's tool name, which must succeed.
func must(t *testing.T, set *tool.Set, name, input string) map[string]any {
	t.Helper()
	out, err := call(t, set, name, input)
	if err != nil {
		t.Fatalf("%s %s: %v", name, input, err)
	}
	return out
}

// call runs one call of set's tool name, as the loop would, with the call id call_<name>.
func call(t *testing.T, set *tool.Set, name, input string) (map[string]any, error) {
	t.Helper()
	return testenv.RunTool(t, tool.WithCallID(context.Background(), "call_"+name), set, name, input)
}

func wantErr(t *testing.T, set *tool.Set, name, input, says string) {
	t.Helper()
	if _, err := call(t, set, name, input); err == nil || !strings.Contains(err.Error(), says) {
		t.Errorf("%s %s: %v, want an error saying %q", name, input, err, says)
	}
}

// file is a file of the memory workspace at its latest version.
func (f *fixture) file(t *testing.T, path string) string {
	t.Helper()
	got, err := f.store.File(context.Background(), account, f.ws, path, workspaces.Latest)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(got.Data)
}

// The tools insert, replace and rewrite files of the scope's folder, each write one commit by
// the tool with the call's ids, and read and list them.
func TestToolsEditTheScopesFolder(t *testing.T) {
	f := newFixture(t)
	set, _ := f.tools(t, agentconfig.MemoryAgent, "conv_1", "")
	if got := strings.Join(set.Names(), " "); got != "memory_insert memory_list memory_read memory_replace memory_rewrite" {
		t.Fatalf("tools %s", got)
	}
	o, _ := f.offer(t, agentconfig.MemoryAgent, "conv_1", "")
	for _, tl := range o.Tools {
		if tl.Approval != nil {
			t.Errorf("%s waits for approval; memory tools write the agent's own notes", tl.Name)
		}
	}
	must(t, set, "memory_insert", `{"path":"notes/a.md","text":"two"}`)
	must(t, set, "memory_insert", `{"path":"notes/a.md","text":"one","line":0}`)
	must(t, set, "memory_insert", `{"path":"notes/a.md","text":"four\n"}`)
	if out := must(t, set, "memory_insert", `{"path":"notes/a.md","text":"three","line":2}`); out["version"] != 4.0 || out["path"] != "notes/a.md" {
		t.Errorf("the fourth insert = %v, want version 4 at its relative path", out)
	}
	if got := f.file(t, "agents/agt_1/notes/a.md"); got != "one\ntwo\nthree\nfour\n" {
		t.Errorf("after the inserts the file holds %q", got)
	}
	wantErr(t, set, "memory_insert", `{"path":"notes/a.md","text":"x","line":9}`, "past the end of notes/a.md, which has 4 lines")

	must(t, set, "memory_replace", `{"path":"notes/a.md","old_string":"three","new_string":"3"}`)
	wantErr(t, set, "memory_replace", `{"path":"notes/a.md","old_string":"o","new_string":"0"}`, "occurs 3 times")
	wantErr(t, set, "memory_replace", `{"path":"notes/a.md","old_string":"zzz","new_string":"x"}`, "not found")
	wantErr(t, set, "memory_replace", `{"path":"notes/none.md","old_string":"a","new_string":"b"}`, "no such file in your memory")
	if out := must(t, set, "memory_read", `{"path":"notes/a.md"}`); out["content"] != "     1\tone\n     2\ttwo\n     3\t3\n     4\tfour\n" {
		t.Errorf("memory_read = %v", out)
	}
	wantErr(t, set, "memory_read", `{"path":"notes"}`, "is a folder of your memory")
	wantErr(t, set, "memory_read", `{"path":"none.md"}`, "no such file")

	must(t, set, "memory_rewrite", `{"path":"system/profile.md","content":"likes tea\n"}`)
	out := must(t, set, "memory_list", `{}`)
	files, _ := json.Marshal(out["files"])
	if string(files) != `[{"bytes":15,"path":"notes/a.md"},{"bytes":10,"path":"system/profile.md","pinned":true}]` || out["pinnedBytes"] != 10.0 {
		t.Errorf("memory_list = %v", out)
	}

	hist, _, err := f.store.History(context.Background(), account, f.ws, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	want := workspaces.Author{Kind: workspaces.ByTool, AgentID: "agt_1", ConversationID: "conv_1", ToolCallID: "call_memory_rewrite"}
	if hist[0].Author != want || len(hist[0].Changes) != 1 || hist[0].Changes[0].Path != "agents/agt_1/system/profile.md" {
		t.Errorf("the rewrite's commit %+v, want one change by %+v", hist[0], want)
	}

	for _, p := range []string{"../x", "/etc/passwd", "a//b"} {
		wantErr(t, set, "memory_rewrite", `{"path":"`+p+`","content":"x"}`, `path "`+p+`"`)
	}
}

// A pinned file may not grow past its limit; the others may.
func TestPinnedFilesHaveALimit(t *testing.T) {
	f := newFixture(t)
	set, _ := f.tools(t, agentconfig.MemoryAgent, "conv_1", "")
	big := strings.Repeat("x", memorytools.PinnedFileLimit+1)
	wantErr(t, set, "memory_rewrite", `{"path":"system/big.md","content":"`+big+`"}`, "a pinned file holds at most 8192 bytes; this would make it 8193")
	must(t, set, "memory_rewrite", `{"path":"system/edge.md","content":"`+big[1:]+`"}`)
	wantErr(t, set, "memory_insert", `{"path":"system/edge.md","text":"y"}`, "at most 8192 bytes")
	must(t, set, "memory_rewrite", `{"path":"archive/big.md","content":"`+big+`"}`)
}

// The system prompt shows the pinned files with their sizes, cut past their limits, and lists
// the others.
func TestPromptShowsPinnedFiles(t *testing.T) {
	f := newFixture(t)
	_, prompt := f.tools(t, agentconfig.MemoryEndUser, "conv_1", "ada")
	if !strings.Contains(prompt, "## Memory") || !strings.Contains(prompt, "No pinned files (0 of 32768 bytes).") || !strings.Contains(prompt, "No other files.") {
		t.Errorf("an empty memory's prompt:\n%s", prompt)
	}
	// The account writes over the API what the tools would refuse: a pinned file past its limit.
	over := strings.Repeat("z", memorytools.PinnedFileLimit+100)
	changes := []workspaces.Change{
		{Path: "agents/agt_1/end-users/ada/system/profile.md", Data: []byte("Ada. Likes tea.\n")},
		{Path: "agents/agt_1/end-users/ada/system/zz.md", Data: []byte(over)},
		{Path: "agents/agt_1/end-users/ada/trips/2026.md", Data: []byte("Lisbon\n")},
		{Path: "agents/agt_1/end-users/bob/system/profile.md", Data: []byte("Bob's secret.\n")},
		{Path: "agents/agt_2/system/profile.md", Data: []byte("another agent's\n")},
	}
	if _, err := f.store.Commit(context.Background(), account, f.ws, workspaces.Latest, changes, workspaces.Author{Kind: workspaces.ByAPI}); err != nil {
		t.Fatal(err)
	}
	_, prompt = f.tools(t, agentconfig.MemoryEndUser, "conv_1", "ada")
	for _, want := range []string{
		"Pinned files (8208 of 32768 bytes):",
		"### system/profile.md (16 of 8192 bytes)\n\nAda. Likes tea.\n",
		"### system/zz.md (8292 of 8192 bytes)\n\n" + over[:memorytools.PinnedFileLimit] + "\n\n[cut at 8192 of its 8292 bytes",
		"Other files (read with memory_read):\n- trips/2026.md (7 bytes)",
	} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt lacks %.120q:\n%.2000s", want, prompt)
		}
	}
	if strings.Contains(prompt, "Bob") || strings.Contains(prompt, "another agent") {
		t.Errorf("the prompt shows another end user's or agent's memory:\n%.2000s", prompt)
	}
}

// Each scope has its folder: the agent's, an end user's (the account's own turns share
// _account), a conversation's; an id that cannot be one segment is refused, not escaped.
func TestScopesHaveTheirFolders(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct{ scope, conv, endUser, folder string }{
		{agentconfig.MemoryAgent, "conv_1", "ada", "agents/agt_1"},
		{agentconfig.MemoryEndUser, "conv_1", "ada", "agents/agt_1/end-users/ada"},
		{agentconfig.MemoryEndUser, "conv_1", "", "agents/agt_1/end-users/_account"},
		{agentconfig.MemoryConversation, "conv_1", "ada", "agents/agt_1/conversations/conv_1"},
	} {
		set, _ := f.tools(t, tt.scope, tt.conv, tt.endUser)
		must(t, set, "memory_rewrite", `{"path":"n.md","content":"`+tt.scope+tt.endUser+`"}`)
		if got := f.file(t, tt.folder+"/n.md"); got != tt.scope+tt.endUser {
			t.Errorf("scope %s of %q wrote %q to %s", tt.scope, tt.endUser, got, tt.folder)
		}
	}
	for _, tt := range []struct{ scope, conv, endUser, says string }{
		{agentconfig.MemoryEndUser, "conv_1", "a/b", `the end user's id "a/b" cannot name a memory folder`},
		{agentconfig.MemoryEndUser, "conv_1", "..", `the end user's id ".." cannot name a memory folder`},
		{agentconfig.MemoryEndUser, "conv_1", "_account", "has the name of the account's own memory folder"},
	} {
		_, err := f.offer(t, tt.scope, tt.conv, tt.endUser)
		var refused *toolset.ConfigError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("scope %s of %q: %v, want a ConfigError saying %q", tt.scope, tt.endUser, err, tt.says)
		}
	}
}

// A write over a file another writer changed since the turn read it is refused, saying so.
func TestConflictsAreReported(t *testing.T) {
	f := newFixture(t)
	set, _ := f.tools(t, agentconfig.MemoryAgent, "conv_1", "")
	must(t, set, "memory_rewrite", `{"path":"f.md","content":"mine"}`)
	must(t, set, "memory_read", `{"path":"f.md"}`)
	if _, err := f.store.Commit(context.Background(), account, f.ws, workspaces.Latest, []workspaces.Change{{Path: "agents/agt_1/f.md", Data: []byte("theirs")}}, workspaces.Author{Kind: workspaces.ByAPI}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, set, "memory_insert", `{"path":"f.md","text":"more"}`, "agents/agt_1/f.md changed since the base version")
	wantErr(t, set, "memory_rewrite", `{"path":"f.md","content":"mine again"}`, "changed since the base version")
	if got := f.file(t, "agents/agt_1/f.md"); got != "theirs" {
		t.Errorf("f.md = %q, want the other writer's", got)
	}
}

// An agent is refused where its memory's workspace is missing or the deployment keeps none;
// outside a conversation it gets the tools alone.
func TestOfferRefusals(t *testing.T) {
	f := newFixture(t)
	cfg, _ := agentconfig.Parse([]byte(`{"name":"a","model":{"provider":"scripted"},"memory":{"workspace":"` + f.ws + `"}}`))
	var refused *toolset.ConfigError
	if _, err := memorytools.New(f.store).Offer(context.Background(), toolset.Build{AccountID: "acct_other", AgentID: "agt_1", ConversationID: "c", Config: cfg}); !errors.As(err, &refused) || !strings.Contains(err.Error(), "memory.workspace: there is no workspace named "+f.ws) {
		t.Errorf("another account's workspace: %v", err)
	}
	if _, err := memorytools.New(nil).Offer(context.Background(), toolset.Build{AccountID: account, AgentID: "agt_1", ConversationID: "c", Config: cfg}); !errors.As(err, &refused) || !strings.Contains(err.Error(), "keeps no workspaces") {
		t.Errorf("no workspaces store: %v", err)
	}
	o, err := memorytools.New(f.store).Offer(context.Background(), toolset.Build{AccountID: account, AgentID: "agt_1", Config: cfg})
	if err != nil || len(o.Tools) != 5 || o.System != "" {
		t.Errorf("outside a conversation: %d tools, prompt %q, %v; want the tools alone", len(o.Tools), o.System, err)
	}
}
