package usertoken_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/wire/usertoken"
)

var now = time.Unix(1_800_000_000, 0)

func newKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func claims() usertoken.Claims {
	return usertoken.Claims{Account: "acc_1", EndUser: "user-42", Audience: usertoken.Audience, Agents: []string{"helper"},
		IssuedAt: now.Unix(), Expires: now.Add(time.Hour).Unix()}
}

// keys is an account acc_1 whose only key is pub, under kid.
func keys(kid string, pub ed25519.PublicKey) func(string, string) (ed25519.PublicKey, error) {
	return func(account, k string) (ed25519.PublicKey, error) {
		if account == "acc_1" && k == kid {
			return pub, nil
		}
		return nil, nil
	}
}

func mustMint(t *testing.T, c usertoken.Claims, priv ed25519.PrivateKey) string {
	t.Helper()
	tok, err := usertoken.Mint(c, "k1", priv)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestMintedTokenVerifies(t *testing.T) {
	pub, priv := newKey(t)
	tok, err := usertoken.Mint(claims(), "k1", priv)
	if err != nil {
		t.Fatal(err)
	}
	got, err := usertoken.Verify(tok, keys("k1", pub), now.Add(30*time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.EndUser != "user-42" || got.Account != "acc_1" || !got.Allows("helper") || got.Allows("other") {
		t.Errorf("claims %+v: want user-42 of acc_1, allowed helper only", got)
	}
	if all := (usertoken.Claims{}); !all.Allows("any") {
		t.Error("claims without agents must allow every agent")
	}
}

func TestRefusals(t *testing.T) {
	pub, priv := newKey(t)
	otherPub, otherPriv := newKey(t)
	good, err := usertoken.Mint(claims(), "k1", priv)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	enc := base64.RawURLEncoding.EncodeToString
	byOther, _ := usertoken.Mint(claims(), "k1", otherPriv)
	// A token whose payload was changed after signing: another end user.
	tampered := parts[0] + "." + enc([]byte(`{"iss":"acc_1","sub":"admin","aud":"harness","iat":1800000000,"exp":1800003600}`)) + "." + parts[2]
	for _, tt := range []struct {
		name  string
		token string
		keys  func(string, string) (ed25519.PublicKey, error)
		at    time.Time
		want  error
	}{
		{"expired", good, keys("k1", pub), now.Add(2 * time.Hour), usertoken.ErrExpired},
		{"signed by another key under the same kid", byOther, keys("k1", pub), now, usertoken.ErrSignature},
		{"a kid the account no longer has", good, keys("k2", otherPub), now, usertoken.ErrUnknownKey},
		{"payload changed after signing", tampered, keys("k1", pub), now, usertoken.ErrSignature},
		{"alg none", enc([]byte(`{"alg":"none","kid":"k1"}`)) + "." + parts[1] + ".", keys("k1", pub), now, usertoken.ErrAlgorithm},
		{"alg HS256", enc([]byte(`{"alg":"HS256","kid":"k1"}`)) + "." + parts[1] + "." + parts[2], keys("k1", pub), now, usertoken.ErrAlgorithm},
		{"two parts", parts[0] + "." + parts[1], keys("k1", pub), now, usertoken.ErrMalformed},
		{"payload not base64", parts[0] + ".%%%." + parts[2], keys("k1", pub), now, usertoken.ErrMalformed},
		{"signature not base64", parts[0] + "." + parts[1] + ".%%%", keys("k1", pub), now, usertoken.ErrSignature},
		{"another account's token", mustMint(t, usertoken.Claims{Account: "acc_2", EndUser: "u", Audience: usertoken.Audience, IssuedAt: now.Unix(), Expires: now.Add(time.Minute).Unix()}, priv), keys("k1", pub), now, usertoken.ErrUnknownKey},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := usertoken.Verify(tt.token, tt.keys, tt.at, 0); !errors.Is(err, tt.want) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
	// Within the skew, a token just past exp still verifies.
	if _, err := usertoken.Verify(good, keys("k1", pub), now.Add(time.Hour+20*time.Second), 30*time.Second); err != nil {
		t.Errorf("a token 20 s past exp with 30 s of skew: %v", err)
	}
}

// An account's backend mints with its own key, and may write aud as a list and add claims of
// its own; what it may not do is mint a token that lives longer than MaxTTL or for another
// audience.
func TestAccountMintedTokens(t *testing.T) {
	pub, priv := newKey(t)
	sign := func(payload string) string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","typ":"JWT","kid":"own"}`))
		p := base64.RawURLEncoding.EncodeToString([]byte(payload))
		return h + "." + p + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(h+"."+p)))
	}
	listed := sign(`{"iss":"acc_1","sub":"u1","aud":["other","harness"],"iat":1800000000,"exp":1800000600,"email":"u1@example.com"}`)
	if c, err := usertoken.Verify(listed, keys("own", pub), now, 0); err != nil || c.EndUser != "u1" {
		t.Errorf("aud as a list holding harness: %+v %v", c, err)
	}
	for name, payload := range map[string]string{
		"another audience":    `{"iss":"acc_1","sub":"u1","aud":["other"],"iat":1800000000,"exp":1800000600}`,
		"longer than MaxTTL":  `{"iss":"acc_1","sub":"u1","aud":"harness","iat":1800000000,"exp":1800172800}`,
		"without an end user": `{"iss":"acc_1","aud":"harness","iat":1800000000,"exp":1800000600}`,
	} {
		if _, err := usertoken.Verify(sign(payload), keys("own", pub), now, 0); !errors.Is(err, usertoken.ErrMalformed) {
			t.Errorf("%s: Verify = %v, want ErrMalformed", name, err)
		}
	}
	long := claims()
	long.Expires = now.Add(usertoken.MaxTTL + time.Second).Unix()
	if _, err := usertoken.Mint(long, "k1", priv); err == nil {
		t.Error("Mint signed a token that lives longer than MaxTTL")
	}
}
