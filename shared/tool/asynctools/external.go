package asynctools

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/agentharness/harness/shared/wire/httpjson"
)

// What an outside completion of a call answers, whichever edge it comes through
// (POST /async-tools/{resultId}/complete, an App Server controller's tool response).

// ResultNotFound is the one answer for unknown ids, ids of another account and a token that does not
// open the call, so none of them tells an id exists.
var ResultNotFound = &httpjson.Error{Status: http.StatusNotFound, Message: "async tool result not found"}

// Settlement is a settled call and the group check that followed it.
type Settlement struct {
	Result Result
	CheckResult
}

// SettleExternal settles an external-dispatch call its caller may complete, then runs the group
// check (which a duplicate runs too, in case the first attempt stopped before it). A call
// settled otherwise already is a 409 that says how.
func SettleExternal(ctx context.Context, async *Store, redriver *Redriver, row Result, outcome Outcome, now time.Time) (Settlement, error) {
	id := row.ID
	if row.Mode != ExternalDispatch {
		return Settlement{}, &httpjson.Error{Status: http.StatusConflict, Message: "this call runs inside the harness (" + row.Mode + ") and is not completed from outside", Extra: map[string]any{"resultId": id, "status": row.Status}}
	}
	res, duplicate, err := async.Settle(ctx, id, outcome, now)
	var conflict *ConflictError
	switch {
	case errors.As(err, &conflict):
		rec := conflict.Recorded
		msg := "async tool result " + id + " is already " + rec.Status
		switch {
		case rec.Error == TimeoutError:
			msg += ": it timed out before this result arrived"
		case rec.Status == Cancelled:
			msg += ": its turn was aborted before this result arrived"
		}
		return Settlement{}, &httpjson.Error{Status: http.StatusConflict, Message: msg, Extra: map[string]any{"resultId": id, "status": rec.Status}}
	case errors.Is(err, ErrNotFound):
		return Settlement{}, ResultNotFound
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
