package ids

import (
	"net/http"
	"testing"
	"unicode/utf8"
)

// An id the grammar accepts is safe where ids go: a header value (X-Conversation-Id) keeps it
// byte for byte, it holds no '#' (the key separator) and it is valid UTF-8; Valid and Problem
// always agree.
func FuzzGrammar(f *testing.F) {
	for _, s := range []string{"conv_1", "", "a#b", "café", "x\r\ny", "evt_a.b:c-d", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		valid := Valid(id)
		if p := Problem(id); (p == "") != valid {
			t.Fatalf("Valid(%q) = %v but Problem = %q", id, valid, p)
		}
		if !valid {
			return
		}
		h := http.Header{}
		h.Set("X-Conversation-Id", id)
		if got := h.Get("X-Conversation-Id"); got != id || len(id) > MaxLen || !utf8.ValidString(id) {
			t.Fatalf("accepted id %q does not survive a header (got %q)", id, got)
		}
		for i := 0; i < len(id); i++ {
			if id[i] == '#' || id[i] == '/' || id[i] <= ' ' || id[i] >= 0x7f {
				t.Fatalf("accepted id %q has byte %q", id, id[i])
			}
		}
	})
}
