package chathttp

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// variablesRoute authenticates a request to /threads/{parentThreadId}/variables/{requestId}
// and checks its ids; ok is false when it answered a refusal. Another account's ids are not
// found, like unknown ones.
func (h *Handler) variablesRoute(w http.ResponseWriter, r *http.Request) (accountID, threadID, requestID string, ok bool) {
	c, ok := h.caller(w, r)
	if !ok {
		return "", "", "", false
	}
	threadID, requestID = r.PathValue("parentThreadId"), r.PathValue("requestId")
	err := httpjson.CheckID("parentThreadId", threadID)
	if err == nil {
		err = httpjson.CheckID("requestId", requestID)
	}
	if err == nil {
		err = h.seeConversation(r, c, threadID, false)
	}
	if err != nil {
		h.fail(w, r, err)
		return "", "", "", false
	}
	return c.AccountID, threadID, requestID, true
}

// variablesView is a variables request as the endpoint shows it: what the instance needs, never
// a value.
func variablesView(threadID string, vr store.VarRequest) map[string]any {
	out := map[string]any{
		"requestId": vr.ID, "threadId": threadID, "agent": vr.Tool, "name": vr.Name,
		"missing": vr.Missing, "status": "pending", "createdAt": vr.CreatedAt,
	}
	if b := vr.Booted; b != nil {
		out["status"], out["instance"] = "booted", map[string]any{"threadId": b.ThreadID, "eventId": b.EventID, "statusUrl": "/status/" + b.EventID}
	}
	return out
}

// variables runs GET /threads/{parentThreadId}/variables/{requestId}: what a subagent instance
// that subagent_create deferred needs (seed 001 section 6).
func (h *Handler) variables(w http.ResponseWriter, r *http.Request) {
	accountID, threadID, requestID, ok := h.variablesRoute(w, r)
	if !ok {
		return
	}
	vr, err := h.eng.VariablesRequest(r.Context(), accountID, threadID, requestID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, variablesView(threadID, vr))
}

// provideVariables runs POST /threads/{parentThreadId}/variables/{requestId} with
// {"variables": {"NAME": "value"}}: the values are stored, sealed, on the instance's thread, and
// the instance boots at once; 202 with its thread and the event of its first turn.
func (h *Handler) provideVariables(w http.ResponseWriter, r *http.Request) {
	accountID, threadID, requestID, ok := h.variablesRoute(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		h.fail(w, r, &httpjson.Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", h.opts.MaxBodyBytes)})
		return
	}
	if err != nil {
		h.fail(w, r, &httpjson.Error{Status: http.StatusBadRequest, Message: "reading the request body: " + err.Error()})
		return
	}
	var in struct {
		Variables map[string]string `json:"variables"`
	}
	if err := httpjson.DecodeStrict(body, &in); err != nil {
		h.fail(w, r, httpjson.BodyError(err))
		return
	}
	if len(in.Variables) == 0 {
		h.fail(w, r, httpjson.FieldError("variables", `is required: {"NAME": "value"} for what the request is missing`))
		return
	}
	if err := turn.CheckVariables("variables", in.Variables); err != nil {
		h.fail(w, r, err)
		return
	}
	b, err := h.eng.BootInstance(r.Context(), accountID, threadID, requestID, in.Variables)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusAccepted, map[string]any{
		"requestId": requestID, "threadId": b.ThreadID, "eventId": b.EventID, "statusUrl": "/status/" + b.EventID, "status": turn.StatusProcessing,
	})
}
