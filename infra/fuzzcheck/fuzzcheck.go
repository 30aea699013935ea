// Package fuzzcheck holds what the fuzz targets of several packages assert about an input they
// refuse or accept, without the local stack (the targets run under go test -fuzz alone).
package fuzzcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/google/go-cmp/cmp"
)

// JSONEqual compares raw JSON by value: spacing, escaping and an absent value against null do
// not count.
var JSONEqual = cmp.Comparer(func(a, b json.RawMessage) bool {
	norm := func(r json.RawMessage) string {
		if len(bytes.TrimSpace(r)) == 0 {
			return "null"
		}
		var v any
		if json.Unmarshal(r, &v) != nil {
			return string(r)
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	return norm(a) == norm(b)
})

// isObject reports whether body is one well-formed JSON object: a body whose refusal must name a
// field.
func isObject(body []byte) bool {
	b := bytes.TrimSpace(body)
	return json.Valid(b) && len(b) > 0 && b[0] == '{'
}

// Refusal asserts err is a client error, and that it names a field when body is an object.
func Refusal(t testing.TB, body []byte, err error) {
	t.Helper()
	var e *httpjson.Error
	if !errors.As(err, &e) {
		t.Fatalf("refusal %T %v is not an *httpjson.Error", err, err)
	}
	if e.Status != http.StatusBadRequest && e.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("refusal status %d (%s), want 400 or 413", e.Status, e.Message)
	}
	field, _ := e.Extra["field"].(string)
	if isObject(body) && field == "" {
		t.Fatalf("refusal of a JSON object names no field: %s", e.Message)
	}
	if field != "" && !strings.Contains(e.Message, field) {
		t.Fatalf("refusal %q does not mention its field %q", e.Message, field)
	}
}
