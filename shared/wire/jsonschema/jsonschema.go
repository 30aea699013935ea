// Package jsonschema compiles the JSON schemas clients send (tool parameters, approval rules)
// without ever reading anything they point at. gojsonschema's own loaders fetch http(s)
// references and open file ones, which would let a client make the harness read its files or
// reach its network; here a schema may only refer within itself ("#…"), anything else is
// refused with the path where it was found, and the loader refuses every reference it is
// asked for, so nothing is fetched even for a reference the check did not see.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/xeipuuv/gojsonschema"
)

// RefError reports a reference or identifier that would point outside the schema.
type RefError struct {
	// Path is where it is in the schema: "$ref", "properties.a.$ref", "allOf[1].$id".
	Path    string
	Problem string
}

func (e *RefError) Error() string { return e.Path + ": " + e.Problem }

// Compile checks that raw refers only within itself and compiles it. A reference that is not
// local comes back as *RefError.
func Compile(raw json.RawMessage) (s *gojsonschema.Schema, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not valid JSON: unexpected data after the schema")
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("a schema must be a JSON object")
	}
	if err := checkRefs(doc, "", ""); err != nil {
		return nil, err
	}
	if err := checkRecursion(doc); err != nil {
		return nil, err
	}
	// gojsonschema panics on some inputs it does not expect (a number too large for a float
	// where it wants one): that is a refusal of this schema, not a crash of the server.
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("the schema could not be compiled: %v", r)
		}
	}()
	// The document checked is the one compiled, not a second decoding of raw.
	return gojsonschema.NewSchemaLoader().Compile(localLoader{gojsonschema.NewRawLoader(doc)})
}

// checkRefs refuses, anywhere in v (a local pointer can make any part of the document a
// schema), a $ref that is not "#…", and a $id or id that is not "#…" above a $ref: gojsonschema
// resolves a reference against the nearest such identifier, so it would turn "#/x" into a
// remote address. idAt is the path of the identifier in scope, empty for none.
func checkRefs(v any, path, idAt string) error {
	switch n := v.(type) {
	case []any:
		for i, e := range n {
			if err := checkRefs(e, path+"["+strconv.Itoa(i)+"]", idAt); err != nil {
				return err
			}
		}
	case map[string]any:
		// An object's own identifier is the base of its own $ref too.
		for _, k := range []string{"$id", "id"} {
			if id, ok := n[k].(string); ok && !strings.HasPrefix(id, "#") {
				idAt = join(path, k)
				break
			}
		}
		if ref, ok := n["$ref"].(string); ok {
			at := join(path, "$ref")
			if !strings.HasPrefix(ref, "#") {
				return &RefError{Path: at, Problem: fmt.Sprintf("%q is not a local reference: a schema may only use \"#…\" references to its own parts", ref)}
			}
			if idAt != "" {
				return &RefError{Path: idAt, Problem: fmt.Sprintf("is not a local identifier, so the reference at %s would resolve outside the schema: a schema may only use \"#…\" identifiers", at)}
			}
		}
		for _, k := range sortedKeys(n) {
			if err := checkRefs(n[k], join(path, k), idAt); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// localLoader is a schema whose references are never loaded: gojsonschema asks the root's
// LoaderFactory for any document the schema does not hold itself.
type localLoader struct{ gojsonschema.JSONLoader }

func (localLoader) LoaderFactory() gojsonschema.JSONLoaderFactory { return refuseAll{} }

type refuseAll struct{}

func (refuseAll) New(source string) gojsonschema.JSONLoader {
	// The reference loader is kept only for its JsonReference, which parses source and reads
	// nothing.
	return refused{gojsonschema.NewReferenceLoader(source), source}
}

// refused is a loader for a reference outside the schema: loading it is an error.
type refused struct {
	gojsonschema.JSONLoader
	source string
}

func (r refused) LoadJSON() (any, error) {
	return nil, fmt.Errorf("%q is outside the schema: a schema may only use \"#…\" references to its own parts", r.source)
}

func (refused) LoaderFactory() gojsonschema.JSONLoaderFactory { return refuseAll{} }
