// Package httpjson is JSON over HTTP as every edge of the harness speaks it: the error a client
// gets (an *Error, safe to show, naming the field at fault), strict decoding of request bodies,
// the bearer secret, and the checks of the ids a client sends.
package httpjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/ids"
	"github.com/agentharness/harness/shared/wire/strictjson"
)

// Error is an HTTP error whose Message is safe to show to the client.
type Error struct {
	Status  int
	Message string
	// Extra fields merged into the JSON body.
	Extra map[string]any
	// Cause is the condition behind the refusal, for callers that branch on it.
	Cause error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Cause }

// WriteError answers with e: {"error": Message, ...Extra}.
func WriteError(w http.ResponseWriter, e *Error) {
	body := map[string]any{"error": e.Message}
	for k, v := range e.Extra {
		body[k] = v
	}
	WriteJSON(w, e.Status, body)
}

// WriteJSON answers with v as JSON (HTML characters unescaped: nothing renders it as HTML).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// Bearer returns the request's bearer token. Every route reads Authorization through it. The
// scheme is case-insensitive (RFC 7235 §2.1): "bearer x" and "BEARER x" work like "Bearer x".
func Bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// ErrorWriter answers failed requests.
type ErrorWriter struct{ Logger *slog.Logger }

// Fail answers with err if it is an *Error and with a bare 500 otherwise, logging the cause.
func (ew ErrorWriter) Fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if errors.As(err, &e) {
		WriteError(w, e)
		return
	}
	ew.Logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	WriteError(w, &Error{Status: http.StatusInternalServerError, Message: "internal error"})
}

// CheckKeys refuses a body that names a key twice in one object, with 400 naming the field.
func CheckKeys(body []byte) error {
	var dup *strictjson.DuplicateKeyError
	if errors.As(strictjson.CheckKeys(body), &dup) {
		return &Error{Status: http.StatusBadRequest, Message: dup.Error(), Extra: map[string]any{"field": dup.Field}}
	}
	return nil
}

// DecodeStrict decodes one JSON value into v, refusing unknown fields.
func DecodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON body: %w", err)
	}
	if dec.More() {
		return errors.New("malformed JSON body: unexpected data after the JSON value")
	}
	return nil
}

// BodyError answers a body DecodeStrict refused, naming the field when the problem is one.
func BodyError(err error) *Error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return FieldError(typeErr.Field, "must be a JSON "+typeErr.Type.String())
	}
	if inner := errors.Unwrap(err); inner != nil {
		if f, ok := strings.CutPrefix(inner.Error(), "json: unknown field "); ok {
			return FieldError(keyName(f), "is not a field of this request")
		}
	}
	return &Error{Status: http.StatusBadRequest, Message: err.Error()}
}

// keyName is the key encoding/json quotes in an unknown-field error; an empty key stays "".
func keyName(quoted string) string {
	if k := strings.TrimSuffix(strings.TrimPrefix(quoted, `"`), `"`); k != "" {
		return k
	}
	return `""`
}

// FieldError is a 400 naming the field at fault.
func FieldError(field, problem string) *Error {
	return &Error{Status: http.StatusBadRequest, Message: field + ": " + problem, Extra: map[string]any{"field": field}}
}

// CheckID refuses an id the client sent that breaks the id grammar, naming its field.
func CheckID(field, id string) error {
	if p := ids.Problem(id); p != "" {
		return FieldError(field, p)
	}
	return nil
}

// CheckOptionalID is CheckID for an id the client may leave out.
func CheckOptionalID(field, id string) error {
	if id == "" {
		return nil
	}
	return CheckID(field, id)
}

// Authenticate resolves the bearer secret to an account.
func Authenticate(r *http.Request, st *store.Store) (store.Account, error) {
	secret, err := Secret(r)
	if err != nil {
		return store.Account{}, err
	}
	acc, err := st.AccountBySecret(r.Context(), secret)
	return acc, SecretRefused(err)
}

// Secret is the request's bearer secret, or the 401 a request without one gets.
func Secret(r *http.Request) (string, error) {
	secret, ok := Bearer(r)
	if !ok {
		return "", &Error{Status: http.StatusUnauthorized, Message: "missing bearer token: send Authorization: Bearer <account secret>"}
	}
	return secret, nil
}

// SecretRefused is the 401 of a secret that opens no account (store.ErrNotFound); other
// errors pass through.
func SecretRefused(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &Error{Status: http.StatusUnauthorized, Message: "invalid account secret"}
	}
	return err
}
