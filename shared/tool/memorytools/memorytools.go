// Package memorytools offers config.memory: an agent's memory that outlives a conversation, as
// files of one of the account's workspaces, in a folder per agent, end user or conversation
// (Folder). Files under the folder's system/ are pinned into the system prompt, within
// PinnedFileLimit each and PinnedTotalLimit together; the rest are read on demand. The tools
// read, list, insert into, replace in and rewrite the folder's files, each write one commit.
// They are the agent's own notes, so no call waits for approval.
package memorytools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool/toolset"
	"github.com/agentharness/harness/shared/tool/workspacetools"
	"github.com/agentharness/harness/shared/wire/relpath"
)

// Limits of the pinned files, so that memory costs the prompt a bounded share of its context.
const (
	PinnedFileLimit  = 8 << 10
	PinnedTotalLimit = 32 << 10
)

// SystemDir is the folder, under the scope's, whose files are pinned.
const SystemDir = "system"

// AccountEndUser is the end-user folder of turns the account runs itself, with no end user.
const AccountEndUser = "_account"

// Store is what the tools read and commit of an account's workspaces (shared/state/workspaces).
type Store interface {
	Tree(ctx context.Context, accountID, name string, version int64) (*workspaces.Tree, error)
	Blob(ctx context.Context, accountID, sum string) ([]byte, error)
	Commit(ctx context.Context, accountID, name string, base int64, changes []workspaces.Change, author workspaces.Author) (workspaces.Commit, error)
}

// Toolset offers config.memory (turn.Toolset).
type Toolset struct{ store Store }

// New returns the toolset over the workspaces in st; a nil st refuses agents with memory.
func New(st Store) *Toolset { return &Toolset{store: st} }

var errNoWorkspaces = errors.New("it has memory, and this deployment keeps no workspaces (WORKSPACES_TABLE and WORKSPACES_BUCKET are not set)")

// Folder is the folder, in the memory workspace, of the memory of agent agentID with scope,
// for the conversation conversationID of endUser (empty: the account's own). An id that does
// not make one path segment is refused, never escaped: two ids must not share a folder.
func Folder(scope, agentID, conversationID, endUser string) (string, error) {
	base := "agents/" + agentID
	switch scope {
	case agentconfig.MemoryEndUser:
		switch {
		case endUser == "":
			endUser = AccountEndUser
		case endUser == AccountEndUser:
			return "", fmt.Errorf("the end user %q has the name of the account's own memory folder, so it has no memory of its own", endUser)
		}
		if p := segmentProblem(endUser); p != "" {
			return "", fmt.Errorf("the end user's id %q cannot name a memory folder: it %s", endUser, p)
		}
		return base + "/end-users/" + endUser, nil
	case agentconfig.MemoryConversation:
		if p := segmentProblem(conversationID); p != "" {
			return "", fmt.Errorf("the conversation's id %q cannot name a memory folder: it %s", conversationID, p)
		}
		return base + "/conversations/" + conversationID, nil
	}
	return base, nil
}

// segmentProblem says what keeps s from being one segment of a path; empty when nothing does.
func segmentProblem(s string) string {
	if strings.Contains(s, "/") {
		return "holds a /"
	}
	return relpath.Problem(s)
}

// Offer reads the agent's memory folder at the latest version of its workspace and gives the
// tools, with the pinned files and the list of the others in the system prompt. An agent built
// outside a conversation (to list its tools) gets the tools alone.
func (s *Toolset) Offer(ctx context.Context, b toolset.Build) (toolset.Offer, error) {
	mc := b.Config.Memory
	if mc == nil {
		return toolset.Offer{}, nil
	}
	if s.store == nil {
		return toolset.Offer{}, &toolset.ConfigError{Err: errNoWorkspaces}
	}
	m := &memory{store: s.store, accountID: b.AccountID, name: mc.Workspace,
		author: workspaces.Author{Kind: workspaces.ByTool, AgentID: b.AgentID, ConversationID: b.ConversationID}}
	if b.ConversationID == "" {
		return toolset.Offer{Tools: m.tools()}, nil
	}
	folder, err := Folder(mc.Scope, b.AgentID, b.ConversationID, b.EndUser)
	if err != nil {
		return toolset.Offer{}, &toolset.ConfigError{Err: fmt.Errorf("memory: %w", err)}
	}
	m.folder = folder
	t, err := s.store.Tree(ctx, b.AccountID, mc.Workspace, workspaces.Latest)
	if errors.Is(err, workspaces.ErrNotFound) {
		return toolset.Offer{}, &toolset.ConfigError{Err: fmt.Errorf("memory.workspace: there is no workspace named %s in this account", mc.Workspace)}
	}
	if err != nil {
		return toolset.Offer{}, fmt.Errorf("reading memory workspace %s: %w", mc.Workspace, err)
	}
	prompt, err := m.prompt(ctx, mc.Scope, t)
	if err != nil {
		return toolset.Offer{}, err
	}
	return toolset.Offer{Tools: m.tools(), System: prompt}, nil
}

// memory is one agent's memory folder for one turn.
type memory struct {
	store     Store
	accountID string
	// name is the memory workspace's, folder the scope's folder in it ("" outside a
	// conversation, where no call runs).
	name, folder string
	// author is who the turn's commits are by, less the call.
	author workspaces.Author
	seen   workspacetools.Seen
}

// Pinned reports whether path, relative to the scope's folder, is pinned into the prompt.
func Pinned(path string) bool { return strings.HasPrefix(path, SystemDir+"/") }

// file is one file of the memory folder, by its path relative to the folder.
type file struct {
	path string
	workspaces.Entry
}

// files are the files of the memory folder in t, sorted by path.
func (m *memory) files(t *workspaces.Tree) []file {
	var out []file
	for p, e := range t.Files {
		if rel, ok := strings.CutPrefix(p, m.folder+"/"); ok {
			out = append(out, file{rel, e})
		}
	}
	slices.SortFunc(out, func(a, b file) int { return strings.Compare(a.path, b.path) })
	return out
}

// scopeText says whose memory a scope's is.
var scopeText = map[string]string{
	agentconfig.MemoryAgent:        "shared by all your conversations",
	agentconfig.MemoryEndUser:      "shared by the conversations of the user you are talking to",
	agentconfig.MemoryConversation: "kept for this conversation",
}

// prompt is the system prompt's Memory section: the pinned files, each with its size against
// PinnedFileLimit and cut past it, within PinnedTotalLimit in all, then the other files' paths.
func (m *memory) prompt(ctx context.Context, scope string, t *workspaces.Tree) (string, error) {
	var pinned, other strings.Builder
	var total int64
	for _, f := range m.files(t) {
		if !Pinned(f.path) {
			fmt.Fprintf(&other, "- %s (%d bytes)\n", f.path, f.Size)
			continue
		}
		data, err := m.store.Blob(ctx, m.accountID, f.Blob)
		if err != nil {
			return "", fmt.Errorf("reading memory file %s: %w", f.path, err)
		}
		fmt.Fprintf(&pinned, "\n### %s (%d of %d bytes)\n\n", f.path, f.Size, PinnedFileLimit)
		show := min(int64(len(data)), PinnedFileLimit, max(PinnedTotalLimit-total, 0))
		pinned.WriteString(cut(data, show))
		total += show
		if show < f.Size {
			fmt.Fprintf(&pinned, "\n[cut at %d of its %d bytes: a pinned file shows at most %d bytes, and all of them %d; shorten it with %s]\n", show, f.Size, PinnedFileLimit, PinnedTotalLimit, agentconfig.MemoryRewrite)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n\n## Memory\n\nYou have a memory that outlives this conversation, %s: files you keep with %s, paths relative to your memory folder (notes/topics.md). Files under %s/ are pinned here, each at most %d bytes and %d in all; read the others with %s when you need them. Keep what you will want to know next time.\n",
		scopeText[scope], strings.Join(agentconfig.MemoryTools, ", "), SystemDir, PinnedFileLimit, PinnedTotalLimit, agentconfig.MemoryRead)
	if pinned.Len() == 0 {
		fmt.Fprintf(&b, "\nNo pinned files (0 of %d bytes).\n", PinnedTotalLimit)
	} else {
		fmt.Fprintf(&b, "\nPinned files (%d of %d bytes):\n%s", total, PinnedTotalLimit, pinned.String())
	}
	if other.Len() == 0 {
		b.WriteString("\nNo other files.")
	} else {
		fmt.Fprintf(&b, "\nOther files (read with %s):\n%s", agentconfig.MemoryRead, other.String())
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// cut is the first n bytes of data as text, ending at a character's boundary, with a newline.
func cut(data []byte, n int64) string {
	s := strings.ToValidUTF8(string(data[:n]), "")
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}
