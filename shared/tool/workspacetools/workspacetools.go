// Package workspacetools offers config.workspaces and config.sandbox: read, write, edit, glob
// and grep on a workspace's files, which act on the workspaces store and run no code, and bash,
// which runs a command in a sandbox (sandbox.Runner) over a copy of the workspace's latest
// version and commits what it changed back as one commit. An agent with a sandbox and no
// workspace gets a stateless bash over an empty root. Which calls wait for the user follows each
// workspace's permission mode.
package workspacetools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/sandbox"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/toolset"
)

// Store is what the tools read and commit of an account's workspaces (shared/state/workspaces).
type Store interface {
	Get(ctx context.Context, accountID, name string) (workspaces.Workspace, error)
	Tree(ctx context.Context, accountID, name string, version int64) (*workspaces.Tree, error)
	Blob(ctx context.Context, accountID, sum string) ([]byte, error)
	Commit(ctx context.Context, accountID, name string, base int64, changes []workspaces.Change, author workspaces.Author) (workspaces.Commit, error)
}

// Turn is what a call needs of the turn it runs in (the engine's, tool.TurnFrom): its thread,
// which a commit names as its conversation.
type Turn interface {
	Thread() (accountID, threadID string)
}

// Toolset offers config.workspaces and config.sandbox (turn.Toolset).
type Toolset struct {
	store  Store
	runner sandbox.Runner
}

// New returns the toolset over the workspaces in st, running bash with r. A nil st refuses
// agents that name workspaces; a nil r, agents with a sandbox (the deployment has no backend).
func New(st Store, r sandbox.Runner) *Toolset { return &Toolset{store: st, runner: r} }

var (
	errNoWorkspaces = errors.New("it names workspaces, and this deployment keeps none (WORKSPACES_TABLE and WORKSPACES_BUCKET are not set)")
	errNoSandbox    = errors.New("it has a sandbox, and this deployment has no sandbox backend")
)

// Offer checks that each workspace the agent names is the account's (one read each) and gives
// its tools, and the stateless bash to an agent with a sandbox and no workspace.
func (s *Toolset) Offer(ctx context.Context, b toolset.Build) (toolset.Offer, error) {
	c := b.Config
	if c.Sandbox == nil && len(c.Workspaces) == 0 {
		return toolset.Offer{}, nil
	}
	if c.Sandbox != nil && s.runner == nil {
		return toolset.Offer{}, &toolset.ConfigError{Err: errNoSandbox}
	}
	if len(c.Workspaces) > 0 && s.store == nil {
		return toolset.Offer{}, &toolset.ConfigError{Err: errNoWorkspaces}
	}
	var sb agentconfig.Sandbox
	if c.Sandbox != nil {
		sb = *c.Sandbox
	}
	base := baseRequest(sb, b.Vars)
	if len(c.Workspaces) == 0 {
		return toolset.Offer{Tools: []tool.Tool{s.scratchBash(sb, base)}}, nil
	}
	var tools []tool.Tool
	var prompt strings.Builder
	prompt.WriteString("\n\n## Workspaces\n\nYour files persist in workspaces, each a versioned file tree; give paths relative to its root (notes/plan.md), never absolute or with ..:\n\n")
	for i, w := range c.Workspaces {
		if _, err := s.store.Get(ctx, b.AccountID, w.Name); errors.Is(err, workspaces.ErrNotFound) {
			return toolset.Offer{}, &toolset.ConfigError{Err: fmt.Errorf("workspaces[%d].name: there is no workspace named %s in this account", i, w.Name)}
		} else if err != nil {
			return toolset.Offer{}, fmt.Errorf("reading workspace %s: %w", w.Name, err)
		}
		ws := &workspace{store: s.store, runner: s.runner, accountID: b.AccountID, agentID: b.AgentID, name: w.Name, bashBase: base}
		var names []string
		for _, t := range ws.tools(c.HasSandbox(w)) {
			t.Approval = Approval(w.PermissionMode, t.Name)
			t.Name = c.ToolName(w, t.Name)
			tools = append(tools, t)
			names = append(names, t.Name)
		}
		fmt.Fprintf(&prompt, "- %s: %s\n", w.Name, strings.Join(names, ", "))
	}
	return toolset.Offer{Tools: tools, System: strings.TrimRight(prompt.String(), "\n")}, nil
}

// Approval is the policy of a workspace's tool (agentconfig.Read…) in a permission mode ("" is
// standard): nil runs calls freely; the rest hold them for the user's approval.
func Approval(mode, name string) *approval.Policy {
	edits := name == agentconfig.Write || name == agentconfig.Edit
	switch mode {
	case agentconfig.Unrestricted:
		return nil
	case agentconfig.Strict:
		return approval.Always()
	case agentconfig.AcceptEdits:
		if name == agentconfig.Bash {
			return approval.Always()
		}
	case agentconfig.MemoryMode:
		if name == agentconfig.Bash {
			return approval.Always()
		}
		if edits {
			return outsideMemory
		}
	default:
		if edits || name == agentconfig.Bash {
			return approval.Always()
		}
	}
	return nil
}

// outsideMemory holds a write or edit unless its path is under memory/.
var outsideMemory = func() *approval.Policy {
	p, err := approval.Parse(json.RawMessage(`{"rules":[{"if":{"properties":{"path":{"type":"string","pattern":"^memory/"}}},"then":"not-applicable"}],"otherwise":"user-approval"}`))
	if err != nil {
		panic(err)
	}
	return p
}()

// workspace is one workspace's tools for one agent's turn.
type workspace struct {
	store              Store
	runner             sandbox.Runner
	accountID, agentID string
	name               string
	// bashBase is what each bash call starts from (baseRequest).
	bashBase sandbox.Request
	seen     Seen
}

// Seen is the version at which a turn last read or wrote each path of a workspace: a write
// commits over it, so another writer's change since is a conflict rather than lost. The zero
// value has seen nothing.
type Seen struct {
	mu sync.Mutex
	at map[string]int64
}

// Saw notes that the turn saw path at version (read it, wrote it, or found it missing).
func (s *Seen) Saw(path string, version int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[string]int64{}
	}
	s.at[path] = version
}

// Base is the version a write of path commits over: the one the turn last saw it at, else the
// latest.
func (s *Seen) Base(path string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.at[path]; ok {
		return v
	}
	return workspaces.Latest
}

// author is who a commit of the call ctx runs is by.
func (w *workspace) author(ctx context.Context) workspaces.Author {
	a := workspaces.Author{Kind: workspaces.ByTool, AgentID: w.agentID, ToolCallID: tool.CallIDFrom(ctx)}
	if t, ok := tool.TurnFrom(ctx).(Turn); ok {
		_, a.ConversationID = t.Thread()
	}
	return a
}

// tools are the workspace's tools by their plain names: all of them when it has a sandbox, read
// and glob alone when it has none.
func (w *workspace) tools(sandboxed bool) []tool.Tool {
	out := []tool.Tool{
		{Name: agentconfig.Read, Description: "Reads a text file of the workspace, with line numbers (as cat -n). offset is the first line (from 1), limit how many lines; a long file comes in parts.",
			InputSchema: Schema(`"path":`+pathProp+`,"offset":{"type":"integer","minimum":1},"limit":{"type":"integer","minimum":1}`, "path"), Execute: w.read},
		{Name: agentconfig.Write, Description: "Writes a file of the workspace, creating it or replacing all it held, as one commit.",
			InputSchema: Schema(`"path":`+pathProp+`,"content":{"type":"string"}`, "path", "content"), Execute: w.write},
		{Name: agentconfig.Edit, Description: "Replaces old_string, which must occur exactly once in the file, with new_string, as one commit. Read the file first; include enough context to make old_string unique.",
			InputSchema: Schema(`"path":`+pathProp+`,"old_string":{"type":"string","minLength":1},"new_string":{"type":"string"}`, "path", "old_string", "new_string"), Execute: w.edit},
		{Name: agentconfig.Glob, Description: "Lists the workspace's files whose paths match a pattern, sorted: * and ? match within a path segment, ** any number of segments (**/*.md).",
			InputSchema: Schema(`"pattern":{"type":"string","minLength":1}`, "pattern"), Execute: w.glob},
		{Name: agentconfig.Grep, Description: "Searches the workspace's text files for a regular expression (Go syntax), line by line; path narrows it to a file or a directory. Matches come as file:line: text.",
			InputSchema: Schema(`"pattern":{"type":"string","minLength":1},"path":`+pathProp, "pattern"), Execute: w.grep},
	}
	if !sandboxed {
		return []tool.Tool{out[0], out[3]}
	}
	out = append(out, tool.Tool{Name: agentconfig.Bash, Description: bashDescription + " It runs in a copy of the workspace's latest version, the workspace root its working directory; the files it creates, changes or deletes are committed back as one commit.",
		InputSchema: bashSchema, Execute: w.bash})
	return out
}

const pathProp = `{"type":"string","description":"A path relative to the workspace root, such as notes/plan.md."}`

// Schema is a tool's input schema of props (JSON object members), requiring required, refusing
// other properties.
func Schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(append([]string{}, required...)) // [], never null
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
}

// checkPath refuses a path outside the workspace's grammar, naming it.
func checkPath(p string) error {
	if problem := workspaces.PathProblem(p); problem != "" {
		return fmt.Errorf("path %q %s", p, problem)
	}
	return nil
}

// readError says what a read of path found instead of a file.
func readError(err error, name, path string) error {
	if errors.Is(err, workspaces.ErrNotFound) {
		return fmt.Errorf("%s: no file in workspace %s (glob lists its files)", path, name)
	}
	return err
}

// CommitError says why a commit of a tool's call did not land, and what to do.
func CommitError(err error) error {
	var conflict *workspaces.Conflict
	if errors.As(err, &conflict) {
		return fmt.Errorf("not committed: %w; read the file again and redo the change", err)
	}
	return fmt.Errorf("not committed: %w", err)
}
