package jsonschema

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/xeipuuv/gojsonschema"
)

// Whatever a client sends as a schema, compiling it reaches no network, a refused reference
// names where it was, and an accepted schema validates without panicking.
func FuzzCompile(f *testing.F) {
	var requests atomic.Int64
	old := http.DefaultTransport
	http.DefaultTransport = roundTrip(func(*http.Request) (*http.Response, error) {
		requests.Add(1)
		return nil, errors.New("no requests while fuzzing")
	})
	f.Cleanup(func() { http.DefaultTransport = old })
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"$ref":"#/definitions/x"}},"definitions":{"x":{"type":"string"}}}`,
		`{"$ref":"http://127.0.0.1:1/x"}`,
		`{"$id":"http://example.com/s#a","definitions":{"d":{}},"$ref":"#/definitions/d"}`,
		`{"properties":{"$ref":{"$ref":"file:///etc/passwd"}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"integer","minimum":1}`,
		`{"allOf":[{"$ref":"#"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := Compile(raw)
		if n := requests.Load(); n != 0 {
			t.Fatalf("compiling %s made %d HTTP requests", raw, n)
		}
		var re *RefError
		if errors.As(err, &re) && (re.Path == "" || re.Problem == "") {
			t.Fatalf("refusal %q names no path of %s", err, raw)
		}
		if err != nil {
			return
		}
		for _, v := range []string{`null`, `{}`, `{"a":"x"}`, `[1,"2"]`, `3`} {
			if _, err := s.Validate(gojsonschema.NewStringLoader(v)); err != nil && requests.Load() != 0 {
				t.Fatalf("validating against %s made HTTP requests", raw)
			}
		}
	})
}
