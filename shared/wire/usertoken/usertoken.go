// Package usertoken mints and verifies end-user tokens: short-lived JWTs that let an
// application's user run the turns of some of an account's agents, and nothing else.
//
// Tokens are signed with EdDSA (Ed25519, RFC 8037). One algorithm serves both ways a token is
// made: the harness signs with a private key of the account's own (sealed like other secrets),
// and an account may mint in its own backend with a key pair whose public half it registers,
// which asymmetric signing allows and a shared HMAC secret would not. Ed25519 keys are 32
// bytes, its signatures deterministic (no nonce to get wrong, unlike ECDSA), verification
// constant-time in the standard library, and every mainstream JOSE library (jose, PyJWT,
// jjwt, go-jose) mints it. Only EdDSA verifies: a token naming another algorithm, "none"
// included, is refused before its signature is looked at.
package usertoken

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Audience is the aud every token carries: a token minted for another service is refused.
const Audience = "harness"

// MaxTTL bounds a token's life (exp - iat): a token is a bearer credential in a browser.
const MaxTTL = 24 * time.Hour

// Claims are what a token says. JSON names are the registered claims of RFC 7519 where one fits.
type Claims struct {
	// Account is the account whose agents the token may use (iss).
	Account string `json:"iss"`
	// EndUser is the application's user the token acts for (sub).
	EndUser string `json:"sub"`
	// Audience must be Audience (aud; RFC 7519 allows a list, which must hold it).
	Audience audience `json:"aud"`
	// Agents are the agent ids the token may use; empty: every agent of the account.
	Agents []string `json:"agents,omitempty"`
	// IssuedAt and Expires are Unix seconds (iat, exp).
	IssuedAt int64 `json:"iat"`
	Expires  int64 `json:"exp"`
}

// Allows reports whether the claims let the token use agentID.
func (c Claims) Allows(agentID string) bool {
	return len(c.Agents) == 0 || slices.Contains(c.Agents, agentID)
}

// audience is aud, which a token's minter may write as a string or as a list of strings.
type audience string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audience(one)
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*a = ""
	if slices.Contains(list, Audience) {
		*a = Audience
	}
	return nil
}

// header is a token's JOSE header; KeyID names the key that signed it.
type header struct {
	Alg   string `json:"alg"`
	Typ   string `json:"typ,omitempty"`
	KeyID string `json:"kid"`
}

const alg = "EdDSA"

var b64 = base64.RawURLEncoding

// Mint signs c with key, naming the key keyID in the header.
func Mint(c Claims, keyID string, key ed25519.PrivateKey) (string, error) {
	if err := c.check(); err != nil {
		return "", err
	}
	h, err := json.Marshal(header{Alg: alg, Typ: "JWT", KeyID: keyID})
	if err != nil {
		return "", err
	}
	p, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	signed := b64.EncodeToString(h) + "." + b64.EncodeToString(p)
	return signed + "." + b64.EncodeToString(ed25519.Sign(key, []byte(signed))), nil
}

// MaxEndUser bounds an end user's id (sub).
const MaxEndUser = 256

// CheckEndUser refuses an end user's id that is empty, longer than MaxEndUser bytes, not UTF-8
// or holding a control character: it is shown in lists and logs.
func CheckEndUser(id string) error {
	switch {
	case id == "":
		return errors.New("is required: your application's id of the user")
	case len(id) > MaxEndUser:
		return fmt.Errorf("is longer than %d bytes", MaxEndUser)
	case !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl):
		return errors.New("holds a control character or invalid UTF-8")
	}
	return nil
}

// check refuses claims no token may carry, minted here or by an account.
func (c Claims) check() error {
	switch {
	case c.Account == "":
		return errors.New("iss (the account) is required")
	case CheckEndUser(c.EndUser) != nil:
		return fmt.Errorf("sub (the end user) %w", CheckEndUser(c.EndUser))
	case c.Audience != Audience:
		return fmt.Errorf("aud must be %q", Audience)
	case c.Expires <= c.IssuedAt:
		return errors.New("exp must be after iat")
	case time.Duration(c.Expires-c.IssuedAt)*time.Second > MaxTTL:
		return fmt.Errorf("a token may live at most %s (exp - iat)", MaxTTL)
	}
	return nil
}

// Errors a token is refused with; each says what a client can do about it.
var (
	// ErrMalformed: not a JWS compact token of this package's shape.
	ErrMalformed = errors.New("the token is not a well-formed JWT")
	// ErrAlgorithm: the header names an algorithm other than EdDSA.
	ErrAlgorithm = errors.New("the token must be signed with EdDSA (Ed25519)")
	// ErrUnknownKey: no key of the account has the header's kid (removed or replaced keys
	// revoke what they signed).
	ErrUnknownKey = errors.New("the token was signed by a key this account no longer has")
	// ErrSignature: the signature does not verify.
	ErrSignature = errors.New("the token's signature does not verify")
	// ErrExpired: past exp.
	ErrExpired = errors.New("the token has expired: mint a new one")
)

// split cuts a token into its three parts and reads its header, refusing any algorithm but
// EdDSA before anything else of it is looked at.
func split(token string) ([]string, header, error) {
	var h header
	parts := strings.Split(token, ".")
	if len(parts) != 3 || decode(parts[0], &h) != nil {
		return nil, h, ErrMalformed
	}
	if h.Alg != alg {
		return nil, h, ErrAlgorithm
	}
	return parts, h, nil
}

// KeyID is the kid of token's header: the key that signed it, once Verify has accepted it.
func KeyID(token string) string {
	_, h, _ := split(token)
	return h.KeyID
}

// Verify checks token and returns its claims. keyOf returns the public key the token's account
// (iss) has under the header's kid: nil for none (an unknown account, a removed key), or an
// error of its own (a store it could not read), which Verify returns as it is. Until the
// signature verifies, only iss and kid of the token are read, to find the key. now is the
// clock, and a token is accepted up to skew past its exp.
func Verify(token string, keyOf func(account, keyID string) (ed25519.PublicKey, error), now time.Time, skew time.Duration) (Claims, error) {
	parts, h, err := split(token)
	if err != nil {
		return Claims{}, err
	}
	var c Claims
	if err := decode(parts[1], &c); err != nil || c.Account == "" {
		return Claims{}, ErrMalformed
	}
	key, err := keyOf(c.Account, h.KeyID)
	if err != nil {
		return Claims{}, err
	}
	if len(key) != ed25519.PublicKeySize {
		return Claims{}, ErrUnknownKey
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(key, []byte(parts[0]+"."+parts[1]), sig) {
		return Claims{}, ErrSignature
	}
	if err := c.check(); err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if now.After(time.Unix(c.Expires, 0).Add(skew)) {
		return Claims{}, ErrExpired
	}
	return c, nil
}

// decode reads one base64url-encoded JSON part; claims it does not know (an account's backend
// may add its own) are ignored.
func decode(part string, v any) error {
	b, err := b64.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
