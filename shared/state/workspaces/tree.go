package workspaces

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Tree is one version's files: path → entry. Directories are implied by the paths.
type Tree struct {
	Version int64
	Files   map[string]Entry
}

// treeObject is a tree as stored; encoding/json sorts the map's keys, so equal trees hash alike.
type treeObject struct {
	Files map[string]Entry `json:"files"`
}

func (t *Tree) encode() ([]byte, string, error) {
	content, err := json.Marshal(treeObject{Files: t.Files})
	if err != nil {
		return nil, "", err
	}
	return content, Digest(content), nil
}

// Digest is the hex SHA-256 that names b's object.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// File is the entry at path; false when no file is there.
func (t *Tree) File(path string) (Entry, bool) {
	e, ok := t.Files[path]
	return e, ok
}

// IsDir reports whether dir ("" for the root) holds files.
func (t *Tree) IsDir(dir string) bool {
	if dir == "" {
		return true
	}
	for p := range t.Files {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// DirEntry is a file or a subdirectory of a listed directory; a subdirectory's Size is the sum
// of the files beneath it.
type DirEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

// List lists dir's entries ("" for the root), sorted by name; false when dir is no directory.
func (t *Tree) List(dir string) ([]DirEntry, bool) {
	if !t.IsDir(dir) {
		return nil, false
	}
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	byName := map[string]*DirEntry{}
	for p, e := range t.Files {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		name, _, nested := strings.Cut(rest, "/")
		d := byName[name]
		if d == nil {
			d = &DirEntry{Name: name, Type: "file"}
			if nested {
				d.Type = "dir"
			}
			byName[name] = d
		}
		d.Size += e.Size
	}
	out := make([]DirEntry, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out, true
}

// Bytes is the sum of the files' sizes.
func (t *Tree) Bytes() int64 {
	var n int64
	for _, e := range t.Files {
		n += e.Size
	}
	return n
}

// apply returns the tree with changes applied (their blobs named by blobs, by path) and what
// each changed; a write of the bytes a path holds already changes nothing. A write where a
// directory is, or beneath a file, is refused, and so is deleting a path with no file.
func (t *Tree) apply(changes []Change, blobs map[string]string) (*Tree, []PathChange, error) {
	next := &Tree{Files: maps.Clone(t.Files)}
	if next.Files == nil {
		next.Files = map[string]Entry{}
	}
	var changed []PathChange
	for _, c := range changes {
		before, had := next.Files[c.Path]
		if c.Delete {
			if !had {
				return nil, nil, fmt.Errorf("%s: %w", c.Path, ErrNotFound)
			}
			delete(next.Files, c.Path)
			changed = append(changed, PathChange{Path: c.Path, Change: Deleted, Before: &before})
			continue
		}
		after := Entry{Blob: blobs[c.Path], Size: int64(len(c.Data))}
		switch {
		case had && before == after:
			continue
		case had:
			changed = append(changed, PathChange{Path: c.Path, Change: Modified, Before: &before, After: &after})
		default:
			changed = append(changed, PathChange{Path: c.Path, Change: Added, After: &after})
		}
		next.Files[c.Path] = after
	}
	for _, c := range changed {
		if c.Change == Added {
			if err := next.placeable(c.Path); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(next.Files) > MaxFiles {
		return nil, nil, &InvalidError{Field: "path", Problem: fmt.Sprintf("would make the workspace hold %d files, more than %d", len(next.Files), MaxFiles), TooLarge: true}
	}
	return next, changed, nil
}

// placeable refuses a file at path when a file is at one of its parents, or files are beneath
// it.
func (t *Tree) placeable(path string) error {
	for i := strings.LastIndexByte(path, '/'); i > 0; i = strings.LastIndexByte(path[:i], '/') {
		if _, ok := t.Files[path[:i]]; ok {
			return &InvalidError{Field: "path", Problem: fmt.Sprintf("%s: %s is a file, not a directory", path, path[:i])}
		}
	}
	if t.IsDir(path) {
		return &InvalidError{Field: "path", Problem: path + " is a directory"}
	}
	return nil
}

// diff is how the paths differ from a to b, sorted by path.
func diff(a, b *Tree) []PathChange {
	out := []PathChange{}
	for p, before := range a.Files {
		if after, ok := b.Files[p]; !ok {
			out = append(out, PathChange{Path: p, Change: Deleted, Before: &before})
		} else if after != before {
			out = append(out, PathChange{Path: p, Change: Modified, Before: &before, After: &after})
		}
	}
	for p, after := range b.Files {
		if _, ok := a.Files[p]; !ok {
			out = append(out, PathChange{Path: p, Change: Added, After: &after})
		}
	}
	slices.SortFunc(out, func(x, y PathChange) int { return strings.Compare(x.Path, y.Path) })
	return out
}
