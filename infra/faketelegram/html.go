package faketelegram

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// tags are the HTML tags of Telegram's HTML parse mode the fake takes.
var tags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "code": true, "pre": true, "a": true,
	"tg-spoiler": true, "blockquote": true,
}

// ParseHTML parses text in Telegram's HTML parse mode as the Bot API does and returns what
// the message shows: the text without its tags and with its entities decoded. Only the tags
// above are taken, each closed in order; <, > and & that are not markup must be escaped as
// &lt;, &gt; and &amp; (an & that starts no entity stays as it is). The named entities are
// &lt; &gt; &amp; &quot;, and numeric ones &#N; and &#xH;. An error says what Telegram would
// after "Bad Request: can't parse entities: ".
func ParseHTML(text string) (string, error) {
	var out strings.Builder
	var open []string
	for i := 0; i < len(text); {
		switch text[i] {
		case '&':
			r, n := entity(text[i:])
			if n == 0 {
				out.WriteByte('&')
				i++
				continue
			}
			out.WriteRune(r)
			i += n
		case '<':
			if strings.HasPrefix(text[i:], "</") {
				name, n := tagName(text[i+2:])
				end := i + 2 + n
				for end < len(text) && text[end] == ' ' {
					end++
				}
				if end >= len(text) || text[end] != '>' {
					return "", fmt.Errorf("Unclosed end tag at byte offset %d", i)
				}
				if len(open) == 0 {
					return "", fmt.Errorf("Unexpected end tag at byte offset %d", i)
				}
				if top := open[len(open)-1]; top != name {
					return "", fmt.Errorf("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, top, name)
				}
				open = open[:len(open)-1]
				i = end + 1
				continue
			}
			name, n := tagName(text[i+1:])
			if !tags[name] {
				return "", fmt.Errorf("Unsupported start tag \"%s\" at byte offset %d", name, i)
			}
			end, err := attributes(text, i+1+n)
			if err != nil {
				return "", fmt.Errorf("%v at byte offset %d", err, i)
			}
			open = append(open, name)
			i = end
		default:
			_, n := utf8.DecodeRuneInString(text[i:])
			out.WriteString(text[i : i+n])
			i += n
		}
	}
	if len(open) > 0 {
		return "", fmt.Errorf("Can't find end tag corresponding to start tag \"%s\"", open[len(open)-1])
	}
	return out.String(), nil
}

// tagName reads a tag's name, in lower case, and its length in s.
func tagName(s string) (string, int) {
	n := 0
	for n < len(s) && (s[n] == '-' || s[n] >= '0' && s[n] <= '9' || s[n]|0x20 >= 'a' && s[n]|0x20 <= 'z') {
		n++
	}
	return strings.ToLower(s[:n]), n
}

// attributes reads a start tag's attributes from text[i] to its '>' and returns the index
// after it. Values are quoted with " or ', or bare.
func attributes(text string, i int) (int, error) {
	for {
		for i < len(text) && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t') {
			i++
		}
		if i >= len(text) {
			return 0, fmt.Errorf("Unclosed start tag")
		}
		if text[i] == '>' {
			return i + 1, nil
		}
		_, n := tagName(text[i:])
		if n == 0 {
			return 0, fmt.Errorf("Empty attribute name")
		}
		i += n
		if i >= len(text) || text[i] != '=' {
			continue // an attribute without a value, such as blockquote's expandable
		}
		i++
		if i < len(text) && (text[i] == '"' || text[i] == '\'') {
			end := strings.IndexByte(text[i+1:], text[i])
			if end < 0 {
				return 0, fmt.Errorf("Unclosed start tag")
			}
			i += end + 2
			continue
		}
		for i < len(text) && text[i] != ' ' && text[i] != '>' {
			i++
		}
	}
}

// entity decodes the HTML entity s starts with, returning its length, 0 when s starts none.
func entity(s string) (rune, int) {
	end := strings.IndexByte(s, ';')
	if end < 2 || end > 10 {
		return 0, 0
	}
	name := s[1:end]
	switch name {
	case "lt":
		return '<', end + 1
	case "gt":
		return '>', end + 1
	case "amp":
		return '&', end + 1
	case "quot":
		return '"', end + 1
	}
	if num, ok := strings.CutPrefix(name, "#"); ok {
		base := 10
		if hex, ok := strings.CutPrefix(strings.ToLower(num), "x"); ok {
			num, base = hex, 16
		}
		if v, err := strconv.ParseUint(num, base, 32); err == nil && utf8.ValidRune(rune(v)) && v != 0 {
			return rune(v), end + 1
		}
	}
	return 0, 0
}
