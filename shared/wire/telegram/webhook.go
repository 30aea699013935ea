package telegram

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
)

// SecretHeader carries, in every webhook request, the secret token given to SetWebhook.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

var (
	// ErrUnsigned is a webhook request without SecretHeader.
	ErrUnsigned = errors.New("telegram webhook: no secret token")
	// ErrBadSecret is a webhook request whose secret token is not the binding's.
	ErrBadSecret = errors.New("telegram webhook: wrong secret token")
)

// VerifySecret checks that a webhook request's SecretHeader is secret. The comparison is of
// SHA-256 digests in constant time, so neither the secret's bytes nor its length leak through
// timing. An empty secret matches nothing.
func VerifySecret(h http.Header, secret string) error {
	got := h.Get(SecretHeader)
	if got == "" {
		return ErrUnsigned
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(secret))
	if secret == "" || subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		return ErrBadSecret
	}
	return nil
}

// NewSecret returns a random secret token for SetWebhook: 26 characters of A-Z and 2-7 (128
// bits), within the 1-256 characters of A-Z, a-z, 0-9, _ and - that Telegram takes.
func NewSecret() string {
	return rand.Text()
}
