package tokenkeys_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/tokenkeys"
	"github.com/agentharness/harness/shared/wire/usertoken"
)

func setup(t *testing.T) (context.Context, *store.Store, *tokenkeys.Keys, string) {
	t.Helper()
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	st := store.New(db, testenv.Tables(t, db))
	acc, _, err := st.CreateAccount(ctx, "tokens", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ctx, st, tokenkeys.New(st, secrets.New(secrets.NewRandomLocal())), acc.ID
}

// mint signs a token of the account with its key, and verifies it as a route would.
func mintAndVerify(t *testing.T, ctx context.Context, keys *tokenkeys.Keys, accountID string) (string, error) {
	t.Helper()
	kid, priv, err := keys.Signing(ctx, accountID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := usertoken.Mint(usertoken.Claims{Account: accountID, EndUser: "u1", Audience: usertoken.Audience, IssuedAt: now.Unix(), Expires: now.Add(time.Hour).Unix()}, kid, priv)
	if err != nil {
		t.Fatal(err)
	}
	return tok, verify(ctx, keys, tok)
}

func verify(ctx context.Context, keys *tokenkeys.Keys, tok string) error {
	account, kid, err := usertoken.Unverified(tok)
	if err != nil {
		return err
	}
	pub, err := keys.Verifying(ctx, account, kid)
	if err != nil {
		return err
	}
	_, err = usertoken.Verify(tok, func(string) ed25519.PublicKey { return pub }, time.Now(), 0)
	return err
}

func TestTheKeyIsMadeOnceAndSealed(t *testing.T) {
	ctx, st, keys, acc := setup(t)
	var wg sync.WaitGroup
	ids := make([]string, 4)
	for i := range ids {
		wg.Go(func() {
			id, _, err := keys.Signing(ctx, acc)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] || id == "" {
			t.Fatalf("first mints at once got keys %v, want one", ids)
		}
	}
	_, priv, err := keys.Signing(ctx, acc)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.AccountTokenKey(ctx, acc)
	if err != nil {
		t.Fatal(err)
	}
	if stored.ID != ids[0] || len(stored.Sealed) == 0 || bytes.Contains(stored.Sealed, priv.Seed()) {
		t.Errorf("stored key %s (%d bytes) must be the one made, sealed", stored.ID, len(stored.Sealed))
	}
	if _, err := mintAndVerify(t, ctx, keys, acc); err != nil {
		t.Errorf("a token signed with the account's key: %v", err)
	}
}

// Rotating the secret revokes every token the harness signed; deleting the account, too.
func TestTheKeyGoesWithTheSecret(t *testing.T) {
	ctx, st, keys, acc := setup(t)
	before, err := mintAndVerify(t, ctx, keys, acc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RotateSecret(ctx, acc, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := verify(ctx, keys, before); !errors.Is(err, usertoken.ErrUnknownKey) {
		t.Errorf("a token from before the rotation: %v, want ErrUnknownKey", err)
	}
	after, err := mintAndVerify(t, ctx, keys, acc)
	if err != nil {
		t.Errorf("a token minted after the rotation: %v", err)
	}
	if err := st.DeleteAccount(ctx, acc, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := verify(ctx, keys, after); !errors.Is(err, usertoken.ErrUnknownKey) {
		t.Errorf("a token of a deleted account: %v, want ErrUnknownKey", err)
	}
	if _, _, err := keys.Signing(ctx, acc); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("signing for a deleted account: %v, want ErrNotFound", err)
	}
}

// A sealed key is bound to its account: copied onto another account's item, it does not open.
func TestASealedKeyOpensForItsAccountOnly(t *testing.T) {
	ctx, st, keys, acc := setup(t)
	if _, _, err := keys.Signing(ctx, acc); err != nil {
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
	if _, _, err := keys.Signing(ctx, other.ID); err == nil {
		t.Error("another account's sealed key opened")
	}
}
