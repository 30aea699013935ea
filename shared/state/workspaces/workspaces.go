// Package workspaces keeps workspaces: named file trees an account owns, versioned like git.
// Every change is a commit, numbered 1, 2, 3… after the empty tree of version 0, and every
// version stays readable.
//
// Content is addressed by its SHA-256 in S3, per account: a file's bytes under
// workspaces/<accountId>/blobs/<sha256>, a commit's tree (path → blob and size) under
// workspaces/<accountId>/trees/<sha256>. DynamoDB holds a row per workspace (its head: the latest
// version and its tree) and a row per commit.
package workspaces

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/wire/ids"

	"github.com/agentharness/harness/shared/wire/relpath"
)

// Limits. A file's size is bounded by what an API Gateway request and a Lambda payload carry;
// a commit's changed paths must fit its DynamoDB row (400 KB) at the longest paths.
const (
	MaxFileBytes = 5 << 20
	MaxFiles     = 10_000
	MaxChanges   = 256
)

// Latest names a workspace's latest version where a version is asked for; as a commit's base,
// it commits over whatever the latest version is.
const Latest int64 = -1

// ErrNotFound: no such workspace (or not the account's), version or path.
var ErrNotFound = errors.New("not found")

// ErrExists: a workspace of that name exists already.
var ErrExists = errors.New("workspace exists")

// ErrBusy: a commit kept being overtaken by other writers' commits and gave up.
var ErrBusy = errors.New("workspace busy")

// Conflict is a commit refused because paths it changes were changed by another writer since
// its base; Head is the latest version, to read and commit over again.
type Conflict struct {
	Paths []string
	Head  int64
}

func (c *Conflict) Error() string {
	if len(c.Paths) == 0 {
		return fmt.Sprintf("the workspace moved to version %d", c.Head)
	}
	return fmt.Sprintf("%s changed since the base version (the workspace is at version %d)", strings.Join(c.Paths, ", "), c.Head)
}

// InvalidError is a refused input: Field names it.
type InvalidError struct {
	Field, Problem string
	// TooLarge marks a refusal for size.
	TooLarge bool
}

func (e *InvalidError) Error() string { return e.Field + " " + e.Problem }

// Workspace is a workspace's head.
type Workspace struct {
	Name      string    `json:"name"`
	Version   int64     `json:"version"`
	Files     int64     `json:"files"`
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Tree is the SHA-256 of the version's tree object.
	Tree string `json:"-"`
}

// Author kinds: who made a commit.
const (
	ByAPI   = "api"
	ByAgent = "agent"
	ByTool  = "tool"
)

// Author is who made a commit, with what is known of the turn it came from.
type Author struct {
	Kind           string `json:"kind"`
	AgentID        string `json:"agentId,omitempty"`
	ConversationID string `json:"conversationId,omitempty"`
	ToolCallID     string `json:"toolCallId,omitempty"`
}

// Change is one path's part of a commit: Data written to Path, or Path deleted.
type Change struct {
	Path   string
	Data   []byte
	Delete bool
}

// How a commit or a diff changed a path.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
)

// Entry is a file in a tree: its blob's SHA-256 and its size.
type Entry struct {
	Blob string `json:"blob"`
	Size int64  `json:"size"`
}

// PathChange is how a path differs between two versions: Before is nil when it was added,
// After when it was deleted.
type PathChange struct {
	Path   string `json:"path"`
	Change string `json:"change"`
	Before *Entry `json:"before,omitempty"`
	After  *Entry `json:"after,omitempty"`
}

// Commit is one version.
type Commit struct {
	Version int64        `json:"version"`
	Parent  int64        `json:"parent"`
	At      time.Time    `json:"at"`
	Author  Author       `json:"author"`
	Tree    string       `json:"tree"`
	Changes []PathChange `json:"changes"`
}

// NameProblem says what keeps name from naming a workspace; empty when nothing does. Names
// follow the id grammar, which keeps them out of the '#' the table's keys are joined with.
func NameProblem(name string) string { return ids.Problem(name) }

// PathProblem says what keeps p from being a path in a workspace; empty when nothing does.
// Paths are clean and relative (a/b.txt), so that one path names one file wherever it is used.
func PathProblem(p string) string { return relpath.Problem(p) }

// checkPath is PathProblem as an error naming the field.
func checkPath(p string) error {
	if problem := PathProblem(p); problem != "" {
		return &InvalidError{Field: "path", Problem: problem}
	}
	return nil
}
