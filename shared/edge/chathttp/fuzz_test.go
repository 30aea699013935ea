package chathttp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/fuzzcheck"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/ids"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func readTurnBody(body []byte) (*turnRequest, turn.Input, error) {
	h := &Handler{opts: Options{MaxBodyBytes: DefaultMaxBodyBytes}}
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	return h.readTurn(httptest.NewRecorder(), r)
}

// FuzzReadTurn reads POST / bodies: AI SDK chat requests with their UI message parts, the
// "message" shorthand and the compact "approvals" list.
func FuzzReadTurn(f *testing.F) {
	for _, s := range []string{
		`{"id":"chat-1","trigger":"submit-message","agentId":"demo","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"what time is it?"}]}]}`,
		`{"agentId":"demo","message":"hello"}`,
		`{"agentId":"demo","id":"c","approvals":[{"approvalId":"a","approved":true},{"approvalId":"b","approved":false,"reason":"no","toolCallId":"t","input":{"x":1}}]}`,
		`{"agentId":"d","id":"c","messageId":"m1","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"go"}]},{"id":"m1","role":"assistant","parts":[{"type":"step-start"},{"type":"tool-deploy","toolCallId":"t1","state":"approval-responded","input":{"env":"prod"},"approval":{"id":"ap1","approved":true}}]}]}`,
		`{"agentId":"demo","id":"c","onPendingApprovals":"deny","toolApproval":{"x":"approved"},"message":"hi"}`,
		`{"agentId":"demo","id":"c","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":1}]}]}`,
		`{"agentId":"demo","id":"c","message":"hi","approvals":[{"approvalId":"a","approved":true}]}`,
		`{"agentId":"demo","id":"c","messages":[{"id":"a","role":"system","parts":[]}]}`,
		`{"agentId":"demo","approvals":[{"approvalId":"a","approved":true}]}`,
		`{"agentId":"demo","id":"c","approvals":[{"approvalId":"a","approved":true},{"approvalId":"a","approved":false}]}`,
		`{"agentId":"demo","trigger":"regenerate-message","message":"x"}`,
		`{"agentId":"demo","message":"a","message":"b"}`,
		`{"agentId":`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, in, err := readTurnBody(body)
		if err != nil {
			fuzzcheck.Refusal(t, body, err)
			return
		}
		// What the parser promises of an accepted request.
		switch {
		case !ids.Valid(req.AgentID) || !ids.Valid(req.ConversationID) || req.EventID != "" && !ids.Valid(req.EventID):
			t.Fatalf("accepted ids agentId %q id %q eventId %q", req.AgentID, req.ConversationID, req.EventID)
		case req.ConversationID == "":
			t.Fatal("accepted request has no conversation id")
		case req.Trigger != "" && req.Trigger != "submit-message":
			t.Fatalf("accepted trigger %q", req.Trigger)
		case (in.Message == nil) == (in.Decisions == nil):
			t.Fatalf("accepted input has message %v and decisions %v: want exactly one", in.Message, in.Decisions)
		}
		if m := in.Message; m != nil {
			if !ids.Valid(m.ID) || store.MessageBytes(*m) > store.MaxMessageBytes || m.Role != model.RoleUser || len(m.Parts) != 1 || strings.TrimSpace(m.Text()) == "" {
				t.Fatalf("accepted message %+v: want an id, role user and one non-blank text part", m)
			}
		}
		seen := map[string]bool{}
		for _, d := range in.Decisions {
			if !ids.Valid(d.ApprovalID) || d.Approved == nil || seen[d.ApprovalID] {
				t.Fatalf("accepted decisions %+v: want each with an id, once, and approved set", in.Decisions)
			}
			seen[d.ApprovalID] = true
		}

		// The accepted request, encoded again, reads back the same.
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("encoding the accepted request: %v", err)
		}
		req2, in2, err := readTurnBody(again)
		if err != nil {
			t.Fatalf("the accepted request %s, encoded again, is refused: %v", again, err)
		}
		// madeID says whether the first read made the id up, which the second cannot.
		opts := cmp.Options{fuzzcheck.JSONEqual, cmpopts.IgnoreUnexported(turnRequest{})}
		if diff := cmp.Diff(req, req2, opts); diff != "" {
			t.Fatalf("request round trip (-first +again):\n%s", diff)
		}
		if diff := cmp.Diff(in.Decisions, in2.Decisions, opts); diff != "" {
			t.Fatalf("decisions round trip (-first +again):\n%s", diff)
		}
		if in.RespondsTo != in2.RespondsTo || (in.Message != nil && in.Message.Text() != in2.Message.Text()) {
			t.Fatalf("input round trip: %+v then %+v", in, in2)
		}
	})
}
