package telegram_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentharness/harness/infra/faketelegram"
	"github.com/agentharness/harness/shared/wire/telegram"
)

func TestSplit(t *testing.T) {
	para := func(c string, n int) string { return strings.TrimSpace(strings.Repeat(c+" ", n)) }
	tests := []struct {
		name  string
		in    string
		limit int
		want  []string
	}{
		{"fits", "**short** text", 100, []string{"**short** text"}},
		{"blank", "\n  \n\n", 100, nil},
		{"blank ends dropped", "\n\nhello\n\n", 100, []string{"hello"}},
		{
			"at paragraphs",
			para("a", 30) + "\n\n" + para("b", 30) + "\n\n" + para("c", 30),
			130,
			[]string{para("a", 30) + "\n\n" + para("b", 30), para("c", 30)},
		},
		{
			"at the paragraph before a line that does not fit",
			para("a", 30) + "\n\n" + para("b", 30) + "\n" + para("c", 30),
			130,
			[]string{para("a", 30), para("b", 30) + "\n" + para("c", 30)},
		},
		{"exactly the limit", strings.Repeat("a", 49) + "\n" + strings.Repeat("b", 50), 100, []string{strings.Repeat("a", 49) + "\n" + strings.Repeat("b", 50)}},
		{"one over the limit", strings.Repeat("a", 50) + "\n" + strings.Repeat("b", 50), 100, []string{strings.Repeat("a", 50), strings.Repeat("b", 50)}},
		{
			"at lines when a paragraph is too long",
			para("a", 40) + "\n" + para("b", 40) + "\n" + para("c", 40),
			170,
			[]string{para("a", 40) + "\n" + para("b", 40), para("c", 40)},
		},
		{
			"after spaces when a line is too long",
			para("word", 50),
			100,
			[]string{para("word", 20) + " ", para("word", 20) + " ", para("word", 10)},
		},
		{
			"anywhere when a word is too long",
			strings.Repeat("x", 250),
			100,
			[]string{strings.Repeat("x", 100), strings.Repeat("x", 100), strings.Repeat("x", 50)},
		},
		{
			"a fence that fits is kept whole",
			para("a", 40) + "\n\n```go\n" + para("x", 20) + "\n\n" + para("y", 20) + "\n```",
			130, // the fence's HTML: 44 runes of tags, 80 of code
			[]string{para("a", 40), "```go\n" + para("x", 20) + "\n\n" + para("y", 20) + "\n```"},
		},
		{
			"a longer fence is closed and opened again",
			"```py\n" + para("x", 20) + "\n" + para("y", 20) + "\n" + para("z", 20) + "\n```\nafter",
			130,
			[]string{
				"```py\n" + para("x", 20) + "\n" + para("y", 20) + "\n```",
				"```py\n" + para("z", 20) + "\n```",
				"after",
			},
		},
		{
			"a long quoted line is quoted in each piece",
			"> " + para("q", 60),
			100,
			[]string{"> " + para("q", 37) + " ", "> " + para("q", 23)}, // 25 runes of <blockquote> tags
		},
		{"a lone long word escapes to more", strings.Repeat("<", 120), 100, []string{strings.Repeat("<", 25), strings.Repeat("<", 25), strings.Repeat("<", 25), strings.Repeat("<", 25), strings.Repeat("<", 20)}},
		{"small limits count as 100", para("a", 60), 10, []string{para("a", 50) + " ", para("a", 10)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := telegram.Split(tt.in, tt.limit)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Split(%q, %d)\n got %q\nwant %q", tt.in, tt.limit, got, tt.want)
			}
			checkPieces(t, tt.in, max(tt.limit, 100), got)
		})
	}
}

// checkPieces fails unless each piece's HTML is valid and within limit, and each fence it
// opens it closes.
func checkPieces(t *testing.T, in string, limit int, pieces []string) {
	t.Helper()
	for i, p := range pieces {
		html := telegram.HTML(p)
		if n := utf8.RuneCountInString(html); n > limit {
			t.Errorf("Split(%q): piece %d's HTML has %d runes, over %d: %q", in, i, n, limit, html)
		}
		if _, err := faketelegram.ParseHTML(html); err != nil {
			t.Errorf("Split(%q): piece %d's HTML is refused: %v", in, i, err)
		}
		if strings.TrimSpace(p) == "" {
			t.Errorf("Split(%q): piece %d is blank", in, i)
		}
	}
}

// A long answer of every kind of block goes out whole: the pieces hold every word, each
// within Telegram's limit, and a code block cut in two stays code in both.
func TestSplitLongAnswer(t *testing.T) {
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, "## Part %d\n\nSome **bold** and _italic_ text with `code <%d>` and [a link](https://example.com/%d).\n", i, i, i)
		fmt.Fprintf(&b, "- item one & two\n- item three\n\n> a quote %d\n\n", i)
		if i%10 == 0 {
			b.WriteString("```go\n")
			for j := range 80 {
				fmt.Fprintf(&b, "fmt.Println(%d < %d && %d > 0)\n", i, j, j)
			}
			b.WriteString("```\n\n")
		}
	}
	md := b.String()
	pieces := telegram.Split(md, telegram.MaxText)
	if len(pieces) < 3 {
		t.Fatalf("got %d pieces, want several", len(pieces))
	}
	checkPieces(t, "the long answer", telegram.MaxText, pieces)
	words := func(s string) []string { return strings.Fields(strings.ReplaceAll(s, "```go", "")) }
	var got []string
	for _, p := range pieces {
		got = append(got, words(p)...)
		if strings.Count(p, "```")%2 != 0 {
			t.Errorf("a piece has an unbalanced fence: %q", p)
		}
		if strings.HasPrefix(p, "fmt.Println") {
			t.Errorf("a piece of a code block was not reopened as code: %q", p[:40])
		}
	}
	want := strings.Fields(strings.ReplaceAll(md, "```go", ""))
	if g, w := strings.Join(got, " "), strings.Join(want, " "); strings.ReplaceAll(g, "```", "") != strings.ReplaceAll(w, "```", "") {
		t.Errorf("the pieces do not hold the answer's words in order")
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("a\n\nb", 100)
	f.Add("```\n"+strings.Repeat("<x> ", 200)+"\n```", 120)
	f.Add("> "+strings.Repeat("**q** ", 80), 100)
	f.Add(strings.Repeat("\\*", 300), 150)
	f.Add("# "+strings.Repeat("word ", 100)+"#####", 100)
	f.Fuzz(func(t *testing.T, md string, limit int) {
		limit = 100 + abs(limit)%400
		checkPieces(t, md, limit, telegram.Split(md, limit))
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
