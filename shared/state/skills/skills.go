// Package skills keeps an account's skills: folders in the Agent Skills format (a SKILL.md whose
// YAML front matter names and describes the skill, its Markdown body the instructions, and files
// beside it), parsed and checked when uploaded, stored one immutable object per version, so a
// turn that pinned a version reads that version to its end whatever is uploaded meanwhile.
package skills

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of one skill. A zip is counted as it is decompressed, never by the sizes its headers
// claim, so no archive unpacks past MaxTotalBytes.
const (
	// MaxRequestBytes bounds an upload's body, zip or JSON.
	MaxRequestBytes = 5 << 20
	// MaxTotalBytes bounds a skill's files unpacked, SKILL.md included.
	MaxTotalBytes = 8 << 20
	// MaxFiles bounds a skill's files, SKILL.md included.
	MaxFiles = 200
	// MaxPathBytes bounds a file's path within the skill.
	MaxPathBytes = 256
	// MaxSkillMDBytes bounds SKILL.md: its body goes to the model whole.
	MaxSkillMDBytes = 256 << 10
	// MaxDescription bounds the front matter's description, in characters, as Agent Skills do.
	MaxDescription = 1024
)

// SkillMD is the file that makes a folder a skill.
const SkillMD = "SKILL.md"

var (
	// ErrNotFound: the account has no such skill, or no longer that version of it. Another
	// account's skill is just as absent.
	ErrNotFound = errors.New("skill not found")
	// ErrBadPath: a path that names none of a skill's files, or could name nothing inside it.
	ErrBadPath = errors.New("bad skill file path")
	// ErrNoFile: a well-formed path that is not one of the skill's files. Errors that wrap it
	// wrap ErrBadPath too.
	ErrNoFile = errors.New("no such file in the skill")
	// ErrConflict: another upload of the skill won twice over.
	ErrConflict = errors.New("the skill was changed by another upload")
)

// Skill is one skill's current version, as listed.
type Skill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     int64  `json:"version"`
	// Files are the files besides SKILL.md, sorted by path.
	Files []File `json:"files"`
	// Bytes is the skill's size, SKILL.md included.
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// File is one file of a skill besides SKILL.md.
type File struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// Bundle is one version's content.
type Bundle struct {
	Skill
	// Body is SKILL.md's Markdown body, its front matter removed.
	Body string `json:"body"`
	// files are every file by path, SKILL.md included; read through File.
	files map[string][]byte
}

// File returns the content of one of the skill's files (SKILL.md included). A path that is not
// clean, relative and slash-separated is refused before it is looked up; one that names no file
// of the skill is refused too. Both errors wrap ErrBadPath (the second also ErrNoFile), and
// their text names the problem and at most the skill's own files.
func (b *Bundle) File(p string) ([]byte, error) {
	if problem := PathProblem(p); problem != "" {
		return nil, fmt.Errorf("%w: %q %s", ErrBadPath, p, problem)
	}
	data, ok := b.files[p]
	if !ok {
		return nil, fmt.Errorf("%w: %w: %q is not a file of skill %s (its files: %s)", ErrBadPath, ErrNoFile, p, b.Name, b.fileList())
	}
	return data, nil
}

// listedFiles bounds the names a missing-file error lists.
const listedFiles = 20

func (b *Bundle) fileList() string {
	names := []string{SkillMD}
	for _, f := range b.Files {
		names = append(names, f.Path)
	}
	if len(names) <= listedFiles {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:listedFiles], ", ") + fmt.Sprintf(" and %d more", len(names)-listedFiles)
}

// newBundle is the bundle of files (SKILL.md included, already checked), with its listing.
func newBundle(name, description, body string, files map[string][]byte) *Bundle {
	b := &Bundle{Skill: Skill{Name: name, Description: description, Files: []File{}}, Body: body, files: files}
	for p, data := range files {
		b.Bytes += int64(len(data))
		if p != SkillMD {
			b.Files = append(b.Files, File{Path: p, Bytes: int64(len(data))})
		}
	}
	slices.SortFunc(b.Files, func(x, y File) int { return strings.Compare(x.Path, y.Path) })
	return b
}

// PathProblem says what keeps p from naming a file inside a skill's folder; empty when nothing
// does. A path is relative, slash-separated and clean, climbs nowhere, and holds no backslash
// and no control character, so no path a client sends can name anything outside the skill.
func PathProblem(p string) string {
	if problem := shapeProblem(p); problem != "" {
		return problem
	}
	if len(p) > MaxPathBytes {
		return fmt.Sprintf("is longer than %d bytes", MaxPathBytes)
	}
	return ""
}

// shapeProblem is PathProblem but for the length, which a zip's entries meet only once their
// top folder is cut off.
func shapeProblem(p string) string {
	switch {
	case p == "":
		return "is empty"
	case p == ".":
		return "names the skill's folder, not a file"
	case !utf8.ValidString(p):
		return "is not UTF-8"
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return "holds a control character"
	case strings.Contains(p, `\`):
		return `holds a backslash; separate folders with "/"`
	case strings.HasPrefix(p, "/"):
		return "is absolute; give it relative to the skill's folder"
	case slices.Contains(strings.Split(p, "/"), ".."):
		return `climbs out of its folder with ".."`
	case path.Clean(p) != p:
		return fmt.Sprintf("is not a clean path; write it %q", path.Clean(p))
	}
	return ""
}
