// Package relpath is the grammar of a file's path under a root (a workspace's, a sandbox's):
// one rule, so that a path the API stores is a path a sandbox takes, and no path a client or a
// model sends names anything outside the root.
package relpath

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of a path.
const (
	MaxBytes        = 1024
	MaxSegments     = 64
	MaxSegmentBytes = 255
)

// Problem says what keeps p from being a clean relative path, as the end of a sentence that
// begins with the field's name ("path is empty"); empty when nothing does. A path is
// slash-separated, relative, with no empty, "." or ".." segment, no backslash and no control
// character, at most MaxBytes long in at most MaxSegments segments of at most MaxSegmentBytes.
func Problem(p string) string {
	switch {
	case p == "":
		return "is empty"
	case len(p) > MaxBytes:
		return fmt.Sprintf("is %d bytes long, more than %d", len(p), MaxBytes)
	case !utf8.ValidString(p):
		return "is not valid UTF-8"
	case strings.HasPrefix(p, "/"):
		return "must be relative: no leading /"
	case strings.ContainsRune(p, '\\'):
		return `must use / between segments, not \`
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return "must not contain control characters"
	}
	segments := strings.Split(p, "/")
	if len(segments) > MaxSegments {
		return fmt.Sprintf("has %d segments, more than %d", len(segments), MaxSegments)
	}
	for _, s := range segments {
		switch {
		case s == "":
			return "must not have empty segments (// or a trailing /)"
		case s == "." || s == "..":
			return "must not have . or .. segments"
		case len(s) > MaxSegmentBytes:
			return fmt.Sprintf("has a segment of %d bytes, more than %d", len(s), MaxSegmentBytes)
		}
	}
	return ""
}
