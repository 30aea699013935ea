package tokenkeys_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/tokenkeys"
	"github.com/agentharness/harness/shared/wire/usertoken"
)

func setup(t *testing.T, o tokenkeys.Options) (context.Context, *store.Store, *tokenkeys.Keys, string) {
	t.Helper()
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	st := store.New(db, testenv.Tables(t, db))
	acc, _, err := st.CreateAccount(ctx, "tokens", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	o.Sealer = secrets.New(secrets.NewRandomLocal())
	return ctx, st, tokenkeys.New(st, o), acc.ID
}

// mintAndVerify mints a token of the account with its key, and verifies it as a route would.
func mintAndVerify(t *testing.T, ctx context.Context, keys *tokenkeys.Keys, accountID string) (string, error) {
	t.Helper()
	tok, exp, err := keys.Mint(ctx, accountID, "u1", []string{"helper"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(exp); d < 59*time.Minute || d > time.Hour {
		t.Errorf("the token expires in %s, want an hour", d)
	}
	c, access, err := keys.Verify(ctx, tok)
	if err == nil && (c.EndUser != "u1" || c.Account != accountID || !c.Allows("helper") || c.Allows("other") || access.Account.ID != accountID) {
		t.Errorf("claims %+v of account %s", c, access.Account.ID)
	}
	return tok, err
}

func TestTheKeyIsMadeOnceAndSealed(t *testing.T) {
	ctx, st, keys, acc := setup(t, tokenkeys.Options{})
	var wg sync.WaitGroup
	toks := make([]string, 4)
	for i := range toks {
		wg.Go(func() {
			tok, _, err := keys.Mint(ctx, acc, "u1", nil, time.Minute)
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		})
	}
	wg.Wait()
	stored, err := st.AccountTokenKey(ctx, acc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks {
		if _, _, err := keys.Verify(ctx, tok); err != nil {
			t.Fatalf("of first mints at once, one signed with a key that was not kept: %v", err)
		}
	}
	if !strings.HasPrefix(stored.ID, tokenkeys.HarnessKeyPrefix) || len(stored.Sealed) == 0 || len(stored.Public) != ed25519.PublicKeySize {
		t.Fatalf("stored key %+v: want an id, a sealed seed and the public key", stored)
	}
	for seedAt := 0; seedAt+ed25519.SeedSize <= len(stored.Sealed); seedAt++ {
		if ed25519.NewKeyFromSeed(stored.Sealed[seedAt : seedAt+ed25519.SeedSize]).Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(stored.Public)) {
			t.Fatal("the stored key holds its seed in the clear")
		}
	}
	if _, err := mintAndVerify(t, ctx, keys, acc); err != nil {
		t.Errorf("a token signed with the account's key: %v", err)
	}
}

// Rotating the secret revokes every token the harness signed; deleting the account, too.
func TestTheKeyGoesWithTheSecret(t *testing.T) {
	ctx, st, keys, acc := setup(t, tokenkeys.Options{})
	before, err := mintAndVerify(t, ctx, keys, acc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RotateSecret(ctx, acc, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Verify(ctx, before); !errors.Is(err, usertoken.ErrUnknownKey) {
		t.Errorf("a token from before the rotation: %v, want ErrUnknownKey", err)
	}
	after, err := mintAndVerify(t, ctx, keys, acc)
	if err != nil {
		t.Errorf("a token minted after the rotation: %v", err)
	}
	if err := st.DeleteAccount(ctx, acc, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Verify(ctx, after); !errors.Is(err, usertoken.ErrUnknownKey) {
		t.Errorf("a token of a deleted account: %v, want ErrUnknownKey", err)
	}
	if _, _, err := keys.Mint(ctx, acc, "u1", nil, time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("minting for a deleted account: %v, want ErrNotFound", err)
	}
}

// A sealed key is bound to its account: copied onto another account's item, it does not open.
func TestASealedKeyOpensForItsAccountOnly(t *testing.T) {
	ctx, st, keys, acc := setup(t, tokenkeys.Options{})
	if _, _, err := keys.Mint(ctx, acc, "u1", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	stored, err := st.AccountTokenKey(ctx, acc)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := st.CreateAccount(ctx, "other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutAccountTokenKey(ctx, other.ID, stored); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Mint(ctx, other.ID, "u1", nil, time.Minute); err == nil {
		t.Error("another account's sealed key opened")
	}
}

// ownKey is a key pair an account's backend mints its own tokens with.
type ownKey struct {
	kid  string
	priv ed25519.PrivateKey
}

func newOwnKey(t *testing.T, kid string) ownKey {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ownKey{kid, priv}
}

func (k ownKey) jwk() string {
	x := base64.RawURLEncoding.EncodeToString(k.priv.Public().(ed25519.PublicKey))
	return fmt.Sprintf(`{"kty":"OKP","crv":"Ed25519","kid":%q,"x":%q,"alg":"EdDSA","use":"sig"}`, k.kid, x)
}

func (k ownKey) mint(t *testing.T, account, endUser string) string {
	t.Helper()
	now := time.Now()
	tok, err := usertoken.Mint(usertoken.Claims{Account: account, EndUser: endUser, Audience: usertoken.Audience, IssuedAt: now.Unix(), Expires: now.Add(time.Minute).Unix()}, k.kid, k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// An account registers the public keys its backend signs with; a token they signed verifies
// until its key is removed or replaced, and a token of another account's key never does.
func TestRegisteredKeys(t *testing.T) {
	ctx, st, keys, acc := setup(t, tokenkeys.Options{})
	a, b := newOwnKey(t, "backend-1"), newOwnKey(t, "backend-2")
	if err := st.SetIssuer(ctx, acc, `{"keys":[`+a.jwk()+`,`+b.jwk()+`]}`, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	tokA, tokB := a.mint(t, acc, "alice"), b.mint(t, acc, "bob")
	for _, tok := range []string{tokA, tokB} {
		if c, _, err := keys.Verify(ctx, tok); err != nil || c.Account != acc {
			t.Fatalf("a token of a registered key: %+v %v", c, err)
		}
	}
	other, _, err := st.CreateAccount(ctx, "other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Verify(ctx, a.mint(t, other.ID, "alice")); !errors.Is(err, usertoken.ErrUnknownKey) {
		t.Errorf("a token for another account signed by this account's key: %v, want ErrUnknownKey", err)
	}
	if err := st.SetIssuer(ctx, acc, `{"keys":[`+b.jwk()+`]}`, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Verify(ctx, tokA); !errors.Is(err, usertoken.ErrUnknownKey) {
		t.Errorf("a token of a removed key: %v, want ErrUnknownKey", err)
	}
	if _, _, err := keys.Verify(ctx, tokB); err != nil {
		t.Errorf("a token of a kept key: %v", err)
	}
	if err := st.SetIssuer(ctx, acc, "", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Verify(ctx, tokB); !errors.Is(err, usertoken.ErrUnknownKey) {
		t.Errorf("a token after the keys were removed: %v, want ErrUnknownKey", err)
	}
}

// A JWKS URL is fetched once and kept; a kid it lacks fetches it again, at most once per
// refetch interval, so a key just added verifies soon and a flood of unknown kids does not
// become a flood of fetches.
func TestJWKSURL(t *testing.T) {
	a, b := newOwnKey(t, "k-a"), newOwnKey(t, "k-b")
	var served atomic.Value
	served.Store(`{"keys":[` + a.jwk() + `]}`)
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		_, _ = w.Write([]byte(served.Load().(string)))
	}))
	defer srv.Close()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	ctx, st, keys, acc := setup(t, tokenkeys.Options{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	if err := st.SetIssuer(ctx, acc, "", srv.URL, time.Now()); err != nil {
		t.Fatal(err)
	}
	mint := func(k ownKey) string {
		now := time.Unix(0, clock.Load())
		tok, err := usertoken.Mint(usertoken.Claims{Account: acc, EndUser: "u", Audience: usertoken.Audience, IssuedAt: now.Unix(), Expires: now.Add(time.Hour).Unix()}, k.kid, k.priv)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for range 3 {
		if _, _, err := keys.Verify(ctx, mint(a)); err != nil {
			t.Fatal(err)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for three tokens of one key, want 1", n)
	}
	served.Store(`{"keys":[` + a.jwk() + `,` + b.jwk() + `]}`)
	if _, _, err := keys.Verify(ctx, mint(b)); !errors.Is(err, usertoken.ErrUnknownKey) {
		t.Errorf("a new key within the refetch interval: %v, want ErrUnknownKey", err)
	}
	clock.Add(int64(time.Minute))
	if _, _, err := keys.Verify(ctx, mint(b)); err != nil {
		t.Errorf("a new key after the refetch interval: %v", err)
	}
	served.Store(`{"keys":[` + b.jwk() + `]}`)
	clock.Add(int64(6 * time.Minute))
	if _, _, err := keys.Verify(ctx, mint(a)); !errors.Is(err, usertoken.ErrUnknownKey) {
		t.Errorf("a key the URL stopped serving, after the cache's life: %v, want ErrUnknownKey", err)
	}
	srv.Close()
	clock.Add(int64(6 * time.Minute))
	if _, _, err := keys.Verify(ctx, mint(b)); !errors.Is(err, tokenkeys.ErrJWKSUnavailable) {
		t.Errorf("a JWKS URL that does not answer: %v, want ErrJWKSUnavailable", err)
	}
}

func TestParseJWKSRefusals(t *testing.T) {
	good := newOwnKey(t, "k1")
	x := base64.RawURLEncoding.EncodeToString(good.priv.Public().(ed25519.PublicKey))
	for name, tt := range map[string]struct{ jwks, want string }{
		"no keys":         {`{"keys":[]}`, "has no keys"},
		"an RSA key":      {`{"keys":[{"kty":"RSA","kid":"r","n":"AQAB","e":"AQAB"}]}`, "only Ed25519 keys"},
		"a private key":   {`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k","x":"` + x + `","d":"c2VjcmV0"}]}`, "holds a private key"},
		"no kid":          {`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + x + `"}]}`, "kid is required"},
		"a harness kid":   {`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"key_x","x":"` + x + `"}]}`, "names the harness's own keys"},
		"a short x":       {`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k","x":"AAAA"}]}`, "32-byte public key"},
		"a kid twice":     {`{"keys":[` + good.jwk() + `,` + good.jwk() + `]}`, "used twice"},
		"not a JWKS":      {`[1,2]`, "not JSON of the form"},
		"another alg":     {`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k","x":"` + x + `","alg":"ES256"}]}`, "signed with EdDSA"},
		"an encrypt key ": {`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k","x":"` + x + `","use":"enc"}]}`, "for signatures"},
	} {
		if _, err := tokenkeys.ParseJWKS([]byte(tt.jwks)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tt.want)
		}
	}
	if keys, err := tokenkeys.ParseJWKS([]byte(`{"keys":[` + good.jwk() + `]}`)); err != nil || !bytes.Equal(keys["k1"], good.priv.Public().(ed25519.PublicKey)) {
		t.Errorf("a good JWKS: %v %v", keys, err)
	}
}
