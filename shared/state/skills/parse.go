package skills

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/agentconfig"
	"gopkg.in/yaml.v3"
)

// InvalidError is an upload refused at the field it is about: files["<path>"] (as the upload
// names it), files, body, SKILL.md, SKILL.md.name or SKILL.md.description.
type InvalidError struct {
	Field   string
	Problem string
	// TooLarge: a size limit refused it.
	TooLarge bool
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Problem }

func fileField(p string) string { return fmt.Sprintf("files[%q]", p) }

func tooMany() error {
	return &InvalidError{Field: "files", Problem: fmt.Sprintf("a skill holds at most %d files, SKILL.md included", MaxFiles)}
}

func tooLarge() error {
	return &InvalidError{Field: "files", Problem: fmt.Sprintf("unpack to more than %d bytes", MaxTotalBytes), TooLarge: true}
}

// ParseFiles reads a skill uploaded as JSON: each file's path and its text.
func ParseFiles(files map[string]string) (*Bundle, error) {
	if len(files) > MaxFiles {
		return nil, tooMany()
	}
	out := make(map[string][]byte, len(files))
	total := 0
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if problem := PathProblem(p); problem != "" {
			return nil, &InvalidError{Field: fileField(p), Problem: problem}
		}
		if total += len(files[p]); total > MaxTotalBytes {
			return nil, tooLarge()
		}
		out[p] = []byte(files[p])
	}
	return build(out)
}

// ParseZip reads a skill uploaded as a zip of its folder: SKILL.md at the archive's root, or
// every file under one top folder with SKILL.md in it. Folder entries and the metadata macOS
// adds (__MACOSX/, .DS_Store) are skipped; links and other non-regular entries are refused.
// Entries are decompressed against what is left of MaxTotalBytes, whatever their headers claim.
func ParseZip(data []byte) (*Bundle, error) {
	if len(data) > MaxRequestBytes {
		return nil, &InvalidError{Field: "body", Problem: fmt.Sprintf("is larger than %d bytes", MaxRequestBytes), TooLarge: true}
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	// Insecure names are refused below, with the entry they are about.
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, &InvalidError{Field: "body", Problem: "is not a zip archive: " + err.Error()}
	}
	var entries []*zip.File
	seen := map[string]bool{}
	for _, f := range zr.File {
		name := f.Name
		if strings.HasSuffix(name, "/") || f.Mode().IsDir() || strings.HasPrefix(name, "__MACOSX/") || path.Base(name) == ".DS_Store" {
			continue
		}
		field := fileField(name)
		switch {
		case f.Mode()&fs.ModeSymlink != 0:
			return nil, &InvalidError{Field: field, Problem: "is a symbolic link; a skill holds regular files only"}
		case !f.Mode().IsRegular():
			return nil, &InvalidError{Field: field, Problem: "is not a regular file"}
		case f.Flags&0x1 != 0:
			return nil, &InvalidError{Field: field, Problem: "is encrypted"}
		case seen[name]:
			return nil, &InvalidError{Field: field, Problem: "is in the archive twice"}
		}
		if problem := shapeProblem(name); problem != "" {
			return nil, &InvalidError{Field: field, Problem: problem}
		}
		seen[name] = true
		if entries = append(entries, f); len(entries) > MaxFiles {
			return nil, tooMany()
		}
	}
	top := topFolder(entries)
	files := make(map[string][]byte, len(entries))
	left := int64(MaxTotalBytes)
	for _, f := range entries {
		p := strings.TrimPrefix(f.Name, top)
		if problem := PathProblem(p); problem != "" {
			return nil, &InvalidError{Field: fileField(f.Name), Problem: problem}
		}
		content, err := unpack(f, left)
		if err != nil {
			return nil, err
		}
		left -= int64(len(content))
		files[p] = content
	}
	return build(files)
}

// topFolder is "<folder>/" when SKILL.md is not at the archive's root but every entry is under
// one folder that holds it; "" otherwise.
func topFolder(entries []*zip.File) string {
	if len(entries) == 0 || slices.ContainsFunc(entries, func(f *zip.File) bool { return f.Name == SkillMD }) {
		return ""
	}
	folder, _, ok := strings.Cut(entries[0].Name, "/")
	if !ok {
		return ""
	}
	prefix := folder + "/"
	for _, f := range entries {
		if !strings.HasPrefix(f.Name, prefix) {
			return ""
		}
	}
	return prefix
}

// unpack decompresses an entry, refusing it once it passes left bytes: a header's sizes are the
// archive's word, the bytes read are the count.
func unpack(f *zip.File, left int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, &InvalidError{Field: fileField(f.Name), Problem: "cannot be unpacked: " + err.Error()}
	}
	defer rc.Close()
	content, err := io.ReadAll(io.LimitReader(rc, left+1))
	if int64(len(content)) > left {
		return nil, tooLarge()
	}
	if err != nil {
		return nil, &InvalidError{Field: fileField(f.Name), Problem: "cannot be unpacked: " + err.Error()}
	}
	return content, nil
}

// build checks SKILL.md and its front matter and makes the bundle of files.
func build(files map[string][]byte) (*Bundle, error) {
	md, ok := files[SkillMD]
	if !ok {
		return nil, &InvalidError{Field: fileField(SkillMD), Problem: "is missing: a skill is a folder with a SKILL.md at its root (a zip may hold that folder)"}
	}
	if len(md) > MaxSkillMDBytes {
		return nil, &InvalidError{Field: fileField(SkillMD), Problem: fmt.Sprintf("is larger than %d bytes", MaxSkillMDBytes), TooLarge: true}
	}
	name, description, body, err := frontMatter(md)
	if err != nil {
		return nil, err
	}
	return newBundle(name, description, body, files), nil
}

// frontMatter splits SKILL.md into its front matter's name and description and its body. The
// front matter is YAML between a first line "---" and the next line "---"; keys other than name
// and description (license, allowed-tools, metadata…) are Agent Skills' and ignored.
func frontMatter(md []byte) (name, description, body string, err error) {
	if !utf8.Valid(md) {
		return "", "", "", &InvalidError{Field: SkillMD, Problem: "is not UTF-8 text"}
	}
	first, rest, _ := strings.Cut(string(md), "\n")
	if strings.TrimRight(first, "\r") != "---" {
		return "", "", "", &InvalidError{Field: SkillMD, Problem: `must begin with YAML front matter: a first line "---", then name and description, then a line "---"`}
	}
	var head string
	for off := 0; ; {
		line, after, found := strings.Cut(rest[off:], "\n")
		if strings.TrimRight(line, " \t\r") == "---" {
			head, body = rest[:off], after
			break
		}
		if !found {
			return "", "", "", &InvalidError{Field: SkillMD, Problem: `front matter has no closing line "---"`}
		}
		off += len(line) + 1
	}
	var fm map[string]any
	if err := yaml.Unmarshal([]byte(head), &fm); err != nil {
		return "", "", "", &InvalidError{Field: SkillMD, Problem: "front matter is not a YAML mapping: " + err.Error()}
	}
	name, err = frontString(fm, "name")
	if err == nil {
		if p := agentconfig.SkillNameProblem(name); p != "" {
			err = &InvalidError{Field: SkillMD + ".name", Problem: p}
		}
	}
	if err != nil {
		return "", "", "", err
	}
	if description, err = frontString(fm, "description"); err != nil {
		return "", "", "", err
	}
	description = strings.TrimSpace(description)
	switch n := utf8.RuneCountInString(description); {
	case n == 0:
		return "", "", "", &InvalidError{Field: SkillMD + ".description", Problem: "is empty: say what the skill does and when to use it"}
	case n > MaxDescription:
		return "", "", "", &InvalidError{Field: SkillMD + ".description", Problem: fmt.Sprintf("is %d characters, more than %d", n, MaxDescription)}
	}
	// The description goes into the system prompt of every agent that names the skill, where
	// tabs and line breaks are folded into spaces; no other control character belongs there.
	if i := strings.IndexFunc(description, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(description[i:])
		return "", "", "", &InvalidError{Field: SkillMD + ".description", Problem: fmt.Sprintf("holds the control character %U: write plain text (tabs and line breaks only)", r)}
	}
	return name, description, strings.TrimRight(strings.TrimLeft(body, "\r\n"), " \t\r\n"), nil
}

// frontString is the front matter's string key.
func frontString(fm map[string]any, key string) (string, error) {
	v, ok := fm[key]
	if !ok {
		return "", &InvalidError{Field: SkillMD + "." + key, Problem: "is required in the front matter"}
	}
	s, ok := v.(string)
	if !ok {
		return "", &InvalidError{Field: SkillMD + "." + key, Problem: "must be a string"}
	}
	return s, nil
}
