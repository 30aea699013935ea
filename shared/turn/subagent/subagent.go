// Package subagent is what a subagent's conversation and its caller's call share: the ids a call
// derives for its child, the answer the caller's model gets, and the settling of a non-blocking
// call once its child's turn has ended, by the child's last invocation or, if that one died
// first, by the sweeper (Recover). The engine runs the children (turn); this package needs only
// the state, so the sweeper links no engine.
package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/wire/ids"
)

// ConversationID names the conversation of one subagent call: derived from the call, so a
// retried call finds the conversation its first attempt made. The calling turn (its stream's
// key, which a retried invocation and the turn's continuations keep) is part of it, since a
// model may give calls of different turns the same id.
func ConversationID(accountID, callerConversationID, turnKey, toolCallID string) string {
	return childID(accountID, callerConversationID, turnKey, toolCallID)
}

// NamedConversationID names the conversation of a resumable subagent instance: derived from
// its name, so every message to it finds it.
func NamedConversationID(accountID, callerConversationID, name string) string {
	return childID(accountID, callerConversationID, "named", name)
}

// childID hashes the parts that name a child's conversation.
func childID(parts ...string) string { return ids.Derived("conv_sub_", parts...) }

// eventPrefix starts the event of a non-blocking call's child turn, which is the call's
// resultId after it: each call of a child is a turn of its own, and the turn knows the call it
// settles (CallOf) even when the child is called again meanwhile.
const eventPrefix = "evt_sub_"

// EventID is the event of the child turn that non-blocking call resultID runs.
func EventID(resultID string) string { return eventPrefix + resultID }

// CallOf is the call a child turn's event settles; ok is false for other events.
func CallOf(eventID string) (resultID string, ok bool) {
	id, ok := strings.CutPrefix(eventID, eventPrefix)
	return id, ok && id != ""
}

// Answer is what a subagent call gives the caller's model.
type Answer struct {
	Agent    string `json:"agent"`
	ThreadID string `json:"threadId"`
	Status   string `json:"status"`
	Text     string `json:"text,omitempty"`
	// EventID is the child's turn, for GET /status/{eventId}; empty for a blocking call.
	EventID string `json:"eventId,omitempty"`
	// Attachments are the files of the child's thread its answer names, copied to the
	// caller's thread under the same ids.
	Attachments []string `json:"attachments,omitempty"`
}

// LastText is the answer of the last turn in msgs: model.FinalText of what follows the
// message that began it.
func LastText(msgs []model.Message) string {
	start := len(msgs)
	for start > 0 && !msgs[start-1].StartsTurn() {
		start--
	}
	return model.FinalText(msgs[start:])
}

// Ended is how a child's turn ended: its final event status, the error of a failed one, and its
// messages.
type Ended struct {
	Status   string
	Error    string
	Messages []model.Message
	// Explicit: the child answers only through notify_parent, so a turn that ended without it
	// answered nothing.
	Explicit bool
	// Attachments are the files its answer returns to the caller (Answer.Attachments).
	Attachments []string
}

// Outcome is the result of the caller's call for a child whose turn (eventID, in conversationID)
// ended as e. tool names the child for its caller; the same ending always gives the same
// outcome, so the child's own settle and the sweeper's agree.
func Outcome(tool, conversationID, eventID string, e Ended) (asynctools.Outcome, error) {
	switch {
	case e.Status == store.EventCompleted && e.Explicit:
		return asynctools.Outcome{Status: asynctools.Failed, Error: tool + " ended its turn without calling notify_parent"}, nil
	case e.Status == store.EventCompleted:
		b, err := json.Marshal(Answer{Agent: tool, ThreadID: conversationID, Status: e.Status, Text: LastText(e.Messages), EventID: eventID, Attachments: e.Attachments})
		if err != nil {
			return asynctools.Outcome{}, err
		}
		return asynctools.Outcome{Status: asynctools.Completed, Response: b}, nil
	case e.Status == store.EventCancelled:
		return asynctools.Outcome{Status: asynctools.Failed, Error: tool + " was cancelled before it answered"}, nil
	case e.Status == store.EventFailed:
		errText := e.Error
		if errText == "" {
			errText = "the turn failed"
		}
		return asynctools.Outcome{Status: asynctools.Failed, Error: tool + " failed: " + errText}, nil
	}
	return asynctools.Outcome{}, fmt.Errorf("a child turn that is %s has not ended", e.Status)
}

// Notified is the outcome of a call that its child answered through notify_parent with text,
// returning the files attachments.
func Notified(tool, conversationID, eventID, text string, attachments []string) (asynctools.Outcome, error) {
	b, err := json.Marshal(Answer{Agent: tool, ThreadID: conversationID, Status: store.EventCompleted, Text: text, EventID: eventID, Attachments: attachments})
	return asynctools.Outcome{Status: asynctools.Completed, Response: b}, err
}

// attachmentRef finds attachment ids in a text.
var attachmentRef = regexp.MustCompile(attachments.IDText)

// maxReturnedFiles bounds the files one answer returns.
const maxReturnedFiles = 10

// GiveFiles copies the caller's files ids to the child's thread, for the child's first message:
// each as a file part that info describes (its media type and name in the caller's messages),
// under the same id.
func GiveFiles(ctx context.Context, files *attachments.Store, accountID, caller, child string, ids []string, info func(id string) (mediaType, filename string)) ([]model.Part, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if files == nil {
		return nil, errors.New("this deployment keeps no files")
	}
	var out []model.Part
	for _, id := range ids {
		err := files.Copy(ctx, accountID, caller, child, id)
		if errors.Is(err, attachments.ErrNotFound) {
			return nil, fmt.Errorf("this conversation has no attachment %q", id)
		}
		if err != nil {
			return nil, err
		}
		p := model.Part{Type: model.PartFile, Attachment: id}
		p.MediaType, p.Filename = info(id)
		out = append(out, p)
	}
	return out, nil
}

// ReturnFiles copies to the caller's thread the files of the child's thread its answer names, so
// each id it returns is valid where it goes (001 section 7), and returns the ids copied; none
// where files has no store. A named id the child does not hold is not a file of its.
func ReturnFiles(ctx context.Context, files *attachments.Store, accountID, child, caller, answer string) ([]string, error) {
	if files == nil {
		return nil, nil
	}
	var out []string
	for _, id := range attachmentRef.FindAllString(answer, maxReturnedFiles) {
		if slices.Contains(out, id) {
			continue
		}
		switch err := files.Copy(ctx, accountID, child, caller, id); {
		case err == nil:
			out = append(out, id)
		case !errors.Is(err, attachments.ErrNotFound):
			return out, fmt.Errorf("returning file %s: %w", id, err)
		}
	}
	return out, nil
}

// Settle settles the caller's call resultID with o, through the conditional write a completion
// takes, then runs its group check, which re-drives the caller once every call has settled. A
// call settled otherwise already (timed out, or its turn aborted) keeps that outcome: Settle
// returns nil and says so in settledOtherwise.
func Settle(ctx context.Context, async *asynctools.Store, redriver *asynctools.Redriver, resultID string, o asynctools.Outcome, now time.Time) (settledOtherwise string, err error) {
	_, duplicate, err := async.Settle(ctx, resultID, o, now)
	var conflict *asynctools.ConflictError
	if errors.As(err, &conflict) {
		return conflict.Recorded.Status, nil
	}
	if err != nil {
		return "", err
	}
	_, err = redriver.Settled(ctx, resultID, duplicate)
	return "", err
}

// Recover is the sweeper's look, before it times out the async call row, at the child a
// non-blocking subagent call may have started: when the child's turn has ended, the call's
// outcome is the child's, as its own settle would have recorded it. ok is false when the row is
// no subagent call's or its child has not ended.
func Recover(ctx context.Context, st *store.Store, files *attachments.Store, row asynctools.Result) (o asynctools.Outcome, ok bool, err error) {
	if row.Mode != asynctools.ExternalDispatch {
		return o, false, nil
	}
	eventID := EventID(row.ID)
	ev, err := st.Event(ctx, row.AccountID, eventID)
	if errors.Is(err, store.ErrNotFound) {
		return o, false, nil
	}
	if err != nil || !store.Final(ev.Status) {
		return o, false, err
	}
	head, err := st.ConversationHead(ctx, row.AccountID, ev.ConversationID)
	if err != nil {
		return o, false, err
	}
	var detail struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(ev.Detail, &detail)
	msgs, err := st.Messages(ctx, row.AccountID, ev.ConversationID, ev.FromSeq, ev.ToSeq)
	if err != nil {
		return o, false, err
	}
	ended := Ended{Status: ev.Status, Error: detail.Error, Messages: msgs, Explicit: head.Parent.Explicit}
	if ended.Attachments, err = ReturnFiles(ctx, files, row.AccountID, ev.ConversationID, head.Parent.ConversationID, LastText(msgs)); err != nil {
		return o, false, err
	}
	o, err = Outcome(head.Parent.Tool, ev.ConversationID, eventID, ended)
	return o, err == nil, err
}
