package natsturns_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/wire/ids"
	"github.com/agentharness/harness/shared/wire/natsturns"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

func ExampleSubject() {
	fmt.Println(natsturns.Subject("acct_1", "conv.2024", "turn:7"))
	fmt.Println(natsturns.ConversationSubjects("acct_1", "conv.2024"))
	fmt.Println(natsturns.InboxPrefix("acct_1"))
	// Output:
	// harness.acct_1.conv%2E2024.turn:7
	// harness.acct_1.conv%2E2024.>
	// _INBOX_acct_1
}

func TestSubjects(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{natsturns.Token("acct_1-x:y"), "acct_1-x:y"},
		{natsturns.Token("a.b..c"), "a%2Eb%2E%2Ec"},
		{natsturns.Token("."), "%2E"},
		{natsturns.Subject("acct.1", "conv.2", "turn.3"), "harness.acct%2E1.conv%2E2.turn%2E3"},
		{natsturns.Subject("a", "c", "k"), "harness.a.c.k"},
		{natsturns.AccountSubjects("acct.1"), "harness.acct%2E1.>"},
		{natsturns.ConversationSubjects("acct.1", "c.2"), "harness.acct%2E1.c%2E2.>"},
		{natsturns.InboxPrefix("acct.1"), "_INBOX_acct%2E1"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestClientPermissions(t *testing.T) {
	want := jwt.Permissions{
		Pub: jwt.Permission{Allow: jwt.StringList{
			"JS.harness.API.CONSUMER.CREATE.TURNS.P_1.harness.a%2Eb.>",
			"JS.harness.API.CONSUMER.MSG.NEXT.TURNS.P_1",
			"JS.harness.API.CONSUMER.INFO.TURNS.P_1",
			"JS.harness.API.CONSUMER.DELETE.TURNS.P_1",
			"JS.harness.API.CONSUMER.CREATE.TURNS.P_2.harness.a%2Eb.>",
			"JS.harness.API.CONSUMER.MSG.NEXT.TURNS.P_2",
			"JS.harness.API.CONSUMER.INFO.TURNS.P_2",
			"JS.harness.API.CONSUMER.DELETE.TURNS.P_2",
		}},
		Sub: jwt.Permission{Allow: jwt.StringList{"_INBOX_a%2Eb.>"}},
	}
	if diff := cmp.Diff(want, natsturns.ClientPermissions("TURNS", "a.b", []string{"P_1", "P_2"})); diff != "" {
		t.Errorf("ClientPermissions (-want +got):\n%s", diff)
	}
}

// TestConsumerNames: a credential's consumer names are its account's and user key's alone, the
// same in every credential of both, and what nats.go's ordered consumer names its consumers.
func TestConsumerNames(t *testing.T) {
	user := func() string {
		kp, _ := nkeys.CreateUser()
		pub, _ := kp.PublicKey()
		return pub
	}
	k1, k2 := user(), user()
	p := natsturns.ConsumerPrefix("acct", k1)
	if again := natsturns.ConsumerPrefix("acct", k1); again != p {
		t.Errorf("ConsumerPrefix of one account and key = %s, then %s", p, again)
	}
	seen := map[string]string{}
	for _, tt := range []struct{ account, key string }{{"acct", k1}, {"acct", k2}, {"other", k1}} {
		for _, name := range natsturns.ConsumerNames(natsturns.ConsumerPrefix(tt.account, tt.key)) {
			if strings.ContainsAny(name, ".*> \t/\\") {
				t.Errorf("the consumer name %q holds a character consumer names cannot", name)
			}
			if prev, ok := seen[name]; ok {
				t.Errorf("%s/%s and %s hold the same consumer name %s", tt.account, tt.key, prev, name)
			}
			seen[name] = tt.account + "/" + tt.key
		}
	}
	want := []string{p + "_1", p + "_2", p + "_3", p + "_4"}
	if diff := cmp.Diff(want, natsturns.ConsumerNames(p)); diff != "" {
		t.Errorf("ConsumerNames (-want +got):\n%s", diff)
	}
}

// keys makes an account's identity key and a signing key of it: public keys and seeds.
func keys(t *testing.T) (account, accountSeed, signing, signingSeed string) {
	t.Helper()
	pair := func(create func() (nkeys.KeyPair, error)) (string, string) {
		kp, err := create()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		return pub, string(seed)
	}
	account, accountSeed = pair(nkeys.CreateAccount)
	signing, signingSeed = pair(nkeys.CreateAccount)
	return
}

var clock = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// decode decodes a user JWT and checks its signature and claims.
func decode(t *testing.T, token string) *jwt.UserClaims {
	t.Helper()
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatalf("decoding the JWT: %v", err)
	}
	var vr jwt.ValidationResults
	uc.Validate(&vr)
	if vr.IsBlocking(false) {
		t.Errorf("the JWT does not validate: %v", vr.Errors())
	}
	return uc
}

// TestIssue signs with a signing key: the JWT names the account it signs for, expires ttl after
// the clock, allows exactly ClientPermissions, and its seed and creds file open it.
func TestIssue(t *testing.T) {
	account, _, signing, signingSeed := keys(t)
	iss, err := natsturns.NewIssuer(signingSeed, account, "", 10*time.Minute, []string{"wss://nats.example:443"})
	if err != nil {
		t.Fatal(err)
	}
	iss.Now = func() time.Time { return clock.Add(400 * time.Millisecond) }
	c, err := iss.Issue("acct.1", "")
	if err != nil {
		t.Fatal(err)
	}
	uc := decode(t, c.JWT)
	if uc.Issuer != signing || uc.IssuerAccount != account || uc.Name != "acct.1" || uc.Expires != clock.Add(10*time.Minute).Unix() || uc.BearerToken {
		t.Errorf("claims: issuer %s, issuer account %s, name %q, expires %d, bearer %v; want %s, %s, acct.1, %d, false",
			uc.Issuer, uc.IssuerAccount, uc.Name, uc.Expires, uc.BearerToken, signing, account, clock.Add(10*time.Minute).Unix())
	}
	prefix := natsturns.ConsumerPrefix("acct.1", uc.Subject)
	if diff := cmp.Diff(natsturns.ClientPermissions(natsturns.DefaultStream, "acct.1", natsturns.ConsumerNames(prefix)), uc.Permissions); diff != "" {
		t.Errorf("permissions (-want +got):\n%s", diff)
	}
	want := natsturns.Credentials{
		ExpiresAt: clock.Add(10 * time.Minute), Stream: "HARNESS_TURNS", Subjects: "harness.acct%2E1.>",
		InboxPrefix: "_INBOX_acct%2E1", APIPrefix: "JS.harness.API", ConsumerPrefix: prefix, Consumers: natsturns.ConsumerNames(prefix),
		Servers: []string{"wss://nats.example:443"},
	}
	got := c
	got.JWT, got.Seed, got.Creds = "", "", ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}

	kp, err := nkeys.FromSeed([]byte(c.Seed))
	if err != nil {
		t.Fatalf("the seed: %v", err)
	}
	if pub, _ := kp.PublicKey(); pub != uc.Subject || !nkeys.IsValidPublicUserKey(pub) {
		t.Errorf("the seed's key is %s, the JWT's subject %s; want one user key", pub, uc.Subject)
	}
	credsJWT, err := jwt.ParseDecoratedJWT([]byte(c.Creds))
	if err != nil || credsJWT != c.JWT {
		t.Errorf("the creds file's JWT = %.20q, %v; want the answer's", credsJWT, err)
	}
	credsKey, err := jwt.ParseDecoratedNKey([]byte(c.Creds))
	if err != nil {
		t.Fatalf("the creds file's seed: %v", err)
	}
	if seed, _ := credsKey.Seed(); string(seed) != c.Seed {
		t.Error("the creds file holds another seed than the answer")
	}
}

// TestIssueIdentityKey signs with the account's own key: the JWT names no issuer account.
func TestIssueIdentityKey(t *testing.T) {
	account, accountSeed, _, _ := keys(t)
	for _, pub := range []string{"", account} {
		iss, err := natsturns.NewIssuer(accountSeed, pub, "TURNS", time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := iss.Issue("a", "")
		if err != nil {
			t.Fatal(err)
		}
		if uc := decode(t, c.JWT); uc.Issuer != account || uc.IssuerAccount != "" || c.Stream != "TURNS" {
			t.Errorf("NewIssuer(seed, %q): issuer %s, issuer account %q, stream %s; want %s, none, TURNS", pub, uc.Issuer, uc.IssuerAccount, c.Stream, account)
		}
	}
}

// TestIssuePublicKey signs the client's own key: the answer has no seed, the JWT its key.
func TestIssuePublicKey(t *testing.T) {
	account, _, _, signingSeed := keys(t)
	iss, err := natsturns.NewIssuer(signingSeed, account, "", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	c, err := iss.Issue("acct", pub)
	if err != nil {
		t.Fatal(err)
	}
	if uc := decode(t, c.JWT); uc.Subject != pub {
		t.Errorf("the JWT is for %s, want the client's key %s", uc.Subject, pub)
	}
	if again, err := iss.Issue("acct", pub); err != nil || !cmp.Equal(again.Consumers, c.Consumers) {
		t.Errorf("renewed credentials of the key hold consumers %v (%v), want the first ones' %v", again.Consumers, err, c.Consumers)
	}
	body, _ := json.Marshal(c)
	if c.Seed != "" || c.Creds != "" || strings.Contains(string(body), `"seed"`) || strings.Contains(string(body), `"creds"`) {
		t.Errorf("the answer for a client's key carries a seed: %s", body)
	}
}

func TestIssueRefusesKeys(t *testing.T) {
	account, accountSeed, _, signingSeed := keys(t)
	iss, err := natsturns.NewIssuer(signingSeed, account, "", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	userSeed, _ := user.Seed()
	userPub, _ := user.PublicKey()
	for name, key := range map[string]string{
		"garbage":           "hello",
		"an account key":    account,
		"a user seed":       string(userSeed),
		"an account seed":   accountSeed,
		"a truncated key":   userPub[:40],
		"a key with spaces": " " + userPub,
	} {
		_, err := iss.Issue("acct", key)
		var bad *natsturns.BadKeyError
		if !errors.As(err, &bad) {
			t.Errorf("%s: Issue = %v, want a *BadKeyError", name, err)
		} else if strings.Contains(err.Error(), key) {
			t.Errorf("%s: the error %q echoes the key", name, err)
		}
	}
	if _, err := iss.Issue("", ""); err == nil {
		t.Error("Issue with no account id succeeded")
	}
}

// TestIssueFitsAConnect: a server takes a CONNECT of at most 4096 bytes unless configured
// otherwise, so the JWT of the longest account id on the default stream leaves room for the rest
// of it; a stream name that makes the JWT too long is named in the error.
func TestIssueFitsAConnect(t *testing.T) {
	account, _, _, signingSeed := keys(t)
	longest := strings.Repeat("x", ids.MaxLen)
	iss, err := natsturns.NewIssuer(signingSeed, account, "", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := iss.Issue(longest, "")
	if err != nil || len(c.JWT) > 3584 {
		t.Errorf("the JWT of a %d-character account id is %d bytes (%v), want at most 3584", len(longest), len(c.JWT), err)
	}
	long := strings.Repeat("S", 80)
	if iss, err = natsturns.NewIssuer(signingSeed, account, long, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := iss.Issue(longest, ""); err == nil || !strings.Contains(err.Error(), "NATS_STREAM") {
		t.Errorf("Issue on a stream named %d characters = %v, want an error naming NATS_STREAM", len(long), err)
	}
}

func TestNewIssuerRefuses(t *testing.T) {
	account, accountSeed, _, _ := keys(t)
	user, _ := nkeys.CreateUser()
	userSeed, _ := user.Seed()
	userPub, _ := user.PublicKey()
	operator, _ := nkeys.CreateOperator()
	operatorSeed, _ := operator.Seed()
	for _, tt := range []struct {
		name, seed, account, stream string
		ttl                         time.Duration
		says                        string
	}{
		{"garbage seed", "SAnope", "", "", time.Minute, "not an nkey seed"},
		{"a user seed", string(userSeed), "", "", time.Minute, "not an account seed"},
		{"an operator seed", string(operatorSeed), "", "", time.Minute, "not an account seed"},
		{"a user key as the account", accountSeed, userPub, "", time.Minute, "not an account public key"},
		{"a zero ttl", accountSeed, account, "", 0, "must be positive"},
		{"a negative ttl", accountSeed, account, "", -time.Second, "must be positive"},
		{"a stream with a dot", accountSeed, account, "A.B", time.Minute, "stream name"},
	} {
		_, err := natsturns.NewIssuer(tt.seed, tt.account, tt.stream, tt.ttl, nil)
		if err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: NewIssuer = %v, want an error saying %q", tt.name, err, tt.says)
		}
		if err != nil && tt.seed != "" && strings.Contains(err.Error(), tt.seed) {
			t.Errorf("%s: the error %q echoes the seed", tt.name, err)
		}
	}
}

func TestIssuerFromConfig(t *testing.T) {
	account, accountSeed, signing, signingSeed := keys(t)
	const secretID = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:nats-signing"
	type want struct {
		nilIssuer         bool
		err               string
		issuer, issuerAcc string
		stream            string
		ttl               time.Duration
		servers           []string
	}
	for _, tt := range []struct {
		name   string
		config natsturns.IssuerConfig
		secret bool // pass a secrets reader holding signingSeed under secretID
		want   want
	}{
		{"no NATS", natsturns.IssuerConfig{SigningSeed: accountSeed}, true, want{nilIssuer: true}},
		{"no seed", natsturns.IssuerConfig{URL: "nats://n:4222"}, true, want{nilIssuer: true}},
		{"seed set", natsturns.IssuerConfig{URL: "nats://n:4222", SigningSeed: accountSeed}, false,
			want{issuer: account, stream: "HARNESS_TURNS", ttl: 15 * time.Minute, servers: []string{"nats://n:4222"}}},
		{"seed in Secrets Manager", natsturns.IssuerConfig{
			URL: "nats://n:4222", SigningSeedSecret: secretID, Account: account,
			Stream: "TURNS", CredentialsTTL: "1h", ClientURLs: "wss://a.example, nats://b.example:4222,",
		}, true, want{issuer: signing, issuerAcc: account, stream: "TURNS", ttl: time.Hour, servers: []string{"wss://a.example", "nats://b.example:4222"}}},
		{"a secret but no Secrets Manager", natsturns.IssuerConfig{URL: "nats://n", SigningSeedSecret: secretID}, false,
			want{err: "NATS_ACCOUNT_SIGNING_SEED_SECRET is set but no Secrets Manager client is"}},
		{"a secret that cannot be read", natsturns.IssuerConfig{URL: "nats://n", SigningSeedSecret: "other"}, true,
			want{err: "no secret other"}},
		{"a bad ttl", natsturns.IssuerConfig{URL: "nats://n", SigningSeed: accountSeed, CredentialsTTL: "soon"}, false,
			want{err: "NATS_CREDENTIALS_TTL"}},
		{"a zero ttl", natsturns.IssuerConfig{URL: "nats://n", SigningSeed: accountSeed, CredentialsTTL: "0s"}, false,
			want{err: "NATS_CREDENTIALS_TTL"}},
		{"a ttl over an hour", natsturns.IssuerConfig{URL: "nats://n", SigningSeed: accountSeed, CredentialsTTL: "61m"}, false,
			want{err: "NATS_CREDENTIALS_TTL"}},
		{"a bad seed", natsturns.IssuerConfig{URL: "nats://n", SigningSeed: "SUnope"}, false,
			want{err: "not an nkey seed"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			var secret func(context.Context, string) (string, error)
			if tt.secret {
				secret = func(_ context.Context, id string) (string, error) {
					asked = append(asked, id)
					if id != secretID {
						return "", errors.New("no secret " + id)
					}
					return signingSeed + "\n", nil
				}
			}
			iss, err := natsturns.IssuerFromConfig(context.Background(), tt.config, secret)
			switch {
			case tt.want.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.want.err) {
					t.Fatalf("IssuerFromConfig = %v, want an error saying %q", err, tt.want.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			case tt.want.nilIssuer:
				if iss != nil || len(asked) > 0 {
					t.Errorf("IssuerFromConfig = %v (asked for secrets %v), want nil and no secret read", iss, asked)
				}
				return
			case iss == nil:
				t.Fatal("IssuerFromConfig = nil, want an issuer")
			}
			if id := tt.config.SigningSeedSecret; id != "" && !cmp.Equal(asked, []string{id}) {
				t.Errorf("asked for secrets %v, want [%s]", asked, id)
			}
			iss.Now = func() time.Time { return clock }
			c, err := iss.Issue("acct", "")
			if err != nil {
				t.Fatal(err)
			}
			uc := decode(t, c.JWT)
			got := want{issuer: uc.Issuer, issuerAcc: uc.IssuerAccount, stream: c.Stream, ttl: c.ExpiresAt.Sub(clock), servers: c.Servers}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("the issuer (-want +got):\n%s", diff)
			}
		})
	}
}
