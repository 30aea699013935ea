// Package tokenkeys keeps the keys of each account's end-user tokens (wire/usertoken), mints
// tokens with them and verifies tokens against them. The harness's own key for an account is
// made on its first mint, sealed on its item like its other secrets, and gone with its secret,
// so rotating the secret revokes every token the harness signed. An account may also register
// the public keys it mints its own tokens with, as a JWKS inline or at a URL; removing or
// replacing a key revokes what it signed.
package tokenkeys

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/egress"
	"github.com/agentharness/harness/shared/wire/usertoken"
)

// Sealer seals and opens the keys (secrets.Box).
type Sealer interface {
	Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error)
	Open(ctx context.Context, sealed, aad []byte) ([]byte, error)
}

// Keys reads and makes accounts' token keys.
type Keys struct {
	store  *store.Store
	sealer Sealer
	jwks   *jwksCache
	now    func() time.Time
}

// Options configure Keys beyond its store: the sealer of the harness's keys (nil where the
// function only verifies), the client JWKS URLs are fetched with (its transport decides which
// addresses it may reach: egress.Transport() in production) and the clock.
type Options struct {
	Sealer Sealer
	HTTP   *http.Client
	Now    func() time.Time
}

// New returns the token keys kept in st.
func New(st *store.Store, o Options) *Keys {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTP == nil {
		o.HTTP = http.DefaultClient
	}
	return &Keys{store: st, sealer: o.Sealer, jwks: newJWKSCache(o.HTTP, o.Now), now: o.Now}
}

// DefaultTTL is a minted token's life when the request names none.
const DefaultTTL = time.Hour

// Mint signs a token for endUser of the account, for agents (none: all of them), that lives
// ttl, with the account's key (made on its first mint).
func (k *Keys) Mint(ctx context.Context, accountID, endUser string, agents []string, ttl time.Duration) (string, time.Time, error) {
	kid, priv, err := k.signing(ctx, accountID)
	if err != nil {
		return "", time.Time{}, err
	}
	now := k.now().Truncate(time.Second)
	exp := now.Add(ttl)
	tok, err := usertoken.Mint(usertoken.Claims{
		Account: accountID, EndUser: endUser, Audience: usertoken.Audience, Agents: agents,
		IssuedAt: now.Unix(), Expires: exp.Unix(),
	}, kid, priv)
	return tok, exp, err
}

// Skew is how long past its exp a token is still accepted: the clocks of an account's backend
// and of the harness may differ by this much.
const Skew = 30 * time.Second

// Verify checks an end-user token against its account's keys (the harness's own, then those
// the account registered) and returns its claims and the account's Access as read for it.
// Its refusals wrap usertoken's errors; other errors are the store's or a JWKS URL's.
func (k *Keys) Verify(ctx context.Context, token string) (usertoken.Claims, store.Access, error) {
	var access store.Access
	claims, err := usertoken.Verify(token, func(account, kid string) (ed25519.PublicKey, error) {
		a, err := k.store.AccountAccess(ctx, account)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		access = a
		return k.publicKey(ctx, a, kid)
	}, k.now(), Skew)
	return claims, access, err
}

// Holds reports whether the account, still live, still has the key kid a token it verified was
// signed with: a socket that token opened keeps its authority while it does. A removed or
// replaced key, a rotated secret (for the harness's key) and a deleted account are
// usertoken.ErrUnknownKey; a JWKS URL that cannot be read, ErrJWKSUnavailable.
func (k *Keys) Holds(ctx context.Context, accountID, kid string) error {
	a, err := k.store.AccountAccess(ctx, accountID)
	if errors.Is(err, store.ErrNotFound) {
		return usertoken.ErrUnknownKey
	}
	if err != nil {
		return err
	}
	key, err := k.publicKey(ctx, a, kid)
	if err != nil {
		return err
	}
	if len(key) != ed25519.PublicKeySize {
		return usertoken.ErrUnknownKey
	}
	return nil
}

// publicKey is the account's key kid: its harness key, a key of its inline JWKS, or one its
// JWKS URL serves.
func (k *Keys) publicKey(ctx context.Context, a store.Access, kid string) (ed25519.PublicKey, error) {
	switch {
	case kid == "":
		return nil, nil
	case kid == a.TokenKey.ID:
		if len(a.TokenKey.Public) == ed25519.PublicKeySize {
			return a.TokenKey.Public, nil
		}
		seed, err := k.open(ctx, a.Account.ID, a.TokenKey) // a key stored before its public half was
		if err != nil {
			return nil, err
		}
		return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey), nil
	case a.Issuer != "":
		keys, err := ParseJWKS([]byte(a.Issuer))
		if err != nil {
			return nil, fmt.Errorf("the registered JWKS of account %s: %w", a.Account.ID, err)
		}
		return keys[kid], nil
	case a.IssuerURL != "":
		return k.jwks.key(ctx, a.IssuerURL, kid)
	}
	return nil, nil
}

// signing returns the account's signing key and its id, making the key on first use.
func (k *Keys) signing(ctx context.Context, accountID string) (string, ed25519.PrivateKey, error) {
	tk, err := k.store.AccountTokenKey(ctx, accountID)
	if err != nil {
		return "", nil, err
	}
	if tk.ID == "" {
		if tk, err = k.make(ctx, accountID); err != nil {
			return "", nil, err
		}
	}
	seed, err := k.open(ctx, accountID, tk)
	if err != nil {
		return "", nil, err
	}
	return tk.ID, ed25519.NewKeyFromSeed(seed), nil
}

// make stores a new key for the account, or reads the one another mint stored first.
func (k *Keys) make(ctx context.Context, accountID string) (store.TokenKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return store.TokenKey{}, err
	}
	id := store.NewID(HarnessKeyPrefix)
	sealed, err := k.sealer.Seal(ctx, priv.Seed(), aad(accountID, id))
	if err != nil {
		return store.TokenKey{}, fmt.Errorf("sealing a token key: %w", err)
	}
	return k.store.PutAccountTokenKey(ctx, accountID, store.TokenKey{ID: id, Sealed: sealed, Public: pub})
}

// HarnessKeyPrefix starts the kid of every key the harness makes; a registered key's kid may
// not, so a kid names one key of an account.
const HarnessKeyPrefix = "key_"

func (k *Keys) open(ctx context.Context, accountID string, tk store.TokenKey) ([]byte, error) {
	if k.sealer == nil {
		return nil, errors.New("this function holds no sealer to open token keys with")
	}
	seed, err := k.sealer.Open(ctx, tk.Sealed, aad(accountID, tk.ID))
	if err != nil {
		return nil, fmt.Errorf("opening the token key of account %s: %w", accountID, err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("the token key of account %s is %d bytes, not an Ed25519 seed", accountID, len(seed))
	}
	return seed, nil
}

// aad binds a sealed key to its account and id: copied to another account's item, it does not
// open.
func aad(accountID, keyID string) []byte { return []byte("token-key\x00" + accountID + "\x00" + keyID) }

// FromConfig returns the token keys kept in st, sealed with sealer, whose JWKS URLs are fetched
// from public addresses only (egress.Transport()) unless private, the operator's
// MCP_PRIVATE_ENDPOINTS (the same switch as MCP servers'), is "allow".
func FromConfig(st *store.Store, sealer Sealer, private string) (*Keys, error) {
	var rt http.RoundTripper = egress.Transport()
	switch private {
	case "":
	case "allow":
		rt = http.DefaultTransport
	default:
		return nil, fmt.Errorf("MCP_PRIVATE_ENDPOINTS is %q: it must be \"allow\" or unset", private)
	}
	return New(st, Options{Sealer: sealer, HTTP: &http.Client{Transport: rt, Timeout: jwksTimeout}}), nil
}

// CheckIssuerURL refuses a JWKS URL that is not an absolute https:// URL (http:// too where
// private addresses are allowed, for a local server).
func CheckIssuerURL(u, private string) error {
	p, err := url.Parse(u)
	switch {
	case err != nil || p.Host == "" || p.User != nil:
		return errors.New("must be an absolute URL such as https://example.com/.well-known/jwks.json, without credentials")
	case p.Scheme == "https", p.Scheme == "http" && private == "allow":
		return nil
	}
	return errors.New("must be an https:// URL")
}
