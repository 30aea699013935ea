package workspacetools

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/state/workspaces"
)

// Bounds of what one call returns, so that a large workspace costs the model a note, not its
// context.
const (
	maxReadLines  = 2000
	maxReadBytes  = 128 << 10
	maxLineRunes  = 2000
	maxGlobPaths  = 1000
	maxGrepLines  = 200
	maxGrepRunes  = 300
	maxGrepBytes  = 32 << 20 // read by one grep, across files
	maxGrepFileSz = 2 << 20  // larger files are left out of a grep
)

// file reads path at the latest version, text only, and notes the version the turn saw it at.
func (w *workspace) file(ctx context.Context, p string) ([]byte, int64, error) {
	if err := checkPath(p); err != nil {
		return nil, 0, err
	}
	t, err := w.store.Tree(ctx, w.accountID, w.name, workspaces.Latest)
	if err != nil {
		return nil, 0, readError(err, w.name, p)
	}
	e, ok := t.File(p)
	if !ok {
		if t.IsDir(p) {
			return nil, 0, fmt.Errorf("%s is a directory of workspace %s (glob lists its files)", p, w.name)
		}
		return nil, 0, readError(workspaces.ErrNotFound, w.name, p)
	}
	data, err := w.store.Blob(ctx, w.accountID, e.Blob)
	if err != nil {
		return nil, 0, err
	}
	w.seen.Saw(p, t.Version)
	if !utf8.Valid(data) {
		return nil, 0, fmt.Errorf("%s is a binary file of %d bytes; these tools read text only", p, len(data))
	}
	return data, t.Version, nil
}

func (w *workspace) read(ctx context.Context, input json.RawMessage) (any, error) {
	var args struct {
		Path          string
		Offset, Limit int
	}
	if err := json.Unmarshal(input, &args); err != nil {
		return nil, err
	}
	data, version, err := w.file(ctx, args.Path)
	if err != nil {
		return nil, err
	}
	return Numbered(args.Path, version, data, args.Offset, args.Limit)
}

// Numbered is read's result of the text data of the file path at version: its lines from
// offset (from 1; 0 is 1), at most limit (0: as many as fit), numbered as cat -n does, with a
// note saying where to read on when they do not all fit.
func Numbered(path string, version int64, data []byte, offset, limit int) (map[string]any, error) {
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	first := max(offset, 1)
	if limit <= 0 {
		limit = maxReadLines
	}
	limit = min(limit, maxReadLines)
	out := map[string]any{"path": path, "version": version, "lines": len(lines)}
	if first > len(lines) && len(lines) > 0 {
		return nil, fmt.Errorf("offset %d is past the end of %s, which has %d lines", first, path, len(lines))
	}
	var b strings.Builder
	n := first - 1
	for ; n < len(lines) && n-first+1 < limit; n++ {
		line := strings.TrimRight(lines[n], "\n")
		if utf8.RuneCountInString(line) > maxLineRunes {
			line = string([]rune(line)[:maxLineRunes]) + " [line cut]"
		}
		row := fmt.Sprintf("%6d\t%s\n", n+1, line)
		if b.Len()+len(row) > maxReadBytes && n >= first {
			break
		}
		b.WriteString(row)
	}
	out["content"] = b.String()
	if n < len(lines) {
		out["note"] = fmt.Sprintf("showing lines %d to %d of %d; read on with offset %d", first, n, len(lines), n+1)
	}
	return out, nil
}

func (w *workspace) write(ctx context.Context, input json.RawMessage) (any, error) {
	var args struct{ Path, Content string }
	if err := json.Unmarshal(input, &args); err != nil {
		return nil, err
	}
	if err := checkPath(args.Path); err != nil {
		return nil, err
	}
	return w.commit(ctx, args.Path, w.seen.Base(args.Path), []byte(args.Content))
}

// Edit is the input of edit (and of tools that edit the same way): old_string, which must occur
// exactly once in the file at path, becomes new_string.
type Edit struct {
	Path      string
	OldString string `json:"old_string"`
	NewString string `json:"new_string"`
}

// Apply is data with the edit made, or why it cannot be: old_string occurs in it never or more
// than once.
func (e Edit) Apply(data []byte) ([]byte, error) {
	switch n := strings.Count(string(data), e.OldString); n {
	case 0:
		return nil, fmt.Errorf("old_string was not found in %s; read the file and copy the text exactly", e.Path)
	case 1:
	default:
		return nil, fmt.Errorf("old_string occurs %d times in %s; add surrounding lines so that it occurs once", n, e.Path)
	}
	return []byte(strings.Replace(string(data), e.OldString, e.NewString, 1)), nil
}

func (w *workspace) edit(ctx context.Context, input json.RawMessage) (any, error) {
	var args Edit
	if err := json.Unmarshal(input, &args); err != nil {
		return nil, err
	}
	// Over the version the turn last saw, so a change another writer made since is a conflict.
	base := w.seen.Base(args.Path)
	data, version, err := w.file(ctx, args.Path)
	if err != nil {
		return nil, err
	}
	if base == workspaces.Latest {
		base = version
	}
	edited, err := args.Apply(data)
	if err != nil {
		return nil, err
	}
	return w.commit(ctx, args.Path, base, edited)
}

// commit writes data to p as one commit over base.
func (w *workspace) commit(ctx context.Context, p string, base int64, data []byte) (any, error) {
	c, err := w.store.Commit(ctx, w.accountID, w.name, base, []workspaces.Change{{Path: p, Data: data}}, w.author(ctx))
	if err != nil {
		return nil, CommitError(err)
	}
	w.seen.Saw(p, c.Version)
	return map[string]any{"path": p, "version": c.Version, "bytes": len(data)}, nil
}

func (w *workspace) glob(ctx context.Context, input json.RawMessage) (any, error) {
	var args struct{ Pattern string }
	if err := json.Unmarshal(input, &args); err != nil {
		return nil, err
	}
	if _, err := path.Match(strings.ReplaceAll(args.Pattern, "**", "*"), ""); err != nil {
		return nil, fmt.Errorf("pattern %q: %w", args.Pattern, err)
	}
	t, err := w.store.Tree(ctx, w.accountID, w.name, workspaces.Latest)
	if err != nil {
		return nil, err
	}
	want := strings.Split(args.Pattern, "/")
	var paths []string
	for p := range t.Files {
		if matchSegments(want, strings.Split(p, "/")) {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	out := map[string]any{"version": t.Version, "count": len(paths)}
	if len(paths) > maxGlobPaths {
		paths = paths[:maxGlobPaths]
		out["note"] = fmt.Sprintf("showing the first %d paths; narrow the pattern", maxGlobPaths)
	}
	out["paths"] = append([]string{}, paths...)
	return out, nil
}

// matchSegments matches a path's segments against a pattern's: ** is any number of segments,
// any other segment is path.Match's.
func matchSegments(pattern, segs []string) bool {
	if len(pattern) == 0 {
		return len(segs) == 0
	}
	if pattern[0] == "**" {
		for i := 0; i <= len(segs); i++ {
			if matchSegments(pattern[1:], segs[i:]) {
				return true
			}
		}
		return false
	}
	if len(segs) == 0 {
		return false
	}
	ok, _ := path.Match(pattern[0], segs[0])
	return ok && matchSegments(pattern[1:], segs[1:])
}

func (w *workspace) grep(ctx context.Context, input json.RawMessage) (any, error) {
	var args struct{ Pattern, Path string }
	if err := json.Unmarshal(input, &args); err != nil {
		return nil, err
	}
	re, err := regexp.Compile(args.Pattern)
	if err != nil {
		return nil, fmt.Errorf("pattern: %w", err)
	}
	if args.Path != "" {
		if err := checkPath(args.Path); err != nil {
			return nil, err
		}
	}
	t, err := w.store.Tree(ctx, w.accountID, w.name, workspaces.Latest)
	if err != nil {
		return nil, err
	}
	var paths []string
	for p := range t.Files {
		if args.Path == "" || p == args.Path || strings.HasPrefix(p, args.Path+"/") {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 && args.Path != "" {
		return nil, readError(workspaces.ErrNotFound, w.name, args.Path)
	}
	slices.Sort(paths)
	matches := []string{}
	var notes []string
	var read int64
	for _, p := range paths {
		e := t.Files[p]
		if e.Size > maxGrepFileSz || read+e.Size > maxGrepBytes {
			notes = append(notes, p+" (too large to search)")
			continue
		}
		data, err := w.store.Blob(ctx, w.accountID, e.Blob)
		if err != nil {
			return nil, err
		}
		read += e.Size
		if !utf8.Valid(data) {
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			if !re.MatchString(line) {
				continue
			}
			if len(matches) == maxGrepLines {
				return map[string]any{"version": t.Version, "matches": matches, "note": fmt.Sprintf("showing the first %d matching lines; narrow the pattern or the path", maxGrepLines)}, nil
			}
			if utf8.RuneCountInString(line) > maxGrepRunes {
				line = string([]rune(line)[:maxGrepRunes]) + " [line cut]"
			}
			matches = append(matches, fmt.Sprintf("%s:%d: %s", p, i+1, line))
		}
	}
	out := map[string]any{"version": t.Version, "matches": matches}
	if len(notes) > 0 {
		out["note"] = "not searched: " + strings.Join(notes, ", ")
	}
	return out, nil
}
