package accounts

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/agentharness/harness/shared/wire/natsturns"
)

// natsBody is POST /accounts/me/nats-credentials: the client's own user public key, or nothing
// for a key pair made here.
type natsBody struct {
	PublicKey string `json:"publicKey"`
}

// natsCredentials is POST /accounts/me/nats-credentials: short-lived NATS credentials that read
// the account's turns and nothing else. A client that sends its public key keeps its seed to
// itself; otherwise the answer carries a seed, and no cache may keep it.
func (h *Handler) natsCredentials(w http.ResponseWriter, r *http.Request) {
	if h.opts.NATS == nil {
		h.errs.Fail(w, r, &httpjson.Error{Status: http.StatusNotImplemented,
			Message: "this deployment has no NATS credentials configured (it sets no NATS_URL, or no NATS_ACCOUNT_SIGNING_SEED or NATS_ACCOUNT_SIGNING_SEED_SECRET)"})
		return
	}
	body, err := readCapped(w, r, 4<<10)
	var b natsBody
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		if err = checkJSON(body); err == nil {
			if err = httpjson.DecodeStrict(body, &b); err != nil {
				err = httpjson.BodyError(err)
			}
		}
	}
	var c natsturns.Credentials
	if err == nil {
		c, err = h.opts.NATS.Issue(accountID(r), b.PublicKey)
	}
	var bad *natsturns.BadKeyError
	if errors.As(err, &bad) {
		err = httpjson.FieldError("publicKey", bad.Problem)
	}
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	httpjson.WriteJSON(w, http.StatusOK, c)
}
