package turn

import "github.com/agentharness/harness/shared/state/store"

// Refusal is why the engine will not run a request. It names the problem in the engine's terms;
// each transport maps a Kind to its wire once (chathttp to an HTTP status, appserver to an
// error frame), never at the site that refuses.
type Refusal struct {
	Kind RefusalKind
	// Message is safe to show the client and names the problem.
	Message string
	// Detail is what a client needs to act on it: the approvals a conversation waits for, the
	// approval a decision is for and its status, the field at fault.
	Detail map[string]any
	// Cause is the internal error behind it, for the log.
	Cause error
}

// RefusalKind says what kind of problem a Refusal is.
type RefusalKind int

const (
	// Invalid: the request, or the agent it names, cannot run as it is.
	Invalid RefusalKind = iota + 1
	// NotFound: the account holds no such agent, approval or conversation (that the caller
	// may see).
	NotFound
	// Busy: another turn holds the conversation; the same request may succeed later.
	Busy
	// Conflict: the conversation's state does not take this request (it belongs to another
	// agent, waits for approvals or async tools, the approval was decided or expired, the
	// event id is taken).
	Conflict
	// TooLarge: a message larger than a stored message may be.
	TooLarge
)

func (r *Refusal) Error() string { return r.Message }
func (r *Refusal) Unwrap() error { return r.Cause }

// ErrBusy is the cause of every Busy refusal.
var ErrBusy = store.ErrBusy

// ConversationNotFound refuses a conversation the caller cannot see: none of that id, or
// another end user's, which is told apart from none by nothing.
func ConversationNotFound(id string) *Refusal {
	return &Refusal{Kind: NotFound, Message: "conversation " + id + " not found"}
}
