package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/asynctools"
	"github.com/agentharness/harness/shared/store"
)

// DefaultMaxCompletionBytes bounds a completion body; results past the row's inline limit go to
// blob storage.
const DefaultMaxCompletionBytes = 5 << 20

// CompletionHandler serves async-tool-complete: POST /async-tools/{resultId}/complete.
type CompletionHandler struct {
	store    *store.Store
	async    *asynctools.Store
	redriver *asynctools.Redriver
	now      func() time.Time
	maxBody  int64
	logger   *slog.Logger
	errs     errorWriter
}

// resultNotFound is the one answer for unknown ids, ids of another account and a token that does not
// open the call, so none of them tells an id exists.
var resultNotFound = &Error{Status: http.StatusNotFound, Message: "async tool result not found"}

// completion is the body a worker sends.
type completion struct {
	Status   string          `json:"status"`
	Response json.RawMessage `json:"response"`
	Error    string          `json:"error"`
}

func (h *CompletionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := completionID(r.URL.Path)
	if !ok {
		writeError(w, &Error{Status: http.StatusNotFound, Message: "no route for " + r.Method + " " + r.URL.Path})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, &Error{Status: http.StatusMethodNotAllowed, Message: "method " + r.Method + " is not allowed here: POST the result"})
		return
	}
	if err := h.complete(w, r, id); err != nil {
		h.errs.fail(w, r, err)
	}
}

// completionID reads the resultId out of /async-tools/{resultId}/complete.
func completionID(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/async-tools/")
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, "/complete")
	return id, ok && id != "" && !strings.Contains(id, "/")
}

func (h *CompletionHandler) complete(w http.ResponseWriter, r *http.Request, id string) error {
	ctx := r.Context()
	secret, ok := bearer(r)
	if !ok {
		return &Error{Status: http.StatusUnauthorized, Message: "missing bearer token: send Authorization: Bearer <account secret or the call's completion token>"}
	}
	if err := checkID("resultId", id); err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("completion body is larger than %d bytes", h.maxBody)}
	}
	if err != nil {
		return &Error{Status: http.StatusBadRequest, Message: "reading the request body: " + err.Error()}
	}
	if err := checkKeys(body); err != nil {
		return err
	}
	outcome, err := parseCompletion(body)
	if err != nil {
		return err
	}
	row, err := h.async.Result(ctx, id)
	if errors.Is(err, asynctools.ErrNotFound) {
		return resultNotFound
	}
	if err != nil {
		return err
	}
	if err := h.authorize(r, secret, row); err != nil {
		return err
	}
	check, err := settleCall(ctx, h.async, h.redriver, row, outcome, h.now())
	if err != nil {
		return err
	}
	switch {
	case check.State.Group == nil:
		// The parent has not sealed the group yet; its seal re-drives if this was the last.
		writeJSON(w, http.StatusAccepted, map[string]any{"resultId": id, "status": store.EventWaitingAsync, "result": check.result.Status, "group": "open"})
		return nil
	case !check.State.Settled():
		writeJSON(w, http.StatusAccepted, map[string]any{"resultId": id, "status": store.EventWaitingAsync, "result": check.result.Status, "group": "sealed", "pending": len(check.State.Pending())})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"resultId": id, "status": check.result.Status, "group": "complete"})
	return nil
}

// settlement is a settled call and the group check that followed it.
type settlement struct {
	result asynctools.Result
	asynctools.CheckResult
}

// settleCall settles an external-dispatch call its caller may complete, then runs the group
// check (which a duplicate runs too, in case the first attempt stopped before it). A call
// settled otherwise already is a 409 that says how.
func settleCall(ctx context.Context, async *asynctools.Store, redriver *asynctools.Redriver, row asynctools.Result, outcome asynctools.Outcome, now time.Time) (settlement, error) {
	id := row.ID
	if row.Mode != asynctools.ExternalDispatch {
		return settlement{}, &Error{Status: http.StatusConflict, Message: "this call runs inside the harness (" + row.Mode + ") and is not completed from outside", Extra: map[string]any{"resultId": id, "status": row.Status}}
	}
	res, duplicate, err := async.Settle(ctx, id, outcome, now)
	var conflict *asynctools.ConflictError
	switch {
	case errors.As(err, &conflict):
		rec := conflict.Recorded
		msg := "async tool result " + id + " is already " + rec.Status
		if rec.Error == asynctools.TimeoutError {
			msg += ": it timed out before this result arrived"
		}
		return settlement{}, &Error{Status: http.StatusConflict, Message: msg, Extra: map[string]any{"resultId": id, "status": rec.Status}}
	case errors.Is(err, asynctools.ErrNotFound):
		return settlement{}, resultNotFound
	case err != nil:
		return settlement{}, err
	}
	// A retry settles as a duplicate and checks again.
	check, err := redriver.Settled(ctx, id, duplicate)
	if err != nil {
		return settlement{}, err
	}
	return settlement{result: res, CheckResult: check}, nil
}

// authorize accepts the call's own completion token or the secret of the account that owns it.
func (h *CompletionHandler) authorize(r *http.Request, secret string, row asynctools.Result) error {
	if strings.HasPrefix(secret, "act_") {
		if asynctools.TokenMatches(secret, row.TokenHash) {
			return nil
		}
		return resultNotFound
	}
	acc, err := h.store.AccountBySecret(r.Context(), secret)
	if errors.Is(err, store.ErrNotFound) {
		return resultNotFound
	}
	if err != nil {
		return err
	}
	if acc.ID != row.AccountID {
		return resultNotFound
	}
	return nil
}

// parseCompletion reads {"status":"completed","response":…} or {"status":"failed","error":"…"}.
// Its refusals are 400s naming the field.
func parseCompletion(body []byte) (asynctools.Outcome, error) {
	var c completion
	if err := decodeStrict(body, &c); err != nil {
		return asynctools.Outcome{}, bodyError(err)
	}
	switch c.Status {
	case asynctools.Completed:
		if len(bytes.TrimSpace(c.Response)) == 0 {
			return asynctools.Outcome{}, fieldError("response", "a completed result needs it (any JSON value)")
		}
		if c.Error != "" {
			return asynctools.Outcome{}, fieldError("error", "a completed result has none")
		}
		return asynctools.Outcome{Status: asynctools.Completed, Response: c.Response}, nil
	case asynctools.Failed:
		if strings.TrimSpace(c.Error) == "" {
			return asynctools.Outcome{}, fieldError("error", "a failed result needs it (a non-empty string)")
		}
		if len(c.Response) > 0 {
			return asynctools.Outcome{}, fieldError("response", "a failed result has none")
		}
		return asynctools.Outcome{Status: asynctools.Failed, Error: c.Error}, nil
	case "":
		return asynctools.Outcome{}, fieldError("status", `is required: "completed" or "failed"`)
	}
	return asynctools.Outcome{}, fieldError("status", fmt.Sprintf(`is %q: want "completed" or "failed"`, c.Status))
}
