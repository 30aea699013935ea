package tokenkeys

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// MaxJWKSKeys and MaxJWKSBytes bound a registered JWKS, inline or fetched.
const (
	MaxJWKSKeys  = 20
	MaxJWKSBytes = 64 << 10
)

// jwk is one key of a JWKS (RFC 7517) as the harness reads it: an Ed25519 public key
// (RFC 8037: kty OKP, crv Ed25519, x).
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid"`
	X   string `json:"x"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	D   string `json:"d"`
}

// ParseJWKS reads a JWKS of Ed25519 public keys by kid, refusing anything else in it, with an
// error that names the key at fault.
func ParseJWKS(b []byte) (map[string]ed25519.PublicKey, error) {
	if len(b) > MaxJWKSBytes {
		return nil, fmt.Errorf("the JWKS is %d bytes, more than %d", len(b), MaxJWKSBytes)
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("the JWKS is not JSON of the form {\"keys\": [...]}: %w", err)
	}
	switch {
	case len(set.Keys) == 0:
		return nil, errors.New(`the JWKS has no keys: send {"keys": [{"kty":"OKP","crv":"Ed25519","kid":"…","x":"…"}]}`)
	case len(set.Keys) > MaxJWKSKeys:
		return nil, fmt.Errorf("the JWKS has %d keys, more than %d", len(set.Keys), MaxJWKSKeys)
	}
	keys := make(map[string]ed25519.PublicKey, len(set.Keys))
	for i, k := range set.Keys {
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		switch {
		case k.Kty != "OKP" || k.Crv != "Ed25519":
			return nil, fmt.Errorf("keys[%d]: only Ed25519 keys (kty OKP, crv Ed25519) sign end-user tokens, got kty %q crv %q", i, k.Kty, k.Crv)
		case k.D != "":
			return nil, fmt.Errorf("keys[%d] holds a private key (d): register the public half only, and keep the private key in your backend", i)
		case k.Kid == "" || len(k.Kid) > 128:
			return nil, fmt.Errorf("keys[%d]: kid is required (at most 128 characters): tokens name their key with it", i)
		case strings.HasPrefix(k.Kid, HarnessKeyPrefix):
			return nil, fmt.Errorf("keys[%d]: kid %q starts with %q, which names the harness's own keys", i, k.Kid, HarnessKeyPrefix)
		case k.Alg != "" && k.Alg != "EdDSA":
			return nil, fmt.Errorf("keys[%d]: alg %q: tokens are signed with EdDSA", i, k.Alg)
		case k.Use != "" && k.Use != "sig":
			return nil, fmt.Errorf("keys[%d]: use %q: the key must be for signatures (sig)", i, k.Use)
		case err != nil || len(x) != ed25519.PublicKeySize:
			return nil, fmt.Errorf("keys[%d]: x must be the 32-byte public key, base64url without padding", i)
		case keys[k.Kid] != nil:
			return nil, fmt.Errorf("keys[%d]: kid %q is used twice", i, k.Kid)
		}
		keys[k.Kid] = x
	}
	return keys, nil
}

// jwksCache holds the JWKS URLs' keys a while: fetched at most once per jwksRefetch for a kid
// they lack (a key just added), kept jwksFresh otherwise. A key removed from a URL's JWKS
// stops verifying within jwksFresh.
type jwksCache struct {
	http *http.Client
	now  func() time.Time
	mu   sync.Mutex
	sets map[string]*jwksEntry
}

type jwksEntry struct {
	keys    map[string]ed25519.PublicKey
	fetched time.Time
	err     error
}

const (
	jwksFresh   = 5 * time.Minute
	jwksRefetch = 30 * time.Second
	jwksTimeout = 5 * time.Second
)

func newJWKSCache(c *http.Client, now func() time.Time) *jwksCache {
	return &jwksCache{http: c, now: now, sets: map[string]*jwksEntry{}}
}

// key returns the key kid of the JWKS at url; nil when it has none.
func (c *jwksCache) key(ctx context.Context, url, kid string) (ed25519.PublicKey, error) {
	c.mu.Lock()
	e := c.sets[url]
	c.mu.Unlock()
	now := c.now()
	if e != nil {
		age := now.Sub(e.fetched)
		if k := e.keys[kid]; k != nil && age < jwksFresh {
			return k, nil
		}
		if age < jwksRefetch {
			return e.keys[kid], e.err
		}
	}
	keys, err := c.fetch(ctx, url)
	c.mu.Lock()
	c.sets[url] = &jwksEntry{keys: keys, fetched: now, err: err}
	c.mu.Unlock()
	return keys[kid], err
}

// ErrJWKSUnavailable: the account's JWKS URL could not be read, so a token it signed cannot be
// verified now.
var ErrJWKSUnavailable = errors.New("the account's JWKS URL could not be read")

// fetch reads the JWKS at url.
func (c *jwksCache) fetch(ctx context.Context, url string) (map[string]ed25519.PublicKey, error) {
	keys, err := c.get(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJWKSUnavailable, err)
	}
	return keys, nil
}

func (c *jwksCache) get(ctx context.Context, url string) (map[string]ed25519.PublicKey, error) {
	ctx, cancel := context.WithTimeout(ctx, jwksTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", url, res.Status)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	return ParseJWKS(b)
}
