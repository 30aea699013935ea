package localrunner_test

import (
	"context"
	"encoding/json"
	accountmanage "github.com/agentharness/harness/functions/account-manage/wire"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/natsserver"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/accounts"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/wire/natsturns"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

const natsCredsPath = "/accounts/me/nats-credentials"

// natsRunner serves the stack with account-manage configured from the environment to issue
// credentials for ns; ?variant=no-nats reaches an account-manage without them.
func natsRunner(t *testing.T, ns *natsserver.Server) *httptest.Server {
	t.Helper()
	env := map[string]string{
		"ADMIN_SECRET": adminSecret, "NATS_URL": ns.URL, "NATS_ACCOUNT_SIGNING_SEED": ns.ClientSigningSeed,
		"NATS_ACCOUNT": ns.ClientAccount, "NATS_CREDENTIALS_TTL": "2m",
	}
	opts := testenv.Stack(t).Options(func(k string) string { return env[k] })
	opts.Functions = map[string]localrunner.Constructor{
		"AccountManageFunction": func(d agentdeps.Deps) (localrunner.Handlers, error) {
			o, err := accountmanage.Options(d)
			if err != nil {
				return localrunner.Handlers{}, err
			}
			without := o
			without.NATS = nil
			variants := map[string]http.Handler{"": accounts.NewFrom(o), "no-nats": accounts.NewFrom(without)}
			return localrunner.Handlers{HTTP: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				variants[r.URL.Query().Get("variant")].ServeHTTP(w, r)
			})}, nil
		},
	}
	_, srv := testenv.Serve(t, opts)
	return srv
}

// issue asks account-manage for credentials and checks what every answer must be.
func issue(t *testing.T, srv *httptest.Server, secret, body string) (natsturns.Credentials, map[string]any) {
	t.Helper()
	res, header := request(t, srv, http.MethodPost, natsCredsPath, secret, "application/json", []byte(body))
	if res.status != http.StatusOK {
		t.Fatalf("POST %s %s = %d %s, want 200", natsCredsPath, body, res.status, res.body)
	}
	if cc := header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	var c natsturns.Credentials
	if err := json.Unmarshal(res.body, &c); err != nil {
		t.Fatalf("the answer %s: %v", res.body, err)
	}
	return c, res.json(t)
}

// natsClient connects to url as a client with a user JWT and its seed, and the inbox and
// JetStream API prefixes the credentials name, until the test ends. The server's refusals are
// the tests' to check, not the log's.
func natsClient(t *testing.T, url, userJWT, seed, inboxPrefix, apiPrefix string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserJWTAndSeed(userJWT, seed), nats.CustomInboxPrefix(inboxPrefix),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatalf("connecting with the issued credentials: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.NewWithAPIPrefix(nc, apiPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// readTurns reads filter's first message with an ordered consumer named with c's consumer
// names, as a client with c and seed, waiting at most wait (a refused request goes unanswered).
func readTurns(t *testing.T, url string, c natsturns.Credentials, seed, filter string, wait time.Duration) (string, error) {
	t.Helper()
	js := natsClient(t, url, c.JWT, seed, c.InboxPrefix, c.APIPrefix)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	oc, err := js.OrderedConsumer(ctx, c.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, NamePrefix: c.ConsumerPrefix})
	if err != nil {
		return "", err
	}
	it, err := oc.Messages()
	if err != nil {
		return "", err
	}
	defer it.Stop()
	m, err := it.Next(jetstream.NextContext(ctx))
	if err != nil {
		return "", err
	}
	return string(m.Data()), nil
}

// TestNATSCredentials goes through POST /accounts/me/nats-credentials against a real NATS
// server: the refusals, then credentials (generated, or for the client's own key) that read the
// account's turns and are refused on another account's.
func TestNATSCredentials(t *testing.T) {
	ns, err := natsserver.Start(natsserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	srv := natsRunner(t, ns)
	idA, secretA := createAccount(t, srv, "ada")
	idB, _ := createAccount(t, srv, "eve")

	for _, secret := range []string{"", "hsk_not-a-secret"} {
		if res := call(t, srv, http.MethodPost, natsCredsPath, secret, ""); res.status != http.StatusUnauthorized {
			t.Errorf("POST %s with secret %q = %d %s, want 401", natsCredsPath, secret, res.status, res.body)
		}
	}
	res := call(t, srv, http.MethodPost, natsCredsPath+"?variant=no-nats", secretA, "")
	if msg, _ := res.json(t)["error"].(string); res.status != http.StatusNotImplemented || !strings.Contains(msg, "no NATS credentials configured") {
		t.Errorf("without NATS = %d %s, want 501 saying no NATS credentials are configured", res.status, res.body)
	}
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()
	userSeed, _ := user.Seed()
	for _, tt := range []struct{ name, body, field string }{
		{"garbage", `{"publicKey":"nope"}`, "publicKey"},
		{"an account key", `{"publicKey":"` + ns.ClientAccount + `"}`, "publicKey"},
		{"a seed", `{"publicKey":"` + string(userSeed) + `"}`, "publicKey"},
		{"a number", `{"publicKey":7}`, "publicKey"},
		{"an unknown field", `{"publicKey":"` + userPub + `","seed":"x"}`, "seed"},
		{"a repeated key", `{"publicKey":"` + userPub + `","publicKey":""}`, "publicKey"},
		{"not JSON", `{"publicKey":`, ""},
	} {
		res := call(t, srv, http.MethodPost, natsCredsPath, secretA, tt.body)
		testenv.WantFieldError(t, res.status, res.body, tt.field)
		if strings.Contains(string(res.body), string(userSeed)) {
			t.Errorf("%s: the refusal echoes the seed: %s", tt.name, res.body)
		}
	}

	// The harness publishes a turn for each account.
	hnc, err := ns.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer hnc.Close()
	hjs, _ := jetstream.New(hnc)
	ctx := context.Background()
	if _, err := hjs.CreateStream(ctx, jetstream.StreamConfig{Name: natsturns.DefaultStream, Subjects: []string{"harness.>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	subjectA, subjectB := natsturns.Subject(idA, "conv.1", "turn-1"), natsturns.Subject(idB, "conv.1", "turn-1")
	for subject, data := range map[string]string{subjectA: "ada's turn", subjectB: "eve's turn"} {
		if _, err := hjs.Publish(ctx, subject, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}

	for _, body := range []string{"", "{}", `{"publicKey":""}`} {
		before := time.Now()
		c, raw := issue(t, srv, secretA, body)
		if c.Seed == "" || c.Creds == "" || c.Stream != natsturns.DefaultStream || c.Subjects != natsturns.AccountSubjects(idA) ||
			c.InboxPrefix != natsturns.InboxPrefix(idA) || len(c.Servers) != 1 || c.Servers[0] != ns.URL ||
			!slices.Equal(c.Consumers, natsturns.ConsumerNames(c.ConsumerPrefix)) {
			t.Errorf("credentials for %q = %v; want a seed and creds, %s, %s, %s, [%s], and consumer names", body, raw, natsturns.DefaultStream,
				natsturns.AccountSubjects(idA), natsturns.InboxPrefix(idA), ns.URL)
		}
		// The expiry is a whole second (a JWT's exp) after the issuer's clock, which may have
		// crossed into the next second since before.
		if ttl := c.ExpiresAt.Sub(before); ttl < 2*time.Minute-2*time.Second || ttl > 2*time.Minute+time.Second {
			t.Errorf("the credentials expire %s after the request, want 2m", ttl)
		}
	}
	c, _ := issue(t, srv, secretA, "")
	if got, err := readTurns(t, ns.URL, c, c.Seed, c.Subjects, 5*time.Second); err != nil || got != "ada's turn" {
		t.Errorf("A read %q, %v from its own subjects; want ada's turn", got, err)
	}
	for _, filter := range []string{subjectB, natsturns.AccountSubjects(idB), "harness.>"} {
		if got, err := readTurns(t, ns.URL, c, c.Seed, filter, 500*time.Millisecond); err == nil {
			t.Errorf("A read %q from %s, want a refusal", got, filter)
		}
	}

	// The client's own key: no seed in the answer, and the JWT is for that key.
	own, raw := issue(t, srv, secretA, `{"publicKey":"`+userPub+`"}`)
	if _, ok := raw["seed"]; ok || own.Creds != "" {
		t.Errorf("credentials for a public key carry a seed: %v", raw)
	}
	if uc, err := jwt.DecodeUserClaims(own.JWT); err != nil || uc.Subject != userPub || uc.Name != idA {
		t.Errorf("the JWT for a public key: %+v, %v; want subject %s, name %s", uc, err, userPub, idA)
	}
	if got, err := readTurns(t, ns.URL, own, string(userSeed), subjectA, 5*time.Second); err != nil || got != "ada's turn" {
		t.Errorf("A with its own key read %q, %v; want ada's turn", got, err)
	}
}
