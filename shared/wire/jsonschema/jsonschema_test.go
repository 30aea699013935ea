package jsonschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/xeipuuv/gojsonschema"
)

// listen returns the address of a loopback listener and a count of the connections it took.
// It is testenv.Listener, which this internal test cannot import: testenv links this package.
func listen(t *testing.T) (string, func() int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1) // before Close, so a client sees the count before its own error
			c.Close()
		}
	}()
	return l.Addr().String(), n.Load
}

// noHTTP fails the test if anything goes through http.DefaultTransport, which gojsonschema's
// loader uses.
func noHTTP(t *testing.T) {
	old := http.DefaultTransport
	http.DefaultTransport = roundTrip(func(r *http.Request) (*http.Response, error) {
		t.Errorf("request to %s", r.URL)
		return nil, errors.New("no requests in this test")
	})
	t.Cleanup(func() { http.DefaultTransport = old })
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestLocalSchemasCompileAndValidate(t *testing.T) {
	noHTTP(t)
	tests := []struct {
		name, schema string
		valid        []string
		invalid      []string
	}{
		{"definitions", `{"type":"object","definitions":{"x":{"type":"string","maxLength":3}},"properties":{"a":{"$ref":"#/definitions/x"}}}`,
			[]string{`{"a":"abc"}`, `{}`}, []string{`{"a":"abcd"}`, `{"a":1}`}},
		{"draft-07 $schema", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"type":"integer","exclusiveMinimum":0}},"required":["n"]}`,
			[]string{`{"n":1}`}, []string{`{"n":0}`, `{}`}},
		{"draft-04 $schema", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"array","items":{"type":"boolean"}}`,
			[]string{`[true]`}, []string{`["x"]`}},
		{"recursion through #", `{"type":"object","properties":{"child":{"$ref":"#"},"v":{"type":"number"}},"additionalProperties":false}`,
			[]string{`{"child":{"child":{"v":1}}}`}, []string{`{"child":{"w":1}}`}},
		{"a local identifier beside a pointer", `{"definitions":{"x":{"$id":"#pos","minimum":0}},"$ref":"#/definitions/x"}`,
			[]string{`1`}, []string{`-1`}},
		{"identifier with no reference under it", `{"$id":"https://example.com/s.json","type":"object","default":{"id":"abc"}}`,
			[]string{`{}`}, []string{`[]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range tt.valid {
				if res, err := s.Validate(gojsonschema.NewStringLoader(doc)); err != nil || !res.Valid() {
					t.Errorf("%s: valid %v, err %v; want valid", doc, res != nil && res.Valid(), err)
				}
			}
			for _, doc := range tt.invalid {
				if res, err := s.Validate(gojsonschema.NewStringLoader(doc)); err != nil || res.Valid() {
					t.Errorf("%s: valid %v, err %v; want invalid", doc, res != nil && res.Valid(), err)
				}
			}
		})
	}
}

func TestRemoteReferencesAreRefused(t *testing.T) {
	noHTTP(t)
	addr, accepted := listen(t)
	remote := "http://" + addr + "/x"
	tests := []struct {
		name, schema, path string
	}{
		{"loopback", `{"$ref":"` + remote + `"}`, "$ref"},
		{"file", `{"$ref":"file:///etc/passwd"}`, "$ref"},
		{"nested in properties", `{"type":"object","properties":{"a":{"$ref":"` + remote + `"}}}`, "properties.a.$ref"},
		{"in an array", `{"anyOf":[{"type":"null"},{"$ref":"` + remote + `#/y"}]}`, "anyOf[1].$ref"},
		{"relative", `{"$ref":"other.json"}`, "$ref"},
		{"draft meta-schema", `{"$ref":"http://json-schema.org/draft-07/schema#"}`, "$ref"},
		// Reachable as a schema through "#/properties" though it is not one where it stands.
		{"under a property name", `{"definitions":{"d":{"$ref":"#/properties"}},"properties":{"$ref":"` + remote + `"}}`, "properties.$ref"},
		{"inside enum", `{"definitions":{"d":{"$ref":"#/enum/0"}},"enum":[{"$ref":"` + remote + `"}]}`, "enum[0].$ref"},
		// gojsonschema would resolve "#/definitions/d" against the identifier: remote.
		{"identifier above a local reference", `{"$id":"` + remote + `#a","definitions":{"d":{}},"properties":{"p":{"$ref":"#/definitions/d"}}}`, "$id"},
		{"draft-04 identifier", `{"properties":{"p":{"id":"` + remote + `#b","items":{"$ref":"#/c"}}}}`, "properties.p.id"},
		{"identifier beside the reference", `{"allOf":[{"$id":"` + remote + `#c","$ref":"#/x"}]}`, "allOf[0].$id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(tt.schema))
			var re *RefError
			if !errors.As(err, &re) || re.Path != tt.path {
				t.Fatalf("Compile = %v, want a *RefError at %s", err, tt.path)
			}
			if !strings.Contains(err.Error(), `"#…"`) {
				t.Errorf("error %q does not say what is allowed", err)
			}
		})
	}
	if n := accepted(); n != 0 {
		t.Errorf("the loopback listener took %d connections, want 0", n)
	}
}

// The loader is the second line: compiled without the check, a remote reference still loads
// nothing.
func TestLoaderFetchesNothing(t *testing.T) {
	noHTTP(t)
	addr, accepted := listen(t)
	for _, schema := range []string{
		`{"$ref":"http://` + addr + `/x"}`,
		`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`,
		`{"$id":"http://` + addr + `/y#a","definitions":{"d":{}},"properties":{"p":{"$ref":"#/definitions/d"}}}`,
	} {
		var doc any
		if err := json.Unmarshal([]byte(schema), &doc); err != nil {
			t.Fatal(err)
		}
		_, err := gojsonschema.NewSchemaLoader().Compile(localLoader{gojsonschema.NewRawLoader(doc)})
		if err == nil || !strings.Contains(err.Error(), "outside the schema") {
			t.Errorf("compiling %s without the check = %v, want the loader's refusal", schema, err)
		}
	}
	if n := accepted(); n != 0 {
		t.Errorf("the loopback listener took %d connections, want 0", n)
	}
}

func TestNotJSON(t *testing.T) {
	for _, raw := range []string{``, `{"type":`, `{} {}`} {
		if _, err := Compile(json.RawMessage(raw)); err == nil {
			t.Errorf("Compile(%q) succeeded", raw)
		}
	}
}

// A schema that refers back to itself for the same value would make gojsonschema recurse until
// the stack overflows, which no recover can catch: it is refused, naming the reference. One
// whose recursion descends into the value (a tree) compiles and validates.
func TestSelfReferenceWithoutDescentIsRefused(t *testing.T) {
	noHTTP(t)
	laughs := `{"definitions":{`
	for i := range 20 {
		laughs += fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/definitions/d%d"},{"$ref":"#/definitions/d%d"}]},`, i, i+1, i+1)
	}
	laughs += `"d20":{"type":"string"}},"$ref":"#/definitions/d0"}`
	for _, tt := range []struct{ name, schema, path string }{
		{"allOf back to the root", `{"allOf":[{"$ref":"#"}]}`, "allOf[0].$ref"},
		{"the root is its own reference", `{"$ref":"#"}`, "$ref"},
		{"two definitions in a loop", `{"$ref":"#/definitions/a","definitions":{"a":{"$ref":"#/definitions/b"},"b":{"anyOf":[{"$ref":"#/definitions/a"}]}}}`, "definitions.b.anyOf[0].$ref"},
		{"through not", `{"not":{"not":{"$ref":"#"}}}`, "not.not.$ref"},
		{"through if/then", `{"if":{"type":"object"},"then":{"$ref":"#"}}`, "then.$ref"},
		{"through a schema dependency", `{"dependencies":{"a":{"$ref":"#"}}}`, "dependencies.a.$ref"},
		{"a name, not a pointer", `{"definitions":{"x":{"$id":"#x","oneOf":[{"$ref":"#x"}]}},"$ref":"#x"}`, "$ref"},
		{"a pointer to nothing", `{"properties":{"a":{"$ref":"#/definitions/none"}}}`, "properties.a.$ref"},
		{"a name that is not valid UTF-8", "{\"$ref\":\"#\x8d\xc2\"}", "$ref"},
		{"an escaped pointer", `{"definitions":{"a/b":{"allOf":[{"$ref":"#/definitions/a~1b"}]}}}`, "definitions.a/b.allOf[0].$ref"},
		{"fanning out a million checks", laughs, "definitions.d8.allOf[1]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(tt.schema))
			var re *RefError
			if !errors.As(err, &re) || re.Path != tt.path {
				t.Errorf("Compile = %v, want a refusal at %s", err, tt.path)
			}
		})
	}

	tree := `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["name"]}`
	s, err := Compile(json.RawMessage(tree))
	if err != nil {
		t.Fatalf("a tree schema was refused: %v", err)
	}
	doc := `{"name":"leaf"}`
	for range 50 {
		doc = `{"name":"n","children":[` + doc + `]}`
	}
	if res, err := s.Validate(gojsonschema.NewStringLoader(doc)); err != nil || !res.Valid() {
		t.Errorf("a 50-deep tree: %v %v", res, err)
	}
	if res, err := s.Validate(gojsonschema.NewStringLoader(`{"name":"n","children":[{"children":[]}]}`)); err != nil || res.Valid() {
		t.Errorf("a tree missing a name deep down validated: %v %v", res, err)
	}
}
