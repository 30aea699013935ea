// Package ids holds the one grammar every id a client sends must follow: 1 to 128 ASCII
// letters, digits, '_', '-', '.' or ':'.
//
// Ids become DynamoDB key parts (joined with '#', which the grammar leaves out), HTTP headers
// (X-Conversation-Id) and WebSocket frames, so an id that passes is safe in each of them, and
// one that does not is refused at the edge with a 400 instead of failing deep in a write.
package ids

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxLen is the longest id accepted.
const MaxLen = 128

// Grammar says what an id may be, for refusals and docs.
var Grammar = fmt.Sprintf("1 to %d ASCII letters, digits, '_', '-', '.' or ':'", MaxLen)

// Valid reports whether id follows the grammar.
func Valid(id string) bool {
	if len(id) == 0 || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !allowed(id[i]) {
			return false
		}
	}
	return true
}

// Problem says what is wrong with id, or "" when it is valid.
func Problem(id string) string {
	switch {
	case id == "":
		return "is empty"
	case len(id) > MaxLen:
		return fmt.Sprintf("is %d characters long: an id is %s", len(id), Grammar)
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 0x80:
			return fmt.Sprintf("has a non-ASCII byte (%#x) at byte %d: an id is %s", c, i, Grammar)
		case !allowed(c):
			return fmt.Sprintf("has %q at byte %d: an id is %s", rune(c), i, Grammar)
		}
	}
	return ""
}

func allowed(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '.' || c == ':'
}

// Derived is an id the harness derives from parts (a conversation from the call or the chat that
// names it, an event from a platform's delivery): prefix and 32 hex digits of their SHA-256, so
// the same parts always give the same id, and it passes the grammar.
func Derived(prefix string, parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return prefix + hex.EncodeToString(h[:16])
}
