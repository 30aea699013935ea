package localrunner

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/agentharness/harness/shared/wire/wsconn"
)

// WebSocket is what a WebSocket API function hands to its routes: $connect, $default and
// $disconnect. The runner serves it on GET /ws the way API Gateway would: the upgrade is refused
// unless Connect succeeds and answered with the subprotocol Connect names, every frame is one
// Message call, and output reaches the socket through the runner's poster, as through
// @connections. A connection whose admission ends by time is handed to Expire then.
type WebSocket interface {
	Connect(ctx context.Context, connectionID string, header http.Header, query url.Values) (wsconn.Admission, error)
	Message(ctx context.Context, connectionID string, body []byte) error
	Disconnect(ctx context.Context, connectionID string) error
	Expire(ctx context.Context, connectionID string) error
}

// maxLocalFrame is the largest frame the local socket reads; larger ones close it with 1009
// (message too big). Frames between the gateway's limit and this one reach the handler, which
// answers them with an error, so that path is testable.
const maxLocalFrame = 1 << 20

// sockets is the runner's @connections: it posts to the sockets it accepted, by connection id.
type sockets struct {
	mu    sync.Mutex
	conns map[string]*websocket.Conn
}

func newSockets() *sockets { return &sockets{conns: map[string]*websocket.Conn{}} }

// Post writes one text frame to a connection; an unknown or closed one is wsconn.ErrGone.
func (s *sockets) Post(ctx context.Context, connectionID string, data []byte) error {
	if len(data) > wsconn.MaxMessageSize {
		return fmt.Errorf("message of %d bytes is larger than the %d-byte limit", len(data), wsconn.MaxMessageSize)
	}
	s.mu.Lock()
	c := s.conns[connectionID]
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("connection %s: %w", connectionID, wsconn.ErrGone)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, data); err != nil {
		return fmt.Errorf("connection %s: %v: %w", connectionID, err, wsconn.ErrGone)
	}
	return nil
}

// Disconnect closes a connection from the server side, as DELETE @connections does.
func (s *sockets) Disconnect(ctx context.Context, connectionID string) error {
	s.mu.Lock()
	c := s.conns[connectionID]
	delete(s.conns, connectionID)
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("connection %s: %w", connectionID, wsconn.ErrGone)
	}
	return c.Close(websocket.StatusPolicyViolation, "closed by the server")
}

func (s *sockets) add(id string, c *websocket.Conn) {
	s.mu.Lock()
	s.conns[id] = c
	s.mu.Unlock()
}

func (s *sockets) remove(id string) {
	s.mu.Lock()
	delete(s.conns, id)
	s.mu.Unlock()
}

// newConnectionID makes an id shaped like API Gateway's (base64, ending in "=").
func newConnectionID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// serveWebSocket runs one connection: $connect, then its frames in order, then $disconnect.
// Each frame's handler gets the function's timeout, as an invocation would.
func serveWebSocket(fn WebSocket, socks *sockets, timeout time.Duration, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := newConnectionID()
		adm, err := fn.Connect(r.Context(), id, r.Header, r.URL.Query())
		if err != nil {
			status, msg := http.StatusInternalServerError, "internal error"
			var e *httpjson.Error
			if errors.As(err, &e) {
				status, msg = e.Status, e.Message
			} else {
				logger.ErrorContext(r.Context(), "admitting a websocket connection", "err", err)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
			return
		}
		var accept websocket.AcceptOptions
		if adm.Subprotocol != "" {
			accept.Subprotocols = []string{adm.Subprotocol}
		}
		c, err := websocket.Accept(w, r, &accept)
		if err != nil {
			_ = fn.Disconnect(context.WithoutCancel(r.Context()), id)
			return
		}
		c.SetReadLimit(maxLocalFrame)
		socks.add(id, c)
		if !adm.Until.IsZero() {
			expiry := time.AfterFunc(time.Until(adm.Until), func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), timeout)
				defer cancel()
				if err := fn.Expire(ctx, id); err != nil {
					logger.ErrorContext(ctx, "ending an expired websocket connection", "err", err)
				}
			})
			defer expiry.Stop()
		}
		defer func() {
			socks.remove(id)
			if err := fn.Disconnect(context.WithoutCancel(r.Context()), id); err != nil {
				logger.ErrorContext(r.Context(), "forgetting a websocket connection", "err", err)
			}
			_ = c.CloseNow()
		}()
		ctx := context.WithoutCancel(r.Context())
		for {
			_, data, err := c.Read(r.Context())
			if err != nil {
				return
			}
			fctx, cancel := context.WithTimeout(ctx, timeout)
			if err := fn.Message(fctx, id, data); err != nil {
				logger.ErrorContext(fctx, "handling a websocket frame", "err", err)
			}
			cancel()
		}
	}
}
