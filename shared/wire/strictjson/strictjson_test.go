package strictjson

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckKeys(t *testing.T) {
	tests := []struct {
		name, doc, field string
	}{
		{"top level", `{"agentId":"a","agentId":"b"}`, "agentId"},
		{"nested object", `{"tools":{"test_async":{"enabled":true,"enabled":false}}}`, "tools.test_async.enabled"},
		{"inside an array", `{"messages":[{"id":"1"},{"id":"2","id":"3"}]}`, "messages[1].id"},
		{"array of arrays", `[[{"a":1}],[{"b":1,"b":2}]]`, "[1][0].b"},
		{"empty key twice, named as \"\"", `{"":1,"":2}`, `""`},
		{"escaped spelling of the same key", `{"approved":false,"appr\u006fved":true}`, "approved"},
		{"first of several", `{"a":{"x":1,"x":2},"a":3}`, "a.x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckKeys([]byte(tt.doc))
			var dup *DuplicateKeyError
			if !errors.As(err, &dup) {
				t.Fatalf("CheckKeys(%s) = %v, want a *DuplicateKeyError", tt.doc, err)
			}
			if dup.Field != tt.field {
				t.Errorf("Field = %q, want %q", dup.Field, tt.field)
			}
			if !strings.Contains(err.Error(), "more than once") {
				t.Errorf("message %q does not say what is wrong", err)
			}
		})
	}
}

func TestCheckKeysAccepts(t *testing.T) {
	for _, doc := range []string{
		`{}`, `[]`, `"x"`, `1`, `null`,
		`{"a":{"a":{"a":1}}}`,                        // one key per object, however nested
		`[{"id":1},{"id":2}]`,                        // the same key in sibling objects
		`{"A":1,"a":2}`,                              // keys differ by case
		`{"messages":[{"parts":[{"type":"text"}]}]}`, // deep and valid
		`{"a":1,`,                       // malformed: left to the decoder
		`{"a":1}{"a":1,"a":2}`,          // trailing data: left to the decoder
		strings.Repeat("[", maxDepth+5), // too deep: left to the decoder
	} {
		if err := CheckKeys([]byte(doc)); err != nil {
			t.Errorf("CheckKeys(%.40s) = %v, want nil", doc, err)
		}
	}
}

func FuzzCheckKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":[{"b":1,"c":2}]}`, `[1,2,{"x":{"x":1}}]`, `{"a\u0000":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := CheckKeys(data)
		if err == nil {
			return
		}
		var dup *DuplicateKeyError
		if !errors.As(err, &dup) {
			t.Fatalf("CheckKeys returned %T %v: want nil or *DuplicateKeyError", err, err)
		}
		// A reported duplicate is real: the document is valid JSON up to it, so a key was
		// named twice; the same input reports the same field.
		if again := CheckKeys(data); again == nil || again.Error() != err.Error() {
			t.Fatalf("CheckKeys is not deterministic: %v then %v", err, again)
		}
	})
}
