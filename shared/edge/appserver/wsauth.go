package appserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/state/callers"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/tokenkeys"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/agentharness/harness/shared/wire/usertoken"
	"github.com/agentharness/harness/shared/wire/wsconn"
)

// A browser cannot set Authorization on a WebSocket upgrade, so a page sends its end-user token
// as a subprotocol: new WebSocket(url, [Subprotocol, BearerPrefix + token]). The upgrade answers
// with Subprotocol, never with the token, which a browser requires (one of the offered ones).
// A query parameter would put the token in the URL, which access logs, proxies and the
// browser's history keep; the Sec-WebSocket-Protocol header is kept by none of them.
const (
	Subprotocol  = "harness"
	BearerPrefix = "harness.bearer."
)

// Connect admits a connection: the account secret (Authorization: Bearer) or an end-user
// token (Authorization, or the BearerPrefix subprotocol) on the upgrade, and an optional
// ?channel=control|stream (the secret's only). Its error is an *httpjson.Error whose status
// refuses the upgrade.
func (g *Gateway) Connect(ctx context.Context, connectionID string, header http.Header, query url.Values) (wsconn.Admission, error) {
	bearer, answer, err := upgradeBearer(header)
	if err != nil {
		return wsconn.Admission{}, err
	}
	c, err := g.h.opts.Callers.ResolveBearer(ctx, bearer)
	if err == nil && c.Token() {
		err = g.h.opts.Callers.CheckOrigin(ctx, &c, header.Get("Origin"), header.Get("Host"))
	}
	if err != nil {
		return wsconn.Admission{}, err
	}
	channel := query.Get("channel")
	switch {
	case channel != connections.Both && channel != connections.Control && channel != connections.Stream:
		return wsconn.Admission{}, &httpjson.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("channel %q is not one of control, stream", channel)}
	case channel != connections.Both && c.Token():
		// A stream socket gets every runtime's events of the account.
		return wsconn.Admission{}, &httpjson.Error{Status: http.StatusBadRequest, Message: "channel: an end-user token opens one socket for both channels; leave channel out"}
	}
	conn := connections.Connection{ID: connectionID, AccountID: c.AccountID, Channel: channel}
	if c.Token() {
		conn.EndUser, conn.Agents, conn.KeyID, conn.Until = c.EndUser, c.Agents, c.KeyID, c.Expires
	} else {
		conn.SecretHash = store.HashSecret(bearer)
	}
	reg := g.h.opts.Connections
	if err := reg.Connect(ctx, conn, g.h.opts.Now()); err != nil {
		return wsconn.Admission{}, err
	}
	// A rotation or a deletion that listed the account's connections before this one was
	// recorded has not ended it: the credential is checked again now that it would be found.
	if err := g.current(ctx, conn); err != nil {
		if derr := reg.Disconnect(context.WithoutCancel(ctx), connectionID); derr != nil {
			g.h.opts.Logger.ErrorContext(ctx, "forgetting a refused connection", "connectionId", connectionID, "err", derr)
		}
		if errors.Is(err, store.ErrNotFound) {
			return wsconn.Admission{}, httpjson.SecretRefused(err)
		}
		return wsconn.Admission{}, callers.Refused(err)
	}
	return wsconn.Admission{Subprotocol: answer, Until: conn.Until}, nil
}

// upgradeBearer reads an upgrade's credential, from Authorization or from the subprotocols it
// offers, and the subprotocol to answer with (Subprotocol when offered).
func upgradeBearer(header http.Header) (bearer, answer string, err error) {
	var offered []string
	for _, v := range header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			offered = append(offered, strings.TrimSpace(p))
		}
	}
	if slices.Contains(offered, Subprotocol) {
		answer = Subprotocol
	}
	var token string
	for _, p := range offered {
		if t, ok := strings.CutPrefix(p, BearerPrefix); ok {
			if token != "" {
				return "", "", &httpjson.Error{Status: http.StatusBadRequest, Message: "Sec-WebSocket-Protocol offers two tokens: offer one"}
			}
			token = t
		}
	}
	bearer, hasAuth := httpjson.Bearer(&http.Request{Header: header})
	switch {
	case token == "" && !hasAuth:
		return "", "", &httpjson.Error{Status: http.StatusUnauthorized, Message: "missing credential: send Authorization: Bearer <account secret or end-user token>, or from a browser the subprotocols " +
			Subprotocol + " and " + BearerPrefix + "<end-user token>"}
	case token == "":
		return bearer, answer, nil
	case hasAuth:
		return "", "", &httpjson.Error{Status: http.StatusBadRequest, Message: "the upgrade carries two credentials (Authorization and a " + BearerPrefix + " subprotocol): send one"}
	case answer == "":
		return "", "", &httpjson.Error{Status: http.StatusBadRequest, Message: "Sec-WebSocket-Protocol: offer " + Subprotocol + " beside the token, the subprotocol the upgrade answers with"}
	case !callers.IsToken(token):
		return "", "", &httpjson.Error{Status: http.StatusUnauthorized, Message: "the " + BearerPrefix + " subprotocol takes an end-user token; the account secret goes in Authorization, never in a browser"}
	}
	return token, answer, nil
}

// current checks that the connection's credential still opens the account: the secret it was
// opened with (store.ErrNotFound once rotated or the account deleted), or the key that signed
// its token (usertoken.ErrUnknownKey once removed, replaced or gone with the secret).
func (g *Gateway) current(ctx context.Context, conn connections.Connection) error {
	if conn.Token() {
		return g.h.opts.Callers.Keys.Holds(ctx, conn.AccountID, conn.KeyID)
	}
	return g.h.opts.Store.CheckSecretHash(ctx, conn.AccountID, conn.SecretHash)
}

// authority ends a connection whose credential no longer opens the account, at its frame.
// stop says the frame goes no further: the connection ended, or its token's key could not be
// read now (the frame gets an error and may be sent again).
func (g *Gateway) authority(ctx context.Context, conn connections.Connection) (stop bool, err error) {
	reg, p := g.h.opts.Connections, g.h.opts.Poster
	if conn.Expired(g.h.opts.Now()) {
		return true, reg.End(ctx, p, conn.ID, expired(conn.Until))
	}
	err = g.current(ctx, conn)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, store.ErrNotFound):
		return true, reg.Revoke(ctx, p, conn.ID)
	case errors.Is(err, usertoken.ErrUnknownKey):
		return true, reg.End(ctx, p, conn.ID, "end-user token: "+err.Error()+": this connection is closed; reconnect with a new token")
	case errors.Is(err, tokenkeys.ErrJWKSUnavailable):
		return true, g.post(ctx, conn.ID, map[string]any{"type": "error", "error": "end-user token: " + err.Error() + "; send the command again"})
	}
	return false, err
}

// Expire ends a connection whose end-user token has expired, as the local runner's timer asks
// at the token's expiry; in AWS, the connection's next frame or the next output a turn would
// send it ends it (API Gateway holds the socket, and nothing runs in between).
func (g *Gateway) Expire(ctx context.Context, connectionID string) error {
	conn, err := g.h.opts.Connections.Connection(ctx, connectionID)
	if errors.Is(err, connections.ErrNotFound) {
		return nil
	}
	if err != nil || !conn.Expired(g.h.opts.Now()) {
		return err
	}
	return g.h.opts.Connections.End(ctx, g.h.opts.Poster, conn.ID, expired(conn.Until))
}

// expired is what a connection is told as its token, which expired at until, ends it.
func expired(until time.Time) string {
	return "end-user token: the token expired at " + until.UTC().Format(time.RFC3339) + ": this connection is closed; reconnect with a new token"
}
