// Package completion is async-tool-complete: POST /async-tools/{resultId}/complete, which an
// outside worker calls to settle an external-dispatch call, and the settling of a call that the
// WebSocket's external_tool_call_response shares.
package completion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/wire/httpjson"
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
		return asynctools.ResultNotFound
	}
	if err != nil {
		return err
	}
	if err := h.authorize(r, secret, row); err != nil {
		return err
	}
	check, err := asynctools.SettleExternal(ctx, h.async, h.redriver, row, outcome, h.now())
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

// authorize accepts the call's own completion token or the secret of the account that owns it.
func (h *Handler) authorize(r *http.Request, secret string, row asynctools.Result) error {
	if strings.HasPrefix(secret, "act_") {
		if asynctools.TokenMatches(secret, row.TokenHash) {
			return nil
		}
		return asynctools.ResultNotFound
	}
	acc, err := h.store.AccountBySecret(r.Context(), secret)
	if errors.Is(err, store.ErrNotFound) {
		return asynctools.ResultNotFound
	}
	if err != nil {
		return err
	}
	if acc.ID != row.AccountID {
		return asynctools.ResultNotFound
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

// New returns async-tool-complete's handler: accounts read from st, rows settled in async,
// continuations queued by redriver; a nil logger is slog's default.
func New(st *store.Store, async *asynctools.Store, redriver *asynctools.Redriver, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.Default()
	}
	return &Handler{
		store: st, async: async, redriver: redriver,
		now: time.Now, maxBody: DefaultMaxBytes, logger: logger, errs: httpjson.ErrorWriter{Logger: logger},
	}
}
