package appserver

// The memory commands (protocol_v2's list_memory, read_memory_file, write_memory_file,
// delete_memory_file, memory_history, memory_file_at_ref, memory_commit_diff) on an agent's
// memory (config.memory): the files of its scope's folder in the memory workspace, and the
// workspace's commits that touched them. A commit's sha is its version number.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool/memorytools"
	"github.com/agentharness/harness/shared/wire/relpath"
)

// Bounds of the memory commands' answers.
const (
	// maxMemoryList bounds list_memory's entries; maxMemoryListContent the content it shows of
	// each (a longer file's is left out: read it with read_memory_file).
	maxMemoryList        = 500
	maxMemoryListContent = 16 << 10
	// defaultMemoryHistory and maxMemoryHistory bound memory_history's commits, and
	// memoryHistoryScan the workspace commits it looks through for them.
	defaultMemoryHistory = 50
	maxMemoryHistory     = 200
	memoryHistoryScan    = 2000
)

// memorySpace is an agent's memory as one connection reaches it.
type memorySpace struct {
	store     *workspaces.Store
	accountID string
	workspace string
	// folder is the scope's folder in the workspace, without a trailing slash.
	folder string
}

// memory resolves the memory of agentID the connection reaches: the account's secret and an
// end-user token alike reach an agent-scoped memory's folder only by the secret, an endUser-
// scoped one's folder of their own end user (the account: "_account"); a conversation's memory
// has a folder per conversation, which these commands, naming no conversation, do not reach.
func (c *call) memory(ctx context.Context, agentID string) (memorySpace, error) {
	st := c.g.h.opts.Workspaces
	switch {
	case st == nil:
		return memorySpace{}, errors.New("this deployment keeps no workspaces, so no agent keeps memory")
	case agentID == "":
		return memorySpace{}, errors.New("agent_id is required")
	case c.conn.Token() && !c.caller().Allows(agentID):
		return memorySpace{}, fmt.Errorf("agent %s not found", agentID)
	}
	cfg, err := c.g.h.opts.Agents.Load(ctx, c.conn.AccountID, agentID)
	if err != nil {
		return memorySpace{}, errors.New(c.refusal(ctx, err))
	}
	if cfg.Memory == nil {
		return memorySpace{}, fmt.Errorf("agent %s keeps no memory (its config has no memory)", agentID)
	}
	var folder string
	switch cfg.Memory.Scope {
	case agentconfig.MemoryConversation:
		return memorySpace{}, fmt.Errorf("agent %s keeps a memory per conversation; read it over the workspace files API (agents/%s/conversations/<conversationId>/)", agentID, agentID)
	case agentconfig.MemoryEndUser:
		folder, err = memorytools.Folder(cfg.Memory.Scope, agentID, "", c.conn.EndUser)
	default:
		if c.conn.Token() {
			return memorySpace{}, fmt.Errorf("agent %s's memory is shared by all its conversations: only the account secret reaches it", agentID)
		}
		folder, err = memorytools.Folder(cfg.Memory.Scope, agentID, "", "")
	}
	if err != nil {
		return memorySpace{}, err
	}
	return memorySpace{store: st, accountID: c.conn.AccountID, workspace: cfg.Memory.Workspace, folder: folder}, nil
}

// path is p, a path relative to the memory's folder, as a path of the workspace.
func (m memorySpace) path(field, p string) (string, error) {
	if problem := relpath.Problem(p); problem != "" {
		return "", fmt.Errorf("%s %q %s", field, p, problem)
	}
	return m.folder + "/" + p, nil
}

// inside reports whether the workspace path p is in the memory's folder.
func (m memorySpace) inside(p string) bool { return strings.HasPrefix(p, m.folder+"/") }

// memoryCommand is the fields of the memory commands.
type memoryCommand struct {
	AgentID       string  `json:"agent_id"`
	Path          string  `json:"path"`
	FilePath      string  `json:"file_path"`
	Content       *string `json:"content"`
	Encoding      string  `json:"encoding"`
	Ref           string  `json:"ref"`
	SHA           string  `json:"sha"`
	Limit         int     `json:"limit"`
	CommitMessage string  `json:"commit_message"`
}

// memoryCommands answers a memory command of type typ; handled is false for another type.
func (c *call) memoryCommands(ctx context.Context) (handled bool, err error) {
	handlers := map[string]func(context.Context, memorySpace, memoryCommand) (map[string]any, error){
		"list_memory": c.listMemory, "read_memory_file": c.readMemoryFile, "write_memory_file": c.writeMemoryFile,
		"delete_memory_file": c.deleteMemoryFile, "memory_history": c.memoryHistory,
		"memory_file_at_ref": c.memoryFileAtRef, "memory_commit_diff": c.memoryCommitDiff,
	}
	h, ok := handlers[c.cmd.Type]
	if !ok {
		return false, nil
	}
	resp := c.cmd.Type + "_response"
	var cmd memoryCommand
	if err := c.decode(&cmd); err != nil {
		return true, c.fail(ctx, resp, err.Error())
	}
	m, err := c.memory(ctx, cmd.AgentID)
	if err != nil {
		return true, c.fail(ctx, resp, err.Error())
	}
	out, err := h(ctx, m, cmd)
	if err != nil {
		var refused memoryError
		if errors.As(err, &refused) {
			return true, c.fail(ctx, resp, err.Error())
		}
		return true, c.fail(ctx, resp, c.refusal(ctx, err))
	}
	out["type"], out["success"] = resp, true
	return true, c.reply(ctx, out)
}

// memoryError is a command the memory refuses as asked (a path, a ref): its text is the answer.
type memoryError struct{ error }

func refuse(format string, args ...any) error { return memoryError{fmt.Errorf(format, args...)} }

// listMemory lists the folder's files: each with its path in the folder, whether it is pinned
// (system/), its size and, up to maxMemoryListContent, its content.
func (c *call) listMemory(ctx context.Context, m memorySpace, _ memoryCommand) (map[string]any, error) {
	t, err := m.store.Tree(ctx, m.accountID, m.workspace, workspaces.Latest)
	if err != nil {
		return nil, err
	}
	var paths []string
	for p := range t.Files {
		if m.inside(p) {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	total := len(paths)
	entries := []map[string]any{}
	for _, p := range paths[:min(len(paths), maxMemoryList)] {
		e := t.Files[p]
		rel := strings.TrimPrefix(p, m.folder+"/")
		entry := map[string]any{"relative_path": rel, "is_system": memorytools.Pinned(rel), "description": nil, "size": e.Size, "content": ""}
		if e.Size <= maxMemoryListContent {
			data, err := m.store.Blob(ctx, m.accountID, e.Blob)
			if err != nil {
				return nil, err
			}
			if utf8.Valid(data) {
				entry["content"] = string(data)
			}
		}
		entries = append(entries, entry)
	}
	return map[string]any{"entries": entries, "done": true, "total": total, "memfs_enabled": true, "memfs_initialized": true}, nil
}

// readMemoryFile reads one file, as utf8 (the default; a file that is not UTF-8 is refused as
// such) or base64.
func (c *call) readMemoryFile(ctx context.Context, m memorySpace, cmd memoryCommand) (map[string]any, error) {
	p, err := m.path("path", cmd.Path)
	if err != nil {
		return nil, memoryError{err}
	}
	enc, err := encoding(cmd.Encoding)
	if err != nil {
		return nil, err
	}
	f, err := m.store.File(ctx, m.accountID, m.workspace, p, workspaces.Latest)
	if errors.Is(err, workspaces.ErrNotFound) {
		return nil, refuse("no memory file %s", cmd.Path)
	}
	if err != nil {
		return nil, err
	}
	content, err := encode(f.Data, enc)
	if err != nil {
		return nil, err
	}
	return map[string]any{"agent_id": cmd.AgentID, "path": cmd.Path, "content": content, "encoding": enc}, nil
}

// writeMemoryFile writes one file as one commit. commit_message is not kept: a commit records
// its author (the API) and what it changed.
func (c *call) writeMemoryFile(ctx context.Context, m memorySpace, cmd memoryCommand) (map[string]any, error) {
	p, err := m.path("path", cmd.Path)
	if err != nil {
		return nil, memoryError{err}
	}
	if cmd.Content == nil {
		return nil, refuse("content is required")
	}
	enc, err := encoding(cmd.Encoding)
	if err != nil {
		return nil, err
	}
	data := []byte(*cmd.Content)
	if enc == "base64" {
		if data, err = base64.StdEncoding.DecodeString(*cmd.Content); err != nil {
			return nil, refuse("content is not base64: %v", err)
		}
	}
	commit, err := m.store.Commit(ctx, m.accountID, m.workspace, workspaces.Latest, []workspaces.Change{{Path: p, Data: data}}, workspaces.Author{Kind: workspaces.ByAPI})
	if err != nil {
		return nil, err
	}
	return map[string]any{"agent_id": cmd.AgentID, "path": cmd.Path, "committed": true, "commit_sha": sha(commit.Version)}, nil
}

// deleteMemoryFile deletes one file as one commit; a file already absent commits nothing.
func (c *call) deleteMemoryFile(ctx context.Context, m memorySpace, cmd memoryCommand) (map[string]any, error) {
	p, err := m.path("path", cmd.Path)
	if err != nil {
		return nil, memoryError{err}
	}
	out := map[string]any{"agent_id": cmd.AgentID, "path": cmd.Path, "committed": false}
	if _, err := m.store.File(ctx, m.accountID, m.workspace, p, workspaces.Latest); errors.Is(err, workspaces.ErrNotFound) {
		return out, nil
	} else if err != nil {
		return nil, err
	}
	commit, err := m.store.Commit(ctx, m.accountID, m.workspace, workspaces.Latest, []workspaces.Change{{Path: p, Delete: true}}, workspaces.Author{Kind: workspaces.ByAPI})
	if errors.Is(err, workspaces.ErrNotFound) {
		return out, nil // deleted meanwhile
	}
	if err != nil {
		return nil, err
	}
	out["committed"], out["commit_sha"] = true, sha(commit.Version)
	return out, nil
}

// memoryHistory lists, newest first, the commits that changed the folder (or the one file
// file_path), at most limit of them (default 50, at most 200), from the workspace's latest
// memoryHistoryScan commits.
func (c *call) memoryHistory(ctx context.Context, m memorySpace, cmd memoryCommand) (map[string]any, error) {
	limit := cmd.Limit
	switch {
	case limit == 0:
		limit = defaultMemoryHistory
	case limit < 0 || limit > maxMemoryHistory:
		return nil, refuse("limit %d is out of range (1 to %d)", limit, maxMemoryHistory)
	}
	only := ""
	if cmd.FilePath != "" {
		p, err := m.path("file_path", cmd.FilePath)
		if err != nil {
			return nil, memoryError{err}
		}
		only = p
	}
	commits := []map[string]any{}
	cursor, scanned := "", 0
	for len(commits) < limit && scanned < memoryHistoryScan {
		page, next, err := m.store.History(ctx, m.accountID, m.workspace, 100, cursor)
		if err != nil {
			return nil, err
		}
		for _, cm := range page {
			var touched []string
			for _, ch := range cm.Changes {
				if (only == "" && m.inside(ch.Path)) || ch.Path == only {
					touched = append(touched, strings.TrimPrefix(ch.Path, m.folder+"/"))
				}
			}
			if len(touched) > 0 && len(commits) < limit {
				commits = append(commits, map[string]any{"sha": sha(cm.Version), "message": commitMessage(cm.Author, touched),
					"timestamp": cm.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), "author_name": authorName(cm.Author)})
			}
		}
		scanned += len(page)
		if next == "" {
			break
		}
		cursor = next
	}
	return map[string]any{"file_path": cmd.FilePath, "commits": commits}, nil
}

// memoryFileAtRef reads file_path at the commit ref; content is null where the file did not
// exist then.
func (c *call) memoryFileAtRef(ctx context.Context, m memorySpace, cmd memoryCommand) (map[string]any, error) {
	p, err := m.path("file_path", cmd.FilePath)
	if err != nil {
		return nil, memoryError{err}
	}
	v, err := version("ref", cmd.Ref)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"file_path": cmd.FilePath, "ref": cmd.Ref, "content": nil}
	f, err := m.store.File(ctx, m.accountID, m.workspace, p, v)
	if errors.Is(err, workspaces.ErrNotFound) {
		if _, verr := m.store.Version(ctx, m.accountID, m.workspace, v); errors.Is(verr, workspaces.ErrNotFound) {
			return nil, refuse("ref %s is no commit of the memory's workspace", cmd.Ref)
		}
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	if utf8.Valid(f.Data) {
		out["content"] = string(f.Data)
	} else {
		out["content"] = base64.StdEncoding.EncodeToString(f.Data)
	}
	return out, nil
}

// memoryCommitDiff is the commit sha's change to the memory's files as a unified diff (git's
// format, paths relative to the folder); changes outside the folder are left out.
func (c *call) memoryCommitDiff(ctx context.Context, m memorySpace, cmd memoryCommand) (map[string]any, error) {
	v, err := version("sha", cmd.SHA)
	if err != nil {
		return nil, err
	}
	cm, err := m.store.Version(ctx, m.accountID, m.workspace, v)
	if errors.Is(err, workspaces.ErrNotFound) {
		return nil, refuse("sha %s is no commit of the memory's workspace", cmd.SHA)
	}
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, ch := range cm.Changes {
		if !m.inside(ch.Path) {
			continue
		}
		before, err := m.fileAt(ctx, ch.Path, cm.Parent)
		if err != nil {
			return nil, err
		}
		after, err := m.fileAt(ctx, ch.Path, cm.Version)
		if err != nil {
			return nil, err
		}
		b.WriteString(unifiedDiff(strings.TrimPrefix(ch.Path, m.folder+"/"), before, after))
	}
	return map[string]any{"sha": cmd.SHA, "diff": b.String()}, nil
}

// fileAt is the file at p at version v, nil where there was none (v 0: before the first commit).
func (m memorySpace) fileAt(ctx context.Context, p string, v int64) ([]byte, error) {
	if v <= 0 {
		return nil, nil
	}
	f, err := m.store.File(ctx, m.accountID, m.workspace, p, v)
	if errors.Is(err, workspaces.ErrNotFound) {
		return nil, nil
	}
	return f.Data, err
}

func sha(v int64) string { return strconv.FormatInt(v, 10) }

// version reads a commit's sha, its version number.
func version(field, s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 1 {
		return 0, refuse("%s %q is not a commit of the memory (a commit's sha is its version number, as memory_history gives it)", field, s)
	}
	return v, nil
}

// encoding checks a command's encoding: "utf8" (the default) or "base64".
func encoding(enc string) (string, error) {
	switch enc {
	case "", "utf8":
		return "utf8", nil
	case "base64":
		return enc, nil
	}
	return "", refuse("encoding %q is not utf8 or base64", enc)
}

func encode(data []byte, enc string) (string, error) {
	if enc == "base64" {
		return base64.StdEncoding.EncodeToString(data), nil
	}
	if !utf8.Valid(data) {
		return "", refuse("the file is not UTF-8 text: read it with encoding base64")
	}
	return string(data), nil
}

// commitMessage describes a commit, which keeps no message of its own: who made it, and the
// memory files it changed.
func commitMessage(a workspaces.Author, paths []string) string {
	who := map[string]string{workspaces.ByAPI: "the account", workspaces.ByAgent: "agent " + a.AgentID, workspaces.ByTool: "agent " + a.AgentID + "'s tool call " + a.ToolCallID}[a.Kind]
	if who == "" {
		who = a.Kind
	}
	return who + " changed " + strings.Join(paths, ", ")
}

func authorName(a workspaces.Author) any {
	if a.AgentID != "" {
		return a.AgentID
	}
	return a.Kind
}
