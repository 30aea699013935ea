package memorytools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/workspacetools"
)

const pathProp = `{"type":"string","description":"A path relative to your memory folder, such as notes/topics.md; files under system/ are pinned into your instructions."}`

// tools are the memory's tools; none waits for approval (Approval nil): they write only the
// agent's own notes.
func (m *memory) tools() []tool.Tool {
	return []tool.Tool{
		{Name: agentconfig.MemoryRead, Description: "Reads a file of your memory, with line numbers (as cat -n). offset is the first line (from 1), limit how many lines; a long file comes in parts.",
			InputSchema: workspacetools.Schema(`"path":`+pathProp+`,"offset":{"type":"integer","minimum":1},"limit":{"type":"integer","minimum":1}`, "path"), Execute: m.read},
		{Name: agentconfig.MemoryList, Description: "Lists the files of your memory with their sizes; pinned ones (under system/) are marked.",
			InputSchema: workspacetools.Schema(``), Execute: m.list},
		{Name: agentconfig.MemoryInsert, Description: "Inserts text as whole lines into a file of your memory after line `line` (0: at the top; left out: at the end), creating the file if it is missing.",
			InputSchema: workspacetools.Schema(`"path":`+pathProp+`,"text":{"type":"string","minLength":1},"line":{"type":"integer","minimum":0}`, "path", "text"), Execute: m.insert},
		{Name: agentconfig.MemoryReplace, Description: "Replaces old_string, which must occur exactly once in the file of your memory, with new_string. Include enough context to make old_string unique.",
			InputSchema: workspacetools.Schema(`"path":`+pathProp+`,"old_string":{"type":"string","minLength":1},"new_string":{"type":"string"}`, "path", "old_string", "new_string"), Execute: m.replace},
		{Name: agentconfig.MemoryRewrite, Description: "Replaces all a file of your memory holds with content, creating it if it is missing.",
			InputSchema: workspacetools.Schema(`"path":`+pathProp+`,"content":{"type":"string"}`, "path", "content"), Execute: m.rewrite},
	}
}

var errNoFolder = errors.New("memory is kept per conversation, and this call runs in none")

// full is the workspace path of p, a path relative to the memory folder.
func (m *memory) full(p string) (string, error) {
	if m.folder == "" {
		return "", errNoFolder
	}
	if problem := workspaces.PathProblem(p); problem != "" {
		return "", fmt.Errorf("path %q %s", p, problem)
	}
	return m.folder + "/" + p, nil
}

// file reads p at the latest version, text only; exists is false when there is no such file
// (nor a folder there). Only what the model is shown counts as seen (memory_read): a change
// commits over that version, so another writer's change since is a conflict, however often the
// change itself read the file.
func (m *memory) file(ctx context.Context, p string) (data []byte, version int64, exists bool, err error) {
	full, err := m.full(p)
	if err != nil {
		return nil, 0, false, err
	}
	t, err := m.store.Tree(ctx, m.accountID, m.name, workspaces.Latest)
	if err != nil {
		return nil, 0, false, err
	}
	e, ok := t.File(full)
	if !ok {
		if t.IsDir(full) {
			return nil, 0, false, fmt.Errorf("%s is a folder of your memory (%s lists its files)", p, agentconfig.MemoryList)
		}
		return nil, t.Version, false, nil
	}
	if data, err = m.store.Blob(ctx, m.accountID, e.Blob); err != nil {
		return nil, 0, false, err
	}
	if !utf8.Valid(data) {
		return nil, 0, false, fmt.Errorf("%s is a binary file of %d bytes; memory tools read text only", p, len(data))
	}
	return data, t.Version, true, nil
}

// existing is file for a change that needs the file to exist, with the version to commit over:
// the one the turn last saw the path at, so another writer's change since is a conflict.
func (m *memory) existing(ctx context.Context, p string) ([]byte, int64, error) {
	base := m.seen.Base(p)
	data, version, exists, err := m.file(ctx, p)
	if err == nil && !exists {
		err = errMissing(p)
	}
	if base == workspaces.Latest {
		base = version
	}
	return data, base, err
}

func errMissing(p string) error {
	return fmt.Errorf("%s: no such file in your memory (%s lists them)", p, agentconfig.MemoryList)
}

func (m *memory) read(ctx context.Context, input json.RawMessage) (any, error) {
	var args struct {
		Path          string
		Offset, Limit int
	}
	if err := json.Unmarshal(input, &args); err != nil {
		return nil, err
	}
	data, version, exists, err := m.file(ctx, args.Path)
	if err == nil && !exists {
		err = errMissing(args.Path)
	}
	if err != nil {
		return nil, err
	}
	m.seen.Saw(args.Path, version)
	return workspacetools.Numbered(args.Path, version, data, args.Offset, args.Limit)
}

func (m *memory) list(ctx context.Context, _ json.RawMessage) (any, error) {
	if m.folder == "" {
		return nil, errNoFolder
	}
	t, err := m.store.Tree(ctx, m.accountID, m.name, workspaces.Latest)
	if err != nil {
		return nil, err
	}
	type listed struct {
		Path   string `json:"path"`
		Bytes  int64  `json:"bytes"`
		Pinned bool   `json:"pinned,omitempty"`
	}
	out := []listed{}
	var pinned int64
	for _, f := range m.files(t) {
		out = append(out, listed{f.path, f.Size, Pinned(f.path)})
		if Pinned(f.path) {
			pinned += f.Size
		}
	}
	return map[string]any{"version": t.Version, "files": out, "pinnedBytes": pinned, "pinnedLimit": PinnedTotalLimit, "pinnedFileLimit": PinnedFileLimit}, nil
}

func (m *memory) insert(ctx context.Context, input json.RawMessage) (any, error) {
	var args struct {
		Path, Text string
		Line       *int
	}
	if err := json.Unmarshal(input, &args); err != nil {
		return nil, err
	}
	base := m.seen.Base(args.Path)
	data, version, _, err := m.file(ctx, args.Path)
	if err != nil {
		return nil, err
	}
	if base == workspaces.Latest {
		base = version
	}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	at := len(lines)
	if args.Line != nil {
		if at = *args.Line; at > len(lines) {
			return nil, fmt.Errorf("line %d is past the end of %s, which has %d lines; leave line out to insert at the end", at, args.Path, len(lines))
		}
	}
	if at > 0 && !strings.HasSuffix(lines[at-1], "\n") {
		lines[at-1] += "\n"
	}
	text := args.Text
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	next := strings.Join(lines[:at], "") + text + strings.Join(lines[at:], "")
	return m.commit(ctx, args.Path, base, next)
}

func (m *memory) replace(ctx context.Context, input json.RawMessage) (any, error) {
	var args workspacetools.Edit
	if err := json.Unmarshal(input, &args); err != nil {
		return nil, err
	}
	data, base, err := m.existing(ctx, args.Path)
	if err != nil {
		return nil, err
	}
	edited, err := args.Apply(data)
	if err != nil {
		return nil, err
	}
	return m.commit(ctx, args.Path, base, string(edited))
}

func (m *memory) rewrite(ctx context.Context, input json.RawMessage) (any, error) {
	var args struct{ Path, Content string }
	if err := json.Unmarshal(input, &args); err != nil {
		return nil, err
	}
	return m.commit(ctx, args.Path, m.seen.Base(args.Path), args.Content)
}

// commit writes data to p as one commit over base, refusing a pinned file past its limit.
func (m *memory) commit(ctx context.Context, p string, base int64, data string) (any, error) {
	full, err := m.full(p)
	if err != nil {
		return nil, err
	}
	if Pinned(p) && len(data) > PinnedFileLimit {
		return nil, fmt.Errorf("not written: %s is pinned, and a pinned file holds at most %d bytes; this would make it %d. Keep it short, and move details to a file outside %s/", p, PinnedFileLimit, len(data), SystemDir)
	}
	author := m.author
	author.ToolCallID = tool.CallIDFrom(ctx)
	c, err := m.store.Commit(ctx, m.accountID, m.name, base, []workspaces.Change{{Path: full, Data: []byte(data)}}, author)
	if err != nil {
		return nil, workspacetools.CommitError(err)
	}
	m.seen.Saw(p, c.Version)
	return map[string]any{"path": p, "version": c.Version, "bytes": len(data)}, nil
}
