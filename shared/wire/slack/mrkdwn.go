package slack

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape replaces the three characters Slack reads as markup, &, < and >, with their entities,
// as Slack requires of all text it should show as written.
func Escape(s string) string { return escaper.Replace(s) }

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// entitySafe moves a cut at byte i of s back before an entity Escape wrote, if it would split
// one.
func entitySafe(s string, i int) int {
	j := strings.LastIndexByte(s[:i], '&')
	if j < 0 {
		return i
	}
	for _, e := range []string{"&amp;", "&lt;", "&gt;"} {
		if strings.HasPrefix(s[j:], e) && j+len(e) > i {
			return j
		}
	}
	return i
}

// Mrkdwn converts the CommonMark a model writes to Slack's mrkdwn: **bold** and __bold__ to
// *bold*, *italic* and _italic_ to _italic_, ~~strike~~ to ~strike~, [text](url) to <url|text>
// (a link without a scheme keeps its text only), headings to bold lines, - and * bullets to •,
// fences to plain ``` (Slack shows no language). Code spans and fenced code are kept as
// written; everything but the links is escaped (Escape), code included, since Slack reads
// markup there too. An unclosed fence is closed at the end.
func Mrkdwn(markdown string) string {
	lines := strings.Split(strings.ReplaceAll(markdown, "\r\n", "\n"), "\n")
	out := make([]string, 0, len(lines)+1)
	fence := ""
	for _, line := range lines {
		switch {
		case fence != "" && fenceCloses(line, fence):
			fence = ""
			out = append(out, "```")
		case fence != "":
			out = append(out, Escape(line))
		case fenceOpens(line) != "":
			fence = fenceOpens(line)
			out = append(out, "```")
		default:
			out = append(out, mrkdwnLine(line))
		}
	}
	if fence != "" {
		out = append(out, "```")
	}
	return strings.Join(out, "\n")
}

// fenceOpens returns the marker (``` or ~~~, or longer) of a line opening a fenced code block,
// or "".
func fenceOpens(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return ""
	}
	n := run(t, 0, t[0])
	if n < 3 || (t[0] == '`' && strings.Contains(t[n:], "`")) {
		return ""
	}
	return t[:n]
}

// fenceCloses reports whether line closes the block opened by marker: a run of its character
// at least as long, and nothing after it.
func fenceCloses(line, marker string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || t == "" || t[0] != marker[0] {
		return false
	}
	n := run(t, 0, t[0])
	return n >= len(marker) && strings.TrimSpace(t[n:]) == ""
}

// run is the length of the run of c at s[i:].
func run(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// mrkdwnLine converts a line outside fenced code: a heading, a rule, a quote, a bullet or text.
func mrkdwnLine(line string) string {
	t := strings.TrimLeft(line, " \t")
	indent := line[:len(line)-len(t)]
	if h := run(t, 0, '#'); h >= 1 && h <= 6 && (len(t) == h || t[h] == ' ' || t[h] == '\t') {
		title := strings.TrimSpace(t[h:])
		if closing := strings.TrimRight(title, "#"); closing == "" || strings.HasSuffix(closing, " ") {
			title = strings.TrimSpace(closing)
		}
		if title == "" {
			return ""
		}
		return "*" + inline(title, true) + "*"
	}
	if isRule(t) {
		return "───"
	}
	if rest, ok := strings.CutPrefix(t, ">"); ok {
		return "&gt; " + mrkdwnLine(strings.TrimPrefix(rest, " "))
	}
	if len(t) >= 2 && (t[0] == '-' || t[0] == '*' || t[0] == '+') && (t[1] == ' ' || t[1] == '\t') {
		return indent + "• " + inline(strings.TrimLeft(t[2:], " \t"), false)
	}
	return indent + inline(t, false)
}

// isRule reports a thematic break: three or more of one of - * _, spaces allowed between.
func isRule(t string) bool {
	s := strings.ReplaceAll(strings.TrimSpace(t), " ", "")
	return len(s) >= 3 && strings.Trim(s, s[:1]) == "" && strings.ContainsAny(s[:1], "-*_")
}

// inline converts a line's spans. Inside bold (a heading, or **…**) another bold adds no
// markers, since Slack does not nest them.
func inline(s string, bold bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isPunct(s[i+1]):
			b.WriteString(Escape(s[i+1 : i+2]))
			i += 2
			continue
		case c == '`':
			n := run(s, i, '`')
			if j := closingTicks(s, i+n, n); j >= 0 {
				b.WriteString("`" + Escape(trimOneSpace(s[i+n:j])) + "`")
				i = j + n
			} else {
				b.WriteString(s[i : i+n])
				i += n
			}
			continue
		case c == '[' || (c == '!' && strings.HasPrefix(s[i+1:], "[")):
			start := i
			if c == '!' {
				start++
			}
			if out, end, ok := link(s, start, bold); ok {
				b.WriteString(out)
				i = end
				continue
			}
		case c == '<':
			if end := strings.IndexByte(s[i:], '>'); end > 0 && isAutolink(s[i+1:i+end]) {
				b.WriteString(s[i : i+end+1])
				i += end + 1
				continue
			}
		case c == '*' || c == '_' || c == '~':
			if out, end, ok := emphasis(s, i, bold); ok {
				b.WriteString(out)
				i = end
				continue
			}
			n := run(s, i, c)
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		if end := bareURL(s, i); end > i {
			b.WriteString(Escape(s[i:end]))
			i = end
			continue
		}
		switch c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		default:
			b.WriteByte(c)
		}
		i++
	}
	return b.String()
}

// bareURL is the end of a URL written without link syntax at s[i], or i: Slack links it
// itself, so its underscores and asterisks are not emphasis.
func bareURL(s string, i int) int {
	if s[i] != 'h' || !(strings.HasPrefix(s[i:], "http://") || strings.HasPrefix(s[i:], "https://")) {
		return i
	}
	if prev, _ := utf8.DecodeLastRuneInString(s[:i]); isWordRune(prev) {
		return i
	}
	end := strings.IndexFunc(s[i:], func(r rune) bool { return unicode.IsSpace(r) || r == '<' || r == '>' })
	if end < 0 {
		return len(s)
	}
	return i + end
}

// emphasis converts the delimited span opening at s[i], if it is one: its end and its mrkdwn.
func emphasis(s string, i int, bold bool) (string, int, bool) {
	c := s[i]
	n := run(s, i, c)
	if c == '~' && n != 2 || n > 3 || !opens(s, i, n) {
		return "", 0, false
	}
	j := closingRun(s, i+n, c, n)
	if j < 0 {
		return "", 0, false
	}
	inner, end := s[i+n:j], j+n
	switch {
	case c == '~':
		return "~" + inline(inner, bold) + "~", end, true
	case n == 1:
		return "_" + inline(inner, bold) + "_", end, true
	case bold && n == 2:
		return inline(inner, true), end, true
	case bold:
		return "_" + inline(inner, true) + "_", end, true
	case n == 2:
		return "*" + inline(inner, true) + "*", end, true
	}
	return "*_" + inline(inner, true) + "_*", end, true
}

// opens reports whether the run s[i:i+n] can open emphasis: not inside a word, and not followed
// by a space. (CommonMark lets * open inside a word; Slack would not show it.)
func opens(s string, i, n int) bool {
	prev, _ := utf8.DecodeLastRuneInString(s[:i])
	next, _ := utf8.DecodeRuneInString(s[i+n:])
	return i+n < len(s) && !isWordRune(prev) && !unicode.IsSpace(next)
}

// closingRun finds the run of exactly n c's after from that closes a span: not preceded by a
// space, not followed by a word character, and not inside a code span.
func closingRun(s string, from int, c byte, n int) int {
	for j := from; j < len(s); {
		switch s[j] {
		case '`':
			m := run(s, j, '`')
			if k := closingTicks(s, j+m, m); k >= 0 {
				j = k + m
			} else {
				j += m
			}
			continue
		case c:
			m := run(s, j, c)
			prev, _ := utf8.DecodeLastRuneInString(s[:j])
			next, _ := utf8.DecodeRuneInString(s[j+m:])
			if m == n && j > from && !unicode.IsSpace(prev) && !isWordRune(next) {
				return j
			}
			j += m
			continue
		}
		j++
	}
	return -1
}

// closingTicks finds the run of exactly n backticks after from that closes a code span.
func closingTicks(s string, from, n int) int {
	for j := from; j < len(s); {
		if s[j] != '`' {
			j++
			continue
		}
		m := run(s, j, '`')
		if m == n {
			return j
		}
		j += m
	}
	return -1
}

// link converts [text](url) at s[i]: <url|text> for an absolute URL, the text alone for a
// relative one (Slack could not open it).
func link(s string, i int, bold bool) (string, int, bool) {
	k := matching(s, i, '[', ']')
	if k < 0 || k+1 >= len(s) || s[k+1] != '(' {
		return "", 0, false
	}
	m := matching(s, k+1, '(', ')')
	if m < 0 {
		return "", 0, false
	}
	label := s[i+1 : k]
	dest, _, _ := strings.Cut(strings.TrimSpace(s[k+2:m]), " ")
	dest = strings.Trim(dest, "<>")
	if dest == "" {
		return "", 0, false
	}
	if !strings.Contains(dest, "://") && !strings.HasPrefix(dest, "mailto:") {
		return inline(label, bold), m + 1, true
	}
	dest = urlEscaper.Replace(dest)
	text := Escape(strings.NewReplacer("`", "", "**", "", "__", "").Replace(label))
	if text == "" || text == dest {
		return "<" + dest + ">", m + 1, true
	}
	return "<" + dest + "|" + text + ">", m + 1, true
}

// urlEscaper percent-encodes what would end or split a <url|text> link.
var urlEscaper = strings.NewReplacer(" ", "%20", "|", "%7C", "<", "%3C", ">", "%3E")

// matching finds the bracket closing the one at s[i], counting nested pairs.
func matching(s string, i int, open, close byte) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case open:
			depth++
		case close:
			if depth--; depth == 0 {
				return j
			}
		}
	}
	return -1
}

// isAutolink reports a CommonMark autolink's inside (<https://…>), which Slack reads the same.
func isAutolink(s string) bool {
	return (strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "mailto:")) &&
		!strings.ContainsAny(s, " \t<|")
}

// trimOneSpace strips the one space CommonMark strips from each end of a code span.
func trimOneSpace(s string) string {
	if len(s) >= 2 && s[0] == ' ' && s[len(s)-1] == ' ' && strings.TrimSpace(s) != "" {
		return s[1 : len(s)-1]
	}
	return s
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// isPunct reports the ASCII punctuation a backslash escapes.
func isPunct(c byte) bool { return strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) >= 0 }
