// Package strictjson holds the rules every JSON document from a client is held to beyond
// encoding/json's: an object may not name a key twice. encoding/json keeps the last of two
// equal keys, so {"approved":false,"approved":true} would silently mean true; the harness
// refuses such a document instead, naming the key.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// maxDepth matches encoding/json's nesting limit: deeper documents are refused by the
// decoder that reads them after CheckKeys, so the walk stops there instead of recursing on.
const maxDepth = 10000

// DuplicateKeyError names a key that appears twice in one object.
type DuplicateKeyError struct {
	// Field is the key's path in the document: "tools.test_async.enabled", "messages[0].id".
	Field string
}

func (e *DuplicateKeyError) Error() string {
	return e.Field + ": the key appears more than once in its object (each key may appear once)"
}

// CheckKeys returns a *DuplicateKeyError for the first key that appears twice in one of
// data's objects, and nil otherwise. It leaves syntax errors to the decoder that reads data
// next, so a malformed document gets that decoder's usual message.
func CheckKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := walk(dec, "", 0)
	var dup *DuplicateKeyError
	if errors.As(err, &dup) {
		return dup
	}
	return nil
}

// errStop ends the walk without a finding: a syntax error or a document deeper than maxDepth.
var errStop = errors.New("stop")

func walk(dec *json.Decoder, path string, depth int) error {
	if depth > maxDepth {
		return errStop
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil
		}
		return errStop
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errStop
			}
			key, _ := kt.(string)
			field := join(path, key)
			if seen[key] {
				return &DuplicateKeyError{Field: field}
			}
			seen[key] = true
			if err := walk(dec, field, depth+1); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walk(dec, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return errStop
	}
	return nil
}

func join(path, key string) string {
	if key == "" {
		key = `""` // so that an empty key is named too
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
