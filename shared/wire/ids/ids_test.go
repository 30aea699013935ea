package ids

import (
	"strings"
	"testing"
)

func TestGrammar(t *testing.T) {
	for _, tc := range []struct {
		id    string
		valid bool
	}{
		{"conv_1", true},
		{"a", true},
		{"msg-AbC.9:x", true},
		{strings.Repeat("x", MaxLen), true},
		{"", false},
		{strings.Repeat("x", MaxLen+1), false},
		{strings.Repeat("x", 1025), false},
		{"a#b", false},
		{"a/b", false},
		{"a b", false},
		{"a\r\nX-Injected: 1", false},
		{"a\x00", false},
		{"café", false},
		{"日本", false},
	} {
		if got := Valid(tc.id); got != tc.valid {
			t.Errorf("Valid(%.20q) = %v, want %v", tc.id, got, tc.valid)
		}
		if p := Problem(tc.id); (p == "") != tc.valid {
			t.Errorf("Problem(%.20q) = %q, want valid=%v", tc.id, p, tc.valid)
		}
	}
}

func TestProblemNamesTheFault(t *testing.T) {
	for id, want := range map[string]string{
		"":                             "is empty",
		strings.Repeat("x", 129):       "is 129 characters long",
		"ab\ncd":                       `has '\n' at byte 2`,
		"\xc3\xa9":                     "at byte 0",
		strings.Repeat("y", 3000) + "": "is 3000 characters long",
	} {
		if got := Problem(id); !strings.Contains(got, want) {
			t.Errorf("Problem(%.20q) = %q, want it to contain %q", id, got, want)
		}
	}
}
