package telegram

import (
	"strings"
	"unicode/utf8"
)

// minSplitLimit is the least limit Split works to: a fence's own tags (up to 74 characters)
// and some of its code must fit in a piece.
const minSplitLimit = 100

// Split cuts markdown into pieces to send as messages in turn, each of whose HTML is at most
// limit characters (runes; limits below 100 count as 100). The measure is the HTML with its
// tags, more than the text Telegram counts after parsing them, so a piece never overflows.
// Pieces end at paragraphs where they can, else at lines, else after spaces, else anywhere.
// A fenced code block is kept whole when it fits in a piece; a longer one is closed at the
// end of each piece and opened again at the start of the next. Blank lines at the ends of
// pieces are dropped, and markdown of only blank lines has no pieces.
func Split(markdown string, limit int) []string {
	limit = max(limit, minSplitLimit)
	s := splitter{limit: limit}
	for _, bl := range parseBlocks(markdown) {
		html := bl.html()
		if size := runes(html); size <= limit {
			// A line that shows nothing (blank, an empty heading) parts paragraphs.
			s.add(bl.markdown(bl.src), size, bl.before == "" && strings.TrimSpace(html) == "")
			continue
		}
		s.flush(len(s.lines))
		s.pieces = append(s.pieces, s.chunks(bl)...)
	}
	s.flush(len(s.lines))
	return s.pieces
}

// splitter packs blocks into pieces. The current piece's lines are blocks' markdown whose
// HTML sizes add up: HTML converts blocks on their own and joins them with "\n".
type splitter struct {
	limit  int
	pieces []string
	lines  []string
	sizes  []int
	blank  []bool
}

func (s *splitter) add(md string, size int, blank bool) {
	if blank && len(s.lines) == 0 {
		return
	}
	for len(s.lines) > 0 && s.size()+1+size > s.limit {
		// Cut at the last paragraph break; without one, before this block.
		cut := len(s.lines)
		for i := len(s.lines) - 1; i > 0; i-- {
			if s.blank[i] {
				cut = i
				break
			}
		}
		s.flush(cut)
	}
	if blank && len(s.lines) == 0 {
		return
	}
	s.lines = append(s.lines, md)
	s.sizes = append(s.sizes, size)
	s.blank = append(s.blank, blank)
}

func (s *splitter) size() int {
	n := len(s.sizes) - 1
	for _, size := range s.sizes {
		n += size
	}
	return n
}

// flush makes a piece of the current lines before cut, and keeps those after it but for the
// blank lines that start them.
func (s *splitter) flush(cut int) {
	end := cut
	for end > 0 && s.blank[end-1] {
		end--
	}
	if end > 0 {
		s.pieces = append(s.pieces, strings.Join(s.lines[:end], "\n"))
	}
	for cut < len(s.lines) && s.blank[cut] {
		cut++
	}
	s.lines, s.sizes, s.blank = s.lines[cut:], s.sizes[cut:], s.blank[cut:]
}

// chunks cuts a block larger than the limit into pieces: as many of its lines as fit in each,
// within its fence or quote, and a line too long for a piece of its own cut within the line.
func (s *splitter) chunks(bl block) []string {
	overhead := runes(bl.before) + runes(bl.after)
	var pieces []string
	for i := 0; i < len(bl.src); {
		size, j := overhead+runes(bl.out[i]), i+1
		if size > s.limit {
			pieces = append(pieces, s.cutLine(bl, bl.src[i])...)
			i++
			continue
		}
		for j < len(bl.src) && size+1+runes(bl.out[j]) <= s.limit {
			size += 1 + runes(bl.out[j])
			j++
		}
		pieces = append(pieces, bl.markdown(bl.src[i:j]))
		i = j
	}
	return pieces
}

// cutLine cuts one line of bl into pieces of the longest prefixes whose HTML, within bl's
// fence or quote, fits: prefixes ending after a space, or anywhere when even a word does not
// fit. A cut may break emphasis that spans it, which then shows as its characters.
func (s *splitter) cutLine(bl block, line string) []string {
	lead := ""
	if bl.quote {
		// Each piece of a quoted line is quoted again.
		lead = "> "
		line, _ = quoted(line)
	}
	fits := func(part string) bool { return runes(HTML(bl.markdown([]string{lead + part}))) <= s.limit }
	var pieces []string
	for {
		if bl.open == "" {
			// Outside code, spaces that would start a piece show nothing.
			line = strings.TrimLeft(line, " \t")
		}
		if line == "" {
			return pieces
		}
		// The prefixes to try: after each space, and after each character. The HTML of a
		// prefix has at least half its runes (a backslash escape makes two characters one), so
		// longer prefixes need no measuring.
		var spaces, all []int
		n := 0
		for i, r := range line {
			if n++; n > 2*s.limit+2 {
				break
			}
			if i > 0 {
				all = append(all, i)
			}
			if r == ' ' {
				spaces = append(spaces, i+1)
			}
		}
		if n <= 2*s.limit+2 {
			spaces, all = append(spaces, len(line)), append(all, len(line))
		}
		fitsPrefix := func(i int) bool { return fits(line[:i]) }
		end := longest(spaces, fitsPrefix)
		if end == 0 {
			end = longest(all, fitsPrefix)
		}
		if end == 0 {
			_, end = utf8.DecodeRuneInString(line)
		}
		pieces = append(pieces, bl.markdown([]string{lead + line[:end]}))
		line = line[end:]
	}
}

// longest is the largest of the ascending cuts that fits, by binary search, or 0 when none
// does. Only cuts that were measured are returned, so a piece fits even where a longer
// prefix measures shorter than a shorter one.
func longest(cuts []int, fits func(int) bool) int {
	best := 0
	lo, hi := 0, len(cuts)-1
	for lo <= hi {
		mid := (lo + hi) / 2
		if fits(cuts[mid]) {
			best, lo = cuts[mid], mid+1
		} else {
			hi = mid - 1
		}
	}
	return best
}

func runes(s string) int { return utf8.RuneCountInString(s) }
