package telegram_test

import (
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/faketelegram"
	"github.com/agentharness/harness/shared/wire/telegram"
)

func TestHTML(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "Hello, world.", "Hello, world."},
		{"escapes only & < >", `a < b && c > d "quoted" 'single'`, `a &lt; b &amp;&amp; c &gt; d "quoted" 'single'`},
		{"raw HTML is text", "<b>not bold</b> <script>x</script>", "&lt;b&gt;not bold&lt;/b&gt; &lt;script&gt;x&lt;/script&gt;"},
		{"entities are text", "&amp; &lt;", "&amp;amp; &amp;lt;"},
		{"bold", "a **bold** b __also__", "a <b>bold</b> b <b>also</b>"},
		{"italic", "*one* and _two_", "<i>one</i> and <i>two</i>"},
		{"bold italic", "***both***", "<i><b>both</b></i>"},
		{"nested", "**bold *and italic***", "<b>bold <i>and italic</i></b>"},
		{"strike", "~~gone~~ ~one~ ~~~three~~~", "<s>gone</s> ~one~ ~~~three~~~"},
		{"snake_case stays", "call my_func_name and __init__ file_2.go", "call my_func_name and <b>init</b> file_2.go"},
		{"underscores within words do not open", "a_b_ and x__y__", "a_b_ and x__y__"},
		{"unmatched delimiters stay", "2 * 3 = 6, a**b, **open", "2 * 3 = 6, a**b, **open"},
		{"emphasis stays on its line", "**start\nend**", "**start\nend**"},
		{"overlapping runs nest", "*a **b* c**", "<i>a <i><i>b</i> c</i></i>"},
		{"escaped", `\*not italic\* \_ \\ \<`, `*not italic* _ \ &lt;`},
		{"code", "run `rm -rf <dir> && **x**` now", "run <code>rm -rf &lt;dir&gt; &amp;&amp; **x**</code> now"},
		{"code with backticks", "`` a`b `` and `unclosed", "<code>a`b</code> and `unclosed"},
		{"link", "see [the **docs**](https://go.dev/doc?a=1&b=2)", `see <a href="https://go.dev/doc?a=1&amp;b=2">the <b>docs</b></a>`},
		{"tg link", "[me](tg://user?id=42)", `<a href="tg://user?id=42">me</a>`},
		{"link with quote", `[x](https://e.com/"onmouseover)`, `<a href="https://e.com/&quot;onmouseover">x</a>`},
		{"link with parens and title", `[w](https://en.wikipedia.org/wiki/Go_(language) "Go")`, `<a href="https://en.wikipedia.org/wiki/Go_(language)">w</a>`},
		{"other schemes are text", "[click](javascript:alert(1)) [f](file:///etc/passwd)", "[click](javascript:alert(1)) [f](file:///etc/passwd)"},
		{"link in link text", "[a [b](https://b.com) c](https://a.com)", `<a href="https://a.com">a [b](https://b.com) c</a>`},
		{"empty link text", "[](https://a.com)", `<a href="https://a.com">https://a.com</a>`},
		{"image", "![chart](https://e.com/c.png)", `<a href="https://e.com/c.png">chart</a>`},
		{"autolink", "<https://e.com/a?b&c>", "https://e.com/a?b&amp;c"},
		{"heading", "# Title\n### Sub *x* ###\n#hashtag\n# C#", "<b>Title</b>\n<b>Sub <i>x</i></b>\n#hashtag\n<b>C#</b>"},
		{"empty heading", "#", ""},
		{"bullets", "- one\n* two\n  + nested **b**\n-not", "• one\n• two\n  • nested <b>b</b>\n-not"},
		{"numbered", "1. first\n2. second", "1. first\n2. second"},
		{"rule", "a\n\n---\n* * *\nb", "a\n\n———\n———\nb"},
		{"quote", "> quoted **b**\n> - item\nafter", "<blockquote>quoted <b>b</b>\n• item</blockquote>\nafter"},
		{"fence", "```go\nif a < b && c {\n\t**x**\n}\n```\nafter", "<pre><code class=\"language-go\">if a &lt; b &amp;&amp; c {\n\t**x**\n}</code></pre>\nafter"},
		{"fence without language", "~~~\n<tag>\n~~~", "<pre>&lt;tag&gt;</pre>"},
		{"fence with unsafe language", "```a\"b\nx\n```", "<pre>x</pre>"},
		{"indented fence in a list", "1. code:\n   ```sh\n   ls\n     -l\n   ```", "1. code:\n<pre><code class=\"language-sh\">ls\n  -l</code></pre>"},
		{"unclosed fence runs to the end", "```\na\n\nb", "<pre>a\n\nb</pre>"},
		{"longer closing fence", "````\n```\n````", "<pre>```</pre>"},
		{"crlf", "**a**\r\nb", "<b>a</b>\nb"},
		{"unicode flanking", "«*слово*» 👋 **жирный**", "«<i>слово</i>» 👋 <b>жирный</b>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := telegram.HTML(tt.in)
			if got != tt.want {
				t.Errorf("HTML(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if _, err := faketelegram.ParseHTML(got); err != nil {
				t.Errorf("HTML(%q) = %q, which Telegram refuses: %v", tt.in, got, err)
			}
		})
	}
}

// Whatever the markdown, its HTML is what Telegram takes: known tags, balanced, escaped.
func FuzzHTML(f *testing.F) {
	for _, s := range []string{
		"**a *b** c*", "[x](https://a.com) `y` ~~z~~", "```go\nx\n", "> q\n# h\n- b", "_a_b_ *a*b*",
		"<&>", "***x** y*", "[**a](https://b) c**", "~~a **b~~ c**", "\\", "`", "[a](<https://x y>)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		html := telegram.HTML(md)
		if _, err := faketelegram.ParseHTML(html); err != nil {
			t.Fatalf("HTML(%q) = %q, which Telegram refuses: %v", md, html, err)
		}
		if strings.Contains(html, "<a href=\"javascript") {
			t.Fatalf("HTML(%q) = %q links a script", md, html)
		}
	})
}
