package testenv

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// BadIDs break the id grammar in each way a client has: too long (129, the 1,025 and 2,022
// that once reached DynamoDB, 3,000), empty where it is a path segment, control characters
// (header injection in X-Conversation-Id), non-ASCII, and the '#' that joins key parts.
var BadIDs = map[string]string{
	"129 characters":   strings.Repeat("x", 129),
	"1025 characters":  strings.Repeat("x", 1025),
	"2022 characters":  strings.Repeat("x", 2022),
	"3000 characters":  strings.Repeat("x", 3000),
	"CRLF":             "conv\r\nX-Injected: 1",
	"NUL":              "conv\x00",
	"tab":              "conv\t1",
	"non-ASCII":        "café",
	"key separator":    "a#b",
	"path separator":   "a/b",
	"space":            "a b",
	"unicode line sep": "a\u2028b",
}

// WantFieldError fails unless the answer is a 400 JSON error whose "field" is field; an empty
// field means the body must name none.
func WantFieldError(t testing.TB, status int, body []byte, field string) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, body)
	}
	msg, _ := got["error"].(string)
	gotField, hasField := got["field"]
	switch {
	case status != http.StatusBadRequest || msg == "":
		t.Errorf("got %d %s, want 400 with an error message", status, body)
	case field == "" && hasField:
		t.Errorf("got field %v (%s), want no field", gotField, body)
	case field != "" && gotField != field:
		t.Errorf("got field %v (%s), want %q", gotField, body, field)
	}
}
