package faketelegram_test

import (
	"testing"

	"github.com/agentharness/harness/infra/faketelegram"
)

func TestParseHTML(t *testing.T) {
	valid := []struct{ in, text string }{
		{"plain", "plain"},
		{"<b>b</b><strong>s</strong><i>i</i><em>e</em><u>u</u><ins>n</ins><s>s</s><strike>k</strike><del>d</del>", "bsieunskd"},
		{`<a href="https://e.com/?a=1&amp;b=2">link</a>`, "link"},
		{`<pre><code class="language-go">x &lt; y</code></pre>`, "x < y"},
		{"<tg-spoiler>s</tg-spoiler><blockquote expandable>q</blockquote>", "sq"},
		{"<B>upper</B>", "upper"},
		{"&lt;&gt;&amp;&quot; &#65;&#x42; &nbsp; a & b", `<>&" AB &nbsp; a & b`},
		{"a > b", "a > b"},
		{"<b>bold <i>both</i></b>", "bold both"},
		{"<a href='x'>single</a> <a href=bare>bare</a> <a>none</a>", "single bare none"},
	}
	for _, tt := range valid {
		got, err := faketelegram.ParseHTML(tt.in)
		if err != nil || got != tt.text {
			t.Errorf("ParseHTML(%q) = %q, %v; want %q", tt.in, got, err, tt.text)
		}
	}

	invalid := []struct{ in, err string }{
		{"a < b", `Unsupported start tag "" at byte offset 2`},
		{"<p>x</p>", `Unsupported start tag "p" at byte offset 0`},
		{"<span>x</span>", `Unsupported start tag "span" at byte offset 0`},
		{"<b>x", `Can't find end tag corresponding to start tag "b"`},
		{"x</b>", "Unexpected end tag at byte offset 1"},
		{"<b><i>x</b></i>", `Unmatched end tag at byte offset 7, expected "</i>", found "</b>"`},
		{"<b", "Unclosed start tag at byte offset 0"},
		{`<a href="x>y</a>`, "Unclosed start tag at byte offset 0"},
		{"<b>x</b", "Unclosed end tag at byte offset 4"},
	}
	for _, tt := range invalid {
		if _, err := faketelegram.ParseHTML(tt.in); err == nil || err.Error() != tt.err {
			t.Errorf("ParseHTML(%q) error = %v, want %q", tt.in, err, tt.err)
		}
	}
}
