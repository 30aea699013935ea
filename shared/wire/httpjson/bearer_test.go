package httpjson_test

import (
	"net/http"
	"testing"

	"github.com/agentharness/harness/shared/wire/httpjson"
)

// bearer is the one reader of Authorization: Bearer for every route (the turn, account and
// admin routes, the completion route and the WebSocket $connect). Its scheme is
// case-insensitive, as RFC 7235 §2.1 has it.
func TestBearer(t *testing.T) {
	for _, tt := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer hsk_1", "hsk_1", true},
		{"bearer hsk_1", "hsk_1", true},
		{"BEARER hsk_1", "hsk_1", true},
		{"bEaReR hsk_1", "hsk_1", true},
		{"Bearer   hsk_1  ", "hsk_1", true},
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearer    ", "", false},
		{"Bearerhsk_1", "", false},
		{"Bearers hsk_1", "", false},
		{"Basic hsk_1", "", false},
		{"hsk_1", "", false},
	} {
		r := &http.Request{Header: http.Header{}}
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		token, ok := httpjson.Bearer(r)
		if token != tt.token || ok != tt.ok {
			t.Errorf("httpjson.Bearer(%q) = %q, %v; want %q, %v", tt.header, token, ok, tt.token, tt.ok)
		}
	}
}
