// Package completion is async-tool-complete: POST /async-tools/{resultId}/complete, which an
// outside worker calls to settle an external-dispatch call, and the settling of a call that the
// WebSocket's external_tool_call_response shares.
package completion

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

	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// DefaultMaxBytes bounds a completion body; results past the row's inline limit go to
// blob storage.
const DefaultMaxBytes = 5 << 20

// Handler serves async-tool-complete: POST /async-tools/{resultId}/complete.
type Handler struct {
	store    *store.Store
	async    *asynctools.Store
	redriver *asynctools.Redriver
	now      func() time.Time
	maxBody  int64
	logger   *slog.Logger
	errs     httpjson.ErrorWriter
}

// resultNotFound is the one answer for unknown ids, ids of another account and a token that does not
// open the call, so none of them tells an id exists.
var resultNotFound = &httpjson.Error{Status: http.StatusNotFound, Message: "async tool result not found"}

// completion is the body a worker sends.
type completion struct {
	Status   string          `json:"status"`
	Response json.RawMessage `json:"response"`
	Error    string          `json:"error"`
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := completionID(r.URL.Path)
	if !ok {
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusNotFound, Message: "no route for " + r.Method + " " + r.URL.Path})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusMethodNotAllowed, Message: "method " + r.Method + " is not allowed here: POST the result"})
		return
	}
	if err := h.complete(w, r, id); err != nil {
		h.errs.Fail(w, r, err)
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

func (h *Handler) complete(w http.ResponseWriter, r *http.Request, id string) error {
	ctx := r.Context()
	secret, ok := httpjson.Bearer(r)
	if !ok {
		return &httpjson.Error{Status: http.StatusUnauthorized, Message: "missing bearer token: send Authorization: Bearer <account secret or the call's completion token>"}
	}
	if err := httpjson.CheckID("resultId", id); err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &httpjson.Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("completion body is larger than %d bytes", h.maxBody)}
	}
	if err != nil {
		return &httpjson.Error{Status: http.StatusBadRequest, Message: "reading the request body: " + err.Error()}
	}
	if err := httpjson.CheckKeys(body); err != nil {
		return err
	}
	outcome, err := Parse(body)
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
	check, err := Settle(ctx, h.async, h.redriver, row, outcome, h.now())
	if err != nil {
		return err
	}
	switch {
	case check.State.Group == nil:
		// The parent has not sealed the group yet; its seal re-drives if this was the last.
		httpjson.WriteJSON(w, http.StatusAccepted, map[string]any{"resultId": id, "status": store.EventWaitingAsync, "result": check.Result.Status, "group": "open"})
		return nil
	case !check.State.Settled():
		httpjson.WriteJSON(w, http.StatusAccepted, map[string]any{"resultId": id, "status": store.EventWaitingAsync, "result": check.Result.Status, "group": "sealed", "pending": len(check.State.Pending())})
		return nil
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"resultId": id, "status": check.Result.Status, "group": "complete"})
	return nil
}

// Settlement is a settled call and the group check that followed it.
type Settlement struct {
	Result asynctools.Result
	asynctools.CheckResult
}

// Settle settles an external-dispatch call its caller may complete, then runs the group
// check (which a duplicate runs too, in case the first attempt stopped before it). A call
// settled otherwise already is a 409 that says how.
func Settle(ctx context.Context, async *asynctools.Store, redriver *asynctools.Redriver, row asynctools.Result, outcome asynctools.Outcome, now time.Time) (Settlement, error) {
	id := row.ID
	if row.Mode != asynctools.ExternalDispatch {
		return Settlement{}, &httpjson.Error{Status: http.StatusConflict, Message: "this call runs inside the harness (" + row.Mode + ") and is not completed from outside", Extra: map[string]any{"resultId": id, "status": row.Status}}
	}
	res, duplicate, err := async.Settle(ctx, id, outcome, now)
	var conflict *asynctools.ConflictError
	switch {
	case errors.As(err, &conflict):
		rec := conflict.Recorded
		msg := "async tool result " + id + " is already " + rec.Status
		switch {
		case rec.Error == asynctools.TimeoutError:
			msg += ": it timed out before this result arrived"
		case rec.Status == asynctools.Cancelled:
			msg += ": its turn was aborted before this result arrived"
		}
		return Settlement{}, &httpjson.Error{Status: http.StatusConflict, Message: msg, Extra: map[string]any{"resultId": id, "status": rec.Status}}
	case errors.Is(err, asynctools.ErrNotFound):
		return Settlement{}, resultNotFound
	case err != nil:
		return Settlement{}, err
	}
	// A retry settles as a duplicate and checks again.
	check, err := redriver.Settled(ctx, id, duplicate)
	if err != nil {
		return Settlement{}, err
	}
	return Settlement{Result: res, CheckResult: check}, nil
}

// authorize accepts the call's own completion token or the secret of the account that owns it.
func (h *Handler) authorize(r *http.Request, secret string, row asynctools.Result) error {
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

// Parse reads {"status":"completed","response":…} or {"status":"failed","error":"…"}.
// Its refusals are 400s naming the field.
func Parse(body []byte) (asynctools.Outcome, error) {
	var c completion
	if err := httpjson.DecodeStrict(body, &c); err != nil {
		return asynctools.Outcome{}, httpjson.BodyError(err)
	}
	switch c.Status {
	case asynctools.Completed:
		if len(bytes.TrimSpace(c.Response)) == 0 {
			return asynctools.Outcome{}, httpjson.FieldError("response", "a completed result needs it (any JSON value)")
		}
		if c.Error != "" {
			return asynctools.Outcome{}, httpjson.FieldError("error", "a completed result has none")
		}
		return asynctools.Outcome{Status: asynctools.Completed, Response: c.Response}, nil
	case asynctools.Failed:
		if strings.TrimSpace(c.Error) == "" {
			return asynctools.Outcome{}, httpjson.FieldError("error", "a failed result needs it (a non-empty string)")
		}
		if len(c.Response) > 0 {
			return asynctools.Outcome{}, httpjson.FieldError("response", "a failed result has none")
		}
		return asynctools.Outcome{Status: asynctools.Failed, Error: c.Error}, nil
	case "":
		return asynctools.Outcome{}, httpjson.FieldError("status", `is required: "completed" or "failed"`)
	}
	return asynctools.Outcome{}, httpjson.FieldError("status", fmt.Sprintf(`is %q: want "completed" or "failed"`, c.Status))
}

// New wires async-tool-complete from the environment the template gives it.
func New(d lambdadeps.Deps) (*Handler, error) {
	accounts := d.Getenv("ACCOUNTS_TABLE")
	if accounts == "" {
		return nil, errors.New("environment variable ACCOUNTS_TABLE is not set")
	}
	async, redriver, err := workqueue.AsyncTools(d)
	if err != nil {
		return nil, err
	}
	logger := d.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Handler{
		store: store.New(d.DB, store.Tables{Accounts: accounts}), async: async, redriver: redriver,
		now: time.Now, maxBody: DefaultMaxBytes, logger: logger, errs: httpjson.ErrorWriter{Logger: logger},
	}, nil
}
