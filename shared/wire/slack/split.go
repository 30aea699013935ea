package slack

import (
	"strings"
	"unicode/utf8"
)

// closeFence ends a code block cut in two; the next piece reopens it.
const closeFence = "\n```"

// Split cuts text into pieces of at most limit runes (limit <= 0 means MaxText), each cut at the
// last paragraph break before the limit, else the last line break, else the last space, and
// outside fenced code blocks if it can. A code block that must be cut is closed at the cut and
// reopened in the next piece, so every piece shows as written. Pieces are never empty; an empty
// text has none.
func Split(text string, limit int) []string {
	if limit <= 0 {
		limit = MaxText
	}
	var pieces []string
	for text != "" {
		if utf8.RuneCountInString(text) <= limit {
			return append(pieces, text)
		}
		var piece string
		piece, text = cut(text, limit)
		if piece != "" {
			pieces = append(pieces, piece)
		}
		text = strings.TrimLeft(text, "\n")
	}
	return pieces
}

// cut takes the first piece of a text longer than limit runes and returns it and the rest.
func cut(text string, limit int) (piece, rest string) {
	w := runeOffset(text, limit) // text[:p] fits when p <= w
	wClosed := runeOffset(text, max(limit-utf8.RuneCountInString(closeFence), 0))
	var (
		para, line, space, inside int    // the last cut of each kind, 0 for none
		fence, fenceLine          string // the open block's marker and opening line
		hasCode                   bool   // the open block has a line of code before the cut
		hardInside                bool   // the limit falls in a block, on code or its closing line
		reopen                    string // the opening line a cut inside a block repeats
	)
	for pos := 0; pos <= w+1 && pos < len(text); {
		end := strings.IndexByte(text[pos:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += pos
		}
		l := text[pos:end]
		open := fence != ""
		if pos <= w && w <= end {
			hardInside, reopen = open, fenceLine
		}
		switch {
		case open && fenceCloses(l, fence):
			fence = ""
		case open:
			hasCode = hasCode || strings.TrimSpace(l) != ""
		case fenceOpens(l) != "":
			fence, fenceLine, hasCode = fenceOpens(l), l, false
		case strings.TrimSpace(l) == "" && pos > 0:
			para = pos - 1
		case pos <= w:
			if k := lastSpace(text[pos:min(end, w+1)]); k >= 0 && pos+k > 0 {
				space = pos + k
			}
		}
		switch {
		case end > w || end == len(text):
		case fence == "":
			line = end
		case hasCode && end <= wClosed:
			inside, reopen = end, fenceLine
		}
		pos = end + 1
	}
	switch {
	case para > 0:
		return trimPiece(text[:para]), text[para+1:]
	case line > 0:
		return trimPiece(text[:line]), text[line+1:]
	case space > 0:
		return trimPiece(text[:space]), text[space+1:]
	case inside > 0:
		return trimPiece(text[:inside]) + closeFence, reopen + "\n" + text[inside+1:]
	}
	// No break before the limit: cut inside the line, closing and reopening a block it is in.
	if h := entitySafe(text, wClosed); hardInside && h > len(reopen)+1 {
		return trimPiece(text[:h]) + closeFence, reopen + "\n" + strings.TrimPrefix(text[h:], "\n")
	}
	h := entitySafe(text, w)
	if h == 0 {
		h = w
	}
	return text[:h], strings.TrimPrefix(text[h:], " ")
}

// trimPiece drops the blank end of a piece: the break it was cut at shows as nothing.
func trimPiece(s string) string { return strings.TrimRight(s, " \n") }

// lastSpace is the index of the last space of s outside a <…> link or mention, or -1.
func lastSpace(s string) int {
	for k := strings.LastIndexByte(s, ' '); k >= 0; k = strings.LastIndexByte(s[:k], ' ') {
		if open := strings.LastIndexByte(s[:k], '<'); open < 0 || strings.IndexByte(s[open:k], '>') >= 0 {
			return k
		}
	}
	return -1
}
