package api

import (
	"errors"
	"net/http"
)

// CompletionHandler serves async-tool-complete: POST /async-tools/{resultId}/complete.
type CompletionHandler struct {
	errs errorWriter
}

// NewCompletion wires async-tool-complete from d.
func NewCompletion(d Deps) (*CompletionHandler, error) {
	return nil, errors.New("async-tool-complete is not built yet")
}

func (h *CompletionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	writeError(w, &Error{Status: http.StatusNotImplemented, Message: "not built yet"})
}
