package slack_test

import (
	"testing"

	"github.com/agentharness/harness/shared/wire/slack"
)

func TestMrkdwn(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"bold", "**bold** and __bold__", "*bold* and *bold*"},
		{"italic", "*italic* and _italic_", "_italic_ and _italic_"},
		{"bold and italic", "***both***", "*_both_*"},
		{"italic in bold", "**bold *it* bold**", "*bold _it_ bold*"},
		{"bold in italic", "*it **bold** it*", "_it *bold* it_"},
		{"strike", "~~gone~~ and ~kept~", "~gone~ and ~kept~"},
		{"link", "[the docs](https://go.dev/doc/)", "<https://go.dev/doc/|the docs>"},
		{"link with a query is not escaped", "[q](https://x.io/?a=1&b=2)", "<https://x.io/?a=1&b=2|q>"},
		{"link text is escaped", "[a < b](https://x.io)", "<https://x.io|a &lt; b>"},
		{"link that would break the syntax", "[t](https://x.io/a|b>c)", "<https://x.io/a%7Cb%3Ec|t>"},
		{"link text same as the URL", "[https://x.io](https://x.io)", "<https://x.io>"},
		{"image", "![a chart](https://x.io/c.png)", "<https://x.io/c.png|a chart>"},
		{"relative link keeps its text", "see [the file](./notes.md)", "see the file"},
		{"autolink", "<https://x.io/a?b=1&c=2>", "<https://x.io/a?b=1&c=2>"},
		{"bare URL keeps its underscores", "https://x.io/_a_/b*c*", "https://x.io/_a_/b*c*"},
		{"heading", "# Title", "*Title*"},
		{"heading with closing hashes and bold", "### **Sub** title ###", "*Sub title*"},
		{"heading with italic", "## A _nice_ day", "*A _nice_ day*"},
		{"not a heading", "#hashtag and C#", "#hashtag and C#"},
		{"bullets", "- one\n* two\n+ three\n  - nested", "• one\n• two\n• three\n  • nested"},
		{"bullet with markup", "- **key**: value", "• *key*: value"},
		{"numbered list stays", "1. first\n2. second", "1. first\n2. second"},
		{"rule", "---\n* * *", "───\n───"},
		{"quote", "> **note** this", "&gt; *note* this"},
		{"escaping", "a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"},
		{"no mention or broadcast from the model", "<!channel> <@U123>", "&lt;!channel&gt; &lt;@U123&gt;"},
		{"backslash escapes", `\*not italic\* \<x\>`, "*not italic* &lt;x&gt;"},
		{"code span kept", "`**x** <y> _z_`", "`**x** &lt;y&gt; _z_`"},
		{"double-backtick code span", "``a ` b``", "`a ` b`"},
		{"bold around code", "**`x`**", "*`x`*"},
		{"unclosed markers stay", "**open and _open", "**open and _open"},
		{"intraword underscores", "snake_case_name and __init__", "snake_case_name and *init*"},
		{"arithmetic", "2 * 3 * 4 = 24", "2 * 3 * 4 = 24"},
		{"fenced code kept", "```go\nif a < b && **c** {\n  _x_ = [y](z)\n}\n```",
			"```\nif a &lt; b &amp;&amp; **c** {\n  _x_ = [y](z)\n}\n```"},
		{"tilde fence", "~~~\n# not a heading\n~~~", "```\n# not a heading\n```"},
		{"longer fence holds a shorter one", "````\n```\nx\n````", "```\n```\nx\n```"},
		{"text after a fence converts again", "```\n*a*\n```\n*b*", "```\n*a*\n```\n_b_"},
		{"unclosed fence is closed", "```\ncode", "```\ncode\n```"},
		{"CRLF", "**a**\r\n- b", "*a*\n• b"},
		{"unicode", "**héllo** _wörld_ 🎉", "*héllo* _wörld_ 🎉"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slack.Mrkdwn(tt.in); got != tt.want {
				t.Errorf("Mrkdwn(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEscape(t *testing.T) {
	if got, want := slack.Escape("<a> & <b>"), "&lt;a&gt; &amp; &lt;b&gt;"; got != want {
		t.Errorf("Escape = %q, want %q", got, want)
	}
}
