// Package asynctools keeps the durable side of async tool calls in DynamoDB: one
// AsyncToolResult row per async call and one dispatch-group item per model pass, in the same
// table. A completion settles its row with a conditional write; every actor that writes (the
// sealer, each settler, the sweeper) then runs the group check with a strongly consistent read,
// and the one whose conditional claim on the group succeeds sends the single continuation.
//
// Layout: a group is one partition. The group item has sk "#group"; each row has sk = its call
// key, and a resultId is "<groupId>.<callKey>", so a completion finds its row and the group
// check reads the group and all its rows with one Query. Items that may need the sweeper (rows
// still running, groups not yet consumed) carry dueShard/dueAt, a sparse index the sweeper
// queries by time.
package asynctools

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Execution modes.
const (
	// SameInvocation: the tool runs inside the invocation that called it; the parent waits for
	// it after the model pass.
	SameInvocation = "same-invocation"
	// ExternalDispatch: the tool only hands the work to an outside worker, which later calls
	// POST /async-tools/{resultId}/complete.
	ExternalDispatch = "external-dispatch"
)

// Row statuses.
const (
	Running   = "running"
	Completed = "completed"
	Failed    = "failed"
	// Cancelled: the turn waiting for the call was aborted; the model is told so, as for a
	// failure, and a later answer is refused.
	Cancelled = "cancelled"
)

// Delivery says where a turn's outcome goes when its continuation runs.
type Delivery struct {
	// Edge names the transport whose part of the turn async-worker runs when the turn goes on
	// (worker.Edge: the App Server's "ws", a chat channel's "channel"); empty for a turn whose
	// continuation shows no output but its stream log and its status row (SSE, /async).
	Edge string `json:"edge,omitempty"`
	// EventID is the /async status row the outcome settles.
	EventID string `json:"eventId,omitempty"`
	// GroupSeed is the turn's secret from which its continuations derive their group ids, so a
	// retried continuation registers the same rows.
	GroupSeed string `json:"seed,omitempty"`
	// TurnKey names the turn's stream log, which its continuation appends to (the event id,
	// or a key of its own for a turn without one).
	TurnKey string `json:"turnKey,omitempty"`
	// Route is the edge's state of the turn (a chat channel's chat and thread as JSON), opaque
	// here, so its continuation answers where the turn came from. A string keeps Delivery
	// comparable.
	Route string `json:"route,omitempty"`
	// Tree names the turn tree the turn belongs to, and TreeDepth how far below its root the
	// turn is (a subagent call or a POST /mcp call a level each); empty for a root turn, whose
	// tree is named after the turn itself.
	Tree      string `json:"tree,omitempty"`
	TreeDepth int    `json:"treeDepth,omitempty"`
}

// UnmarshalJSON reads a delivery as stored now and as stored by the release before, which
// named the transport as a kind ("stream", "async", "ws", "channel"); the edges of the last two
// register under those names still. Rows live up to a day, so the old shape is read for one
// release.
func (d *Delivery) UnmarshalJSON(b []byte) error {
	type plain Delivery
	var v struct {
		plain
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = Delivery(v.plain)
	if d.Edge == "" && (v.Kind == "ws" || v.Kind == "channel") {
		d.Edge = v.Kind
	}
	return nil
}

// Result is one AsyncToolResult row.
type Result struct {
	ID             string // "<groupId>.<callKey>"
	AccountID      string
	AgentID        string
	ConversationID string
	// TurnID names the turn that made the call (its event id, or a generated id).
	TurnID     string
	ToolCallID string
	ToolName   string
	Mode       string
	Status     string
	// Response is a completed call's result; when the full result was offloaded to blob
	// storage (ResponseKey set), Response is a bounded preview of it.
	Response      json.RawMessage
	ResponseKey   string
	ResponseBytes int
	// Error is a failed call's reason.
	Error string
	// TokenHash is the SHA-256 (hex) of the per-call completion token; empty without one.
	TokenHash string
	Deadline  time.Time
	// ParentUntil is when the invocation that made the call ends at the latest: after it, a
	// group it never sealed is orphaned and the sweeper seals it.
	ParentUntil time.Time
	Delivery    Delivery
	CreatedAt   time.Time
	SettledAt   time.Time
}

// Group is a dispatch group: the async calls of one model pass.
type Group struct {
	ID             string
	AccountID      string
	AgentID        string
	ConversationID string
	// Expected are the resultIds the group waits for, exactly.
	Expected []string
	Delivery Delivery
	// SealedBy is "parent", or "sweeper" for a group whose parent died before sealing it.
	SealedBy   string
	SealedAt   time.Time
	ClaimedAt  time.Time
	ConsumedAt time.Time
}

// Outcome is what a completion reports for one call.
type Outcome struct {
	Status   string          // Completed or Failed
	Response json.RawMessage // Completed
	Error    string          // Failed
	// Timeout marks the sweeper's or the parent's settle of a call past its deadline: it only
	// lands if the deadline has passed and nothing settled the row first.
	Timeout bool
}

// Hash identifies an outcome, so an identical duplicate completion is told from a conflicting
// one.
func (o Outcome) Hash() string {
	h := sha256.New()
	h.Write([]byte(o.Status))
	h.Write([]byte{0})
	if o.Status == Completed {
		h.Write(canonical(o.Response))
	} else {
		h.Write([]byte(o.Error))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// canonical re-encodes JSON so that formatting does not change an outcome's hash.
func canonical(raw json.RawMessage) []byte {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// Continuation is the SQS message that re-drives a settled group's parent.
type Continuation struct {
	AccountID string `json:"accountId"`
	GroupID   string `json:"groupId"`
}

// Errors callers branch on.
var (
	// ErrNotFound: no such row or group, or one of another account (callers answer both alike).
	ErrNotFound = errors.New("async tool result not found")
)

// ConflictError reports a settle refused because the row was already settled differently.
type ConflictError struct {
	Recorded Result
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("async tool result %s is already %s", e.Recorded.ID, e.Recorded.Status)
}

// NewGroupID returns an unguessable group id derived from a turn's secret nonce and the pass
// number, so a retried pass of the same turn gets the same id.
func NewGroupID(turnNonce string, pass int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("group\x00%s\x00%d", turnNonce, pass)))
	return "ag_" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// ResultID returns the resultId of a tool call in a group: stable for the same group and call.
func ResultID(groupID, toolCallID string) string {
	sum := sha256.Sum256([]byte("call\x00" + groupID + "\x00" + toolCallID))
	return groupID + "." + base64.RawURLEncoding.EncodeToString(sum[:9])
}

// SplitResultID returns a resultId's group id and call key; ok is false for a malformed id.
func SplitResultID(id string) (groupID, callKey string, ok bool) {
	groupID, callKey, ok = strings.Cut(id, ".")
	if !ok || !strings.HasPrefix(groupID, "ag_") || len(groupID) != 25 || len(callKey) != 12 {
		return "", "", false
	}
	return groupID, callKey, true
}

// NewToken returns a per-call completion token and the hash that is stored instead of it.
func NewToken() (token, hash string) {
	token = "act_" + randomToken(32)
	return token, HashToken(token)
}

// HashToken is how completion tokens are stored and compared.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenMatches compares a presented token with a stored hash in constant time.
func TokenMatches(token, hash string) bool {
	if hash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(HashToken(token)), []byte(hash)) == 1
}

// CompletePath is the route an outside worker calls to complete resultID.
func CompletePath(resultID string) string { return "/async-tools/" + resultID + "/complete" }

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return base64.RawURLEncoding.EncodeToString(b)
}

// Ticket is what an external-dispatch tool hands its outside worker: which call the result is
// for, where to send it, and the token that authorizes that one completion.
type Ticket struct {
	ResultID string
	// ToolCallID is the model's id of the call, for workers that report it back to a UI.
	ToolCallID   string
	CompletePath string
	// Token is the per-call completion token (Authorization: Bearer <token>); only its hash is
	// stored.
	Token string
}

type ticketKey struct{}

// WithTicket returns ctx carrying t, for the tool's execute.
func WithTicket(ctx context.Context, t Ticket) context.Context {
	return context.WithValue(ctx, ticketKey{}, t)
}

// TicketFrom returns the ticket of the external-dispatch call ctx runs, if any.
func TicketFrom(ctx context.Context) (Ticket, bool) {
	t, ok := ctx.Value(ticketKey{}).(Ticket)
	return t, ok
}
