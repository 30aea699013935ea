package slack_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/agentharness/harness/shared/wire/slack"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		limit int
		want  []string
	}{
		{"fits", "short text", 20, []string{"short text"}},
		{"empty", "", 20, nil},
		{"at the last paragraph break", "one two\nthree\n\nfour five\n\nsix seven eight", 24, []string{"one two\nthree\n\nfour five", "six seven eight"}},
		{"a paragraph break before a later line break", "one two\n\nthree four\nfive six", 20, []string{"one two", "three four\nfive six"}},
		{"else at the last line break", "one two\nthree four\nfive six seven", 20, []string{"one two\nthree four", "five six seven"}},
		{"else at the last space", "one two three four five six", 14, []string{"one two three", "four five six"}},
		{"else in the word, in runes", "ééééééééé🎉🎉🎉", 4, []string{"éééé", "éééé", "é🎉🎉🎉"}},
		{"never through an entity", "a&amp;b&amp;c", 5, []string{"a", "&amp;", "b", "&amp;", "c"}},
		{"not inside a link", "see <https://x.io|the docs> now", 23, []string{"see", "<https://x.io|the docs>", "now"}},
		{"before a code block rather than in it", "Here it is:\n```\nline one\nline two\n```", 30,
			[]string{"Here it is:", "```\nline one\nline two\n```"}},
		{"after a code block rather than in it", "```\na b\n```\nmore words here", 16,
			[]string{"```\na b\n```", "more words here"}},
		{"a long code block is closed and reopened", "```go\naaaa\nbbbb\ncccc\ndddd\n```", 20,
			[]string{"```go\naaaa\nbbbb\n```", "```go\ncccc\ndddd\n```"}},
		{"a code line longer than the limit", "```\n0123456789abcdefghij\n```", 14,
			[]string{"```\n012345\n```", "```\n6789ab\n```", "```\ncdefgh\n```", "```\nij\n```"}},
		{"no limit means MaxText", strings.Repeat("x", slack.MaxText+1), 0,
			[]string{strings.Repeat("x", slack.MaxText), "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := slack.Split(tt.text, tt.limit)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Split(%q, %d) (-want +got):\n%s", tt.text, tt.limit, diff)
			}
			checkPieces(t, tt.text, tt.limit, got)
		})
	}
}

// TestSplitProperties splits generated messages of prose, lists and code at several limits.
func TestSplitProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"the", "harness", "runs", "a", "turn", "é", "🎉", "**bold**", "&amp;", "<https://x.io|link>", "longwordwithoutanyspaceatall"}
	for i := range 300 {
		var b strings.Builder
		for range 1 + r.IntN(12) {
			switch r.IntN(4) {
			case 0:
				b.WriteString("```go\n")
				for range 1 + r.IntN(30) {
					for range r.IntN(12) {
						b.WriteString(words[r.IntN(len(words))] + " ")
					}
					b.WriteString("\n")
				}
				b.WriteString("```\n")
			case 1:
				for range 1 + r.IntN(5) {
					b.WriteString("• " + words[r.IntN(len(words))] + "\n")
				}
			default:
				for range r.IntN(80) {
					b.WriteString(words[r.IntN(len(words))] + " ")
				}
				b.WriteString("\n\n")
			}
		}
		text := b.String()
		for _, limit := range []int{40, 120, slack.MaxText} {
			pieces := slack.Split(text, limit)
			if t.Failed() {
				return
			}
			checkPieces(t, text, limit, pieces)
			if i == 0 && limit == 40 && len(pieces) < 3 {
				t.Fatalf("the generated text was not split: %d pieces", len(pieces))
			}
		}
	}
}

// checkPieces checks what every split must hold: each piece has at most limit runes, is not
// empty, has its code fences balanced, and together the pieces keep all of text.
func checkPieces(t *testing.T, text string, limit int, pieces []string) {
	t.Helper()
	if limit <= 0 {
		limit = slack.MaxText
	}
	for i, p := range pieces {
		if n := utf8.RuneCountInString(p); n > limit || n == 0 {
			t.Errorf("piece %d has %d runes, limit %d: %q", i, n, limit, p)
		}
		if fences(p)%2 != 0 {
			t.Errorf("piece %d has unbalanced fences: %q", i, p)
		}
	}
	if got, want := content(strings.Join(pieces, "\n")), content(text); got != want {
		t.Errorf("the pieces lost text:\n got %q\nwant %q", got, want)
	}
}

func fences(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "```") {
			n++
		}
	}
	return n
}

// content is s without its fence lines and whitespace: what a reader sees of it.
func content(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "```") {
			b.WriteString(strings.Join(strings.Fields(l), ""))
		}
	}
	return b.String()
}
