package telegram

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxText is the most characters of a message's text Telegram takes.
const MaxText = 4096

// ParseModeHTML is the parse mode of text made by HTML.
const ParseModeHTML = "HTML"

// HTML converts the CommonMark a model writes to Telegram's HTML parse mode. Every character
// that is not markup is escaped, and only &, < and > are (the only three Telegram requires);
// then **bold** and __bold__ become <b>, *italic* and _italic_ <i>, ~~struck~~ <s>, `code`
// <code>, fenced code blocks <pre>, links to http(s) and tg URLs <a>, headings bold lines,
// bullets "• ", quoted lines a <blockquote> and rules a line of dashes. Nothing inside code is
// converted. Emphasis pairs within a line, so every tag is closed on the line it opens: the
// result is valid Telegram HTML whatever the input.
func HTML(markdown string) string {
	var b strings.Builder
	for i, bl := range parseBlocks(markdown) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(bl.html())
	}
	return b.String()
}

// A block is a part of the markdown that converts on its own: one line, a fenced code block
// or a run of quoted lines. HTML joins the blocks' HTML with "\n", which is what lets Split
// add up their sizes.
type block struct {
	src []string // the markdown lines, without a fence's own lines
	out []string // each line converted
	// before and after are the HTML around the lines: <pre>…</pre>, <blockquote>…</blockquote>.
	before, after string
	// open and close are a fence's own lines, which every piece of it keeps around its lines.
	open, close string
	quote       bool
}

func (bl block) html() string {
	return bl.before + strings.Join(bl.out, "\n") + bl.after
}

// markdown is the markdown of lines of the block: its fence around them, if it has one.
func (bl block) markdown(lines []string) string {
	s := strings.Join(lines, "\n")
	if bl.open != "" {
		s = bl.open + "\n" + s + "\n" + bl.close
	}
	return s
}

func parseBlocks(markdown string) []block {
	lines := strings.Split(strings.ReplaceAll(markdown, "\r\n", "\n"), "\n")
	var blocks []block
	for i := 0; i < len(lines); {
		if f, ok := openFence(lines[i]); ok {
			bl := block{open: lines[i], close: f.marker(), before: f.before(), after: f.after()}
			for i++; i < len(lines); i++ {
				if f.closedBy(lines[i]) {
					i++
					break
				}
				bl.src = append(bl.src, lines[i])
				bl.out = append(bl.out, escape(f.content(lines[i])))
			}
			blocks = append(blocks, bl)
			continue
		}
		if _, ok := quoted(lines[i]); ok {
			bl := block{before: "<blockquote>", after: "</blockquote>", quote: true}
			for ; i < len(lines); i++ {
				inner, ok := quoted(lines[i])
				if !ok {
					break
				}
				bl.src = append(bl.src, lines[i])
				bl.out = append(bl.out, convertLine(inner))
			}
			blocks = append(blocks, bl)
			continue
		}
		blocks = append(blocks, block{src: lines[i : i+1], out: []string{convertLine(lines[i])}})
		i++
	}
	return blocks
}

// fence is the opening of a fenced code block. Models indent fences inside list items by any
// amount, so any indentation opens one (CommonMark allows three spaces); the content loses as
// much indentation as the opening line had.
type fence struct {
	char   byte
	n      int
	indent int
	lang   string
}

func openFence(line string) (fence, bool) {
	rest := strings.TrimLeft(line, " \t")
	f := fence{indent: len(line) - len(rest)}
	if rest == "" || (rest[0] != '`' && rest[0] != '~') {
		return f, false
	}
	f.char = rest[0]
	for f.n < len(rest) && rest[f.n] == f.char {
		f.n++
	}
	info := rest[f.n:]
	if f.n < 3 || (f.char == '`' && strings.Contains(info, "`")) {
		return f, false
	}
	if fields := strings.Fields(info); len(fields) > 0 && validLang(fields[0]) {
		f.lang = fields[0]
	}
	return f, true
}

// validLang keeps a language name that is safe in the class attribute as it is.
func validLang(s string) bool {
	if len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r < utf8.RuneSelf && (usernameByte(byte(r)) || strings.ContainsRune("+#.-", r))) {
			return false
		}
	}
	return true
}

func (f fence) closedBy(line string) bool {
	rest := strings.TrimLeft(line, " \t")
	n := 0
	for n < len(rest) && rest[n] == f.char {
		n++
	}
	return n >= f.n && strings.TrimSpace(rest[n:]) == ""
}

func (f fence) content(line string) string {
	i := 0
	for i < f.indent && i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	return line[i:]
}

func (f fence) marker() string { return strings.Repeat(string(f.char), f.n) }

func (f fence) before() string {
	if f.lang == "" {
		return "<pre>"
	}
	return `<pre><code class="language-` + f.lang + `">`
}

func (f fence) after() string {
	if f.lang == "" {
		return "</pre>"
	}
	return "</code></pre>"
}

// quoted returns a quoted line's text without its "> ".
func quoted(line string) (string, bool) {
	rest := strings.TrimLeft(line, " ")
	if len(line)-len(rest) > 3 || !strings.HasPrefix(rest, ">") {
		return "", false
	}
	rest = rest[1:]
	return strings.TrimPrefix(rest, " "), true
}

// convertLine converts a line that is not part of a fence: a heading, a rule, a bullet or
// text, all with their inline markup converted.
func convertLine(line string) string {
	rest := strings.TrimLeft(line, " \t")
	indent := line[:len(line)-len(rest)]
	if text, ok := heading(rest); ok && len(indent) <= 3 {
		if text == "" {
			return ""
		}
		return "<b>" + inline(text, true) + "</b>"
	}
	if isRule(rest) && len(indent) <= 3 {
		return "———"
	}
	if len(rest) >= 2 && strings.ContainsRune("-*+", rune(rest[0])) && (rest[1] == ' ' || rest[1] == '\t') {
		return indent + "• " + inline(strings.TrimLeft(rest[2:], " \t"), true)
	}
	return inline(line, true)
}

// heading returns an ATX heading's text, without its #s.
func heading(s string) (string, bool) {
	n := 0
	for n < len(s) && s[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(s) && s[n] != ' ' && s[n] != '\t') {
		return "", false
	}
	text := strings.TrimSpace(s[n:])
	if t := strings.TrimRight(text, "#"); t == "" || strings.HasSuffix(t, " ") || strings.HasSuffix(t, "\t") {
		text = strings.TrimSpace(t)
	}
	return text, true
}

// isRule reports a thematic break: three or more of one of - * _, and spaces.
func isRule(s string) bool {
	s = strings.TrimRight(s, " \t")
	if s == "" || !strings.ContainsRune("-*_", rune(s[0])) {
		return false
	}
	n := 0
	for _, r := range s {
		switch {
		case r == rune(s[0]):
			n++
		case r != ' ' && r != '\t':
			return false
		}
	}
	return n >= 3
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escape escapes the three characters Telegram's HTML requires escaped, and no others.
func escape(s string) string { return htmlEscaper.Replace(s) }

// A piece is a run of a line's inline markup: HTML ready to write (text, a code span, a link)
// or a run of emphasis delimiters, which pair up later.
type piece struct {
	html string
	// A delimiter run: its character, how many of them are not yet paired, whether it may
	// open or close emphasis, and the tags pairing gave it.
	delim         byte
	n             int
	canOpen       bool
	canClose      bool
	opens, closes []string
}

// inline converts one line's inline markup. links is false inside a link's text, where
// Telegram takes no second link.
func inline(s string, links bool) string {
	var pieces []piece
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			pieces = append(pieces, piece{html: text.String()})
			text.Reset()
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			text.WriteString(escape(s[i+1 : i+2]))
			i += 2
			continue
		case c == '`':
			n := runLen(s, i, '`')
			if end := closingTicks(s, i+n, n); end >= 0 {
				flush()
				pieces = append(pieces, piece{html: "<code>" + escape(codeSpan(s[i+n:end])) + "</code>"})
				i = end + n
			} else {
				text.WriteString(s[i : i+n])
				i += n
			}
			continue
		case c == '[' || (c == '!' && i+1 < len(s) && s[i+1] == '['):
			at := i
			if c == '!' {
				at++
			}
			if label, href, end, ok := parseLink(s, at); ok && links {
				flush()
				body := inline(label, false)
				if strings.TrimSpace(body) == "" {
					body = escape(href)
				}
				pieces = append(pieces, piece{html: `<a href="` + escapeAttr(href) + `">` + body + `</a>`})
				i = end
				continue
			}
		case c == '<':
			// An autolink <https://…> is left as its URL, which Telegram links by itself.
			if end := strings.IndexByte(s[i:], '>'); end > 0 && allowedURL(s[i+1:i+end]) && !strings.ContainsAny(s[i+1:i+end], " <") {
				text.WriteString(escape(s[i+1 : i+end]))
				i += end + 1
				continue
			}
		case c == '*' || c == '_' || c == '~':
			n := runLen(s, i, c)
			if c == '~' && n != 2 {
				text.WriteString(s[i : i+n])
				i += n
				continue
			}
			flush()
			prev, _ := utf8.DecodeLastRuneInString(s[:i])
			next, _ := utf8.DecodeRuneInString(s[i+n:])
			if i == 0 {
				prev = ' '
			}
			if i+n == len(s) {
				next = ' '
			}
			left := !unicode.IsSpace(next) && (!isPunct(next) || unicode.IsSpace(prev) || isPunct(prev))
			right := !unicode.IsSpace(prev) && (!isPunct(prev) || unicode.IsSpace(next) || isPunct(next))
			p := piece{delim: c, n: n, canOpen: left, canClose: right}
			if c == '_' {
				// Underscores inside words (snake_case, file_names) are not emphasis.
				p.canOpen = left && (!right || isPunct(prev))
				p.canClose = right && (!left || isPunct(next))
			}
			pieces = append(pieces, p)
			i += n
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		text.WriteString(escape(s[i : i+size]))
		i += size
	}
	flush()
	pairEmphasis(pieces)
	var b strings.Builder
	for _, p := range pieces {
		for _, t := range p.closes {
			b.WriteString(t)
		}
		b.WriteString(p.html)
		b.WriteString(strings.Repeat(string(p.delim), p.n))
		for _, t := range p.opens {
			b.WriteString(t)
		}
	}
	return b.String()
}

// pairEmphasis pairs delimiter runs as CommonMark does (without its rule of three): each
// closer, left to right, takes the nearest opener of its character before it, two
// characters for <b> when both have two, else one for <i> (always two for ~~ and <s>), and
// the runs between them stay text. Pairs therefore nest and never cross, so the tags balance.
func pairEmphasis(pieces []piece) {
	for c := range pieces {
		closer := &pieces[c]
		for closer.delim != 0 && closer.canClose && closer.n > 0 {
			o := c - 1
			for ; o >= 0; o-- {
				if p := pieces[o]; p.delim == closer.delim && p.canOpen && p.n > 0 {
					break
				}
			}
			if o < 0 {
				break
			}
			opener := &pieces[o]
			use, tag := 1, "i"
			switch {
			case closer.delim == '~':
				use, tag = 2, "s"
			case opener.n >= 2 && closer.n >= 2:
				use, tag = 2, "b"
			}
			opener.n -= use
			closer.n -= use
			// The opener gives its innermost characters first, so later tags go outside.
			opener.opens = append([]string{"<" + tag + ">"}, opener.opens...)
			closer.closes = append(closer.closes, "</"+tag+">")
			for k := o + 1; k < c; k++ {
				pieces[k].canOpen, pieces[k].canClose = false, false
			}
		}
	}
}

// parseLink reads [label](destination) at s[i], s[i] being '['. The destination may be in
// <> and be followed by a title, which is dropped.
func parseLink(s string, i int) (label, href string, end int, ok bool) {
	depth := 0
	j := i
	for ; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
			continue
		case '[':
			depth++
		case ']':
			depth--
		}
		if depth == 0 {
			break
		}
	}
	if j >= len(s) || j+1 >= len(s) || s[j+1] != '(' {
		return "", "", 0, false
	}
	label = s[i+1 : j]
	k := j + 2
	for k < len(s) && s[k] == ' ' {
		k++
	}
	start := k
	if k < len(s) && s[k] == '<' {
		e := strings.IndexByte(s[k:], '>')
		if e < 0 {
			return "", "", 0, false
		}
		href, k = s[k+1:k+e], k+e+1
	} else {
		parens := 0
		for ; k < len(s) && s[k] != ' '; k++ {
			if s[k] == '(' {
				parens++
			} else if s[k] == ')' {
				if parens == 0 {
					break
				}
				parens--
			}
		}
		href = s[start:k]
	}
	close := strings.IndexByte(s[k:], ')')
	if close < 0 || !allowedURL(href) {
		return "", "", 0, false
	}
	if title := strings.TrimSpace(s[k : k+close]); title != "" && !quotedTitle(title) {
		return "", "", 0, false
	}
	return label, href, k + close + 1, true
}

func quotedTitle(t string) bool {
	return len(t) >= 2 && (t[0] == '"' && t[len(t)-1] == '"' || t[0] == '\'' && t[len(t)-1] == '\'')
}

// allowedURL is a link Telegram opens as it should: http, https or tg, nothing else
// (javascript:, data:, file:).
func allowedURL(u string) bool {
	l := strings.ToLower(u)
	for _, scheme := range []string{"http://", "https://", "tg://"} {
		if strings.HasPrefix(l, scheme) && len(l) > len(scheme) {
			return !strings.ContainsFunc(u, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
		}
	}
	return false
}

// escapeAttr escapes an attribute value in double quotes.
func escapeAttr(s string) string { return strings.ReplaceAll(escape(s), `"`, "&quot;") }

func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// closingTicks is where the run of exactly n backticks closing a code span starts, or -1.
func closingTicks(s string, from, n int) int {
	for i := from; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		m := runLen(s, i, '`')
		if m == n {
			return i
		}
		i += m
	}
	return -1
}

// codeSpan strips the one space CommonMark allows on each side of a code span's text.
func codeSpan(s string) string {
	if len(s) >= 2 && s[0] == ' ' && s[len(s)-1] == ' ' && strings.TrimSpace(s) != "" {
		return s[1 : len(s)-1]
	}
	return s
}

func isASCIIPunct(c byte) bool {
	return c > ' ' && c < 0x7f && (c == '_' || !usernameByte(c))
}

func isPunct(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) }
