package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers Slack signs its requests with (the v0 scheme).
const (
	TimestampHeader = "X-Slack-Request-Timestamp"
	SignatureHeader = "X-Slack-Signature"
)

// MaxSkew is how far a request's timestamp may be from now, either way, before it is refused as
// a replay.
const MaxSkew = 5 * time.Minute

// Why Verify refuses a request; each comes wrapped with the detail.
var (
	ErrUnsigned     = errors.New("slack: request not signed")
	ErrStale        = errors.New("slack: request timestamp too far from now")
	ErrBadSignature = errors.New("slack: wrong request signature")
)

// Verify checks that a request carries Slack's signature of body under signingSecret and was
// signed within MaxSkew of now. body is the raw body as received, before any parsing.
func Verify(signingSecret string, h http.Header, body []byte, now time.Time) error {
	if signingSecret == "" {
		return errors.New("slack: no signing secret to verify with")
	}
	ts, sig := h.Get(TimestampHeader), h.Get(SignatureHeader)
	if ts == "" || sig == "" {
		return fmt.Errorf("%w: missing %s or %s", ErrUnsigned, TimestampHeader, SignatureHeader)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not a Unix time", ErrUnsigned, TimestampHeader)
	}
	got, err := hex.DecodeString(strings.TrimPrefix(sig, "v0="))
	if !strings.HasPrefix(sig, "v0=") || err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: %s is not v0=<hex of a SHA-256 MAC>", ErrUnsigned, SignatureHeader)
	}
	if skew := now.Sub(time.Unix(secs, 0)); skew > MaxSkew || skew < -MaxSkew {
		return fmt.Errorf("%w: signed %s from now", ErrStale, skew.Round(time.Second))
	}
	if !hmac.Equal(got, mac(signingSecret, ts, body)) {
		return fmt.Errorf("%w: the body or the timestamp does not match", ErrBadSignature)
	}
	return nil
}

// Sign returns the headers Slack would send with body at now; tests, the local Slack stand-in and
// the dev simulator sign inbound requests with it.
func Sign(signingSecret string, body []byte, now time.Time) http.Header {
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set(TimestampHeader, ts)
	h.Set(SignatureHeader, "v0="+hex.EncodeToString(mac(signingSecret, ts, body)))
	return h
}

// mac is the v0 signature: HMAC-SHA256 of "v0:<timestamp>:<body>".
func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return m.Sum(nil)
}
