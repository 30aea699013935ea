package accounts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/edge/accounts"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

// The secrets the test configs hold: no response may show them and no table may hold them
// unsealed.
const (
	testAdminSecret = "adm_0c9f2d7e-test-admin-secret"
	modelKey        = "sk-model-7f3e9a1c-do-not-leak"
	tavilyKey       = "tvly-0b7d1c55-do-not-leak"
)

// scriptedHi is a model block that passes the config checks.
const scriptedHi = `{"provider":"scripted","script":[{"text":"hi"}]}`

// researcherConfig holds a model key and a tool key. Its openai model is only validated, never
// run.
const researcherConfig = `{
  "name": "researcher",
  "system": "You research things.",
  "model": {"provider":"openai","model":"gpt-4o-mini","apiKey":"` + modelKey + `"},
  "maxSteps": 4,
  "tools": {"current_time": {}, "tavilySearch": {"apiKey":"` + tavilyKey + `","maxResults":3}}
}`

// helperConfig is a full config with a tool key.
const helperConfig = `{
  "name": "helper",
  "system": "You help.",
  "model": ` + scriptedHi + `,
  "maxSteps": 4,
  "tools": {"current_time": {"enabled": true}, "tavilySearch": {"apiKey":"` + tavilyKey + `","maxResults":3}}
}`

var testNow = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// fixture serves account-manage over real HTTP on DynamoDB Local, with the store and the
// agents service it writes through, so a test can read what it stored.
type fixture struct {
	srv    *httptest.Server
	db     *dynamodb.Client
	tables store.Tables
	store  *store.Store
	agents *agentstore.Service

	mu sync.Mutex
	// queued holds the work messages account-manage sent; while enqueueErr is set, sending fails.
	queued     []string
	enqueueErr error
}

// purgeQueued reports whether account-manage queued the purge of accountID.
func (f *fixture) purgeQueued(accountID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.queued, `{"type":"purge","accountId":"`+accountID+`"}`)
}

func newFixture(t *testing.T, adminSecret string, openSignup bool) *fixture {
	t.Helper()
	db := testenv.DynamoDB(t)
	tables := testenv.Tables(t, db)
	st := store.New(db, tables)
	clock := func() time.Time { return testNow }
	svc := agentstore.New(st, secrets.New(secrets.NewRandomLocal()), builtintools.ConfigChecks(), clock)
	f := &fixture{db: db, tables: tables, store: st, agents: svc}
	f.srv = httptest.NewServer(accounts.NewFrom(accounts.Options{
		Store: st, Agents: svc, AdminSecret: adminSecret, OpenSignup: openSignup, Now: clock, Logger: slog.New(slog.DiscardHandler),
		Enqueue: func(_ context.Context, body string) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.enqueueErr != nil {
				return f.enqueueErr
			}
			f.queued = append(f.queued, body)
			return nil
		},
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// do calls account-manage.
func (f *fixture) do(t *testing.T, method, path, bearer, body string) (int, []byte) {
	t.Helper()
	return testenv.Call(t, method, f.srv.URL+path, testenv.Bearer(bearer), body)
}

// must calls account-manage and fails the test unless it answers want.
func (f *fixture) must(t *testing.T, want int, method, path, bearer, body string) []byte {
	t.Helper()
	status, b := f.do(t, method, path, bearer, body)
	if status != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, status, b, want)
	}
	return b
}

func decodeJSON[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("body is not the expected JSON: %v: %s", err, body)
	}
	return v
}

type accountBody struct {
	AccountID string `json:"accountId"`
	Username  string `json:"username"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
	Secret    string `json:"secret"`
}

type agentView struct {
	AgentID   string         `json:"agentId"`
	Config    map[string]any `json:"config"`
	Version   int64          `json:"version"`
	CreatedAt string         `json:"createdAt"`
	UpdatedAt string         `json:"updatedAt"`
	Warnings  []string       `json:"warnings"`
}

// createAccount creates an account with the admin secret.
func (f *fixture) createAccount(t *testing.T, username string) accountBody {
	t.Helper()
	return decodeJSON[accountBody](t, f.must(t, http.StatusCreated, "POST", "/accounts", testAdminSecret, `{"username":"`+username+`"}`))
}

// createAgent posts an agent config (with "agentId" inside it if wanted).
func (f *fixture) createAgent(t *testing.T, secret, config string) agentView {
	t.Helper()
	return decodeJSON[agentView](t, f.must(t, http.StatusCreated, "POST", "/accounts/me/agents", secret, config))
}

// withID puts "agentId" into a config body.
func withID(id, config string) string {
	return `{"agentId":"` + id + `",` + strings.TrimPrefix(strings.TrimSpace(config), "{")
}

func TestCreateAccountNeedsAdminSecret(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	for _, tt := range []struct {
		name, bearer string
		want         int
	}{
		{"no bearer", "", http.StatusUnauthorized},
		{"wrong admin secret", "adm_wrong", http.StatusUnauthorized},
		{"admin secret with a suffix", testAdminSecret + "x", http.StatusUnauthorized},
		{"admin secret", testAdminSecret, http.StatusCreated},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := f.do(t, "POST", "/accounts", tt.bearer, `{"username":"ada"}`)
			if status != tt.want {
				t.Fatalf("POST /accounts = %d %s, want %d", status, body, tt.want)
			}
		})
	}
	listed := decodeJSON[struct{ Accounts []accountBody }](t, f.must(t, http.StatusOK, "GET", "/accounts", testAdminSecret, ""))
	if len(listed.Accounts) != 1 {
		t.Errorf("refused signups created accounts: got %d accounts, want 1", len(listed.Accounts))
	}
}

func TestCreatedAccountSecretWorks(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	body := f.must(t, http.StatusCreated, "POST", "/accounts", testAdminSecret, `{"username":"  ada  "}`)
	raw := decodeJSON[map[string]any](t, body)
	for _, k := range []string{"accountId", "username", "createdAt", "secret"} {
		if s, _ := raw[k].(string); s == "" {
			t.Errorf("POST /accounts body %s has no %q, want a non-empty string", body, k)
		}
	}
	acc := decodeJSON[accountBody](t, body)
	if !strings.HasPrefix(acc.AccountID, "acc_") || !strings.HasPrefix(acc.Secret, "hsk_") {
		t.Errorf("accountId %q and secret %q, want acc_… and hsk_…", acc.AccountID, acc.Secret)
	}
	if acc.Username != "ada" {
		t.Errorf("username = %q, want the trimmed %q", acc.Username, "ada")
	}
	if want := testNow.Format(time.RFC3339); acc.CreatedAt != want {
		t.Errorf("createdAt = %q, want %q", acc.CreatedAt, want)
	}

	me := f.must(t, http.StatusOK, "GET", "/accounts/me", acc.Secret, "")
	got := decodeJSON[map[string]any](t, me)
	want := map[string]any{"accountId": acc.AccountID, "username": "ada", "createdAt": acc.CreatedAt, "updatedAt": acc.CreatedAt, "allowedOrigins": []any{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET /accounts/me (-want +got):\n%s", diff)
	}
	if bytes.Contains(me, []byte(acc.Secret)) {
		t.Errorf("GET /accounts/me shows the secret: %s", me)
	}

	// The accounts table keeps only a hash of the secret.
	out, err := f.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: &f.tables.Accounts})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		if p := testenv.FindString(it, acc.Secret); p != "" {
			t.Errorf("the accounts table holds the account secret at %s", p)
		}
	}
}

func TestOpenSignupNeedsNoAdminSecret(t *testing.T) {
	f := newFixture(t, testAdminSecret, true)
	acc := decodeJSON[accountBody](t, f.must(t, http.StatusCreated, "POST", "/accounts", "", `{"username":"walk-in"}`))
	me := decodeJSON[accountBody](t, f.must(t, http.StatusOK, "GET", "/accounts/me", acc.Secret, ""))
	if me.AccountID != acc.AccountID || me.Username != "walk-in" {
		t.Errorf("GET /accounts/me = %+v, want account %s named walk-in", me, acc.AccountID)
	}
}

func TestUsernameValidation(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ada")
	tests := []struct {
		name, body, field string
	}{
		{"empty", `{"username":""}`, "username"},
		{"blank", `{"username":"   "}`, "username"},
		{"missing", `{}`, "username"},
		{"too long", `{"username":"` + strings.Repeat("x", 65) + `"}`, "username"},
		{"control character", `{"username":"a\u0007b"}`, "username"},
		{"not a string", `{"username":5}`, "username"},
		{"unknown field", `{"username":"bob","nickname":"b"}`, "nickname"},
		{"not JSON", `username=bob`, ""},
		{"trailing data", `{"username":"bob"} {}`, ""},
	}
	for _, route := range []struct{ method, path, bearer string }{
		{"POST", "/accounts", testAdminSecret},
		{"PATCH", "/accounts/me", acc.Secret},
		{"PATCH", "/accounts/" + acc.AccountID, testAdminSecret},
	} {
		for _, tt := range tests {
			t.Run(route.method+" "+route.path+"/"+tt.name, func(t *testing.T) {
				status, body := f.do(t, route.method, route.path, route.bearer, tt.body)
				testenv.WantFieldError(t, status, body, tt.field)
			})
		}
	}
	// 64 characters is the limit, not past it.
	long := strings.Repeat("y", 64)
	if got := decodeJSON[accountBody](t, f.must(t, http.StatusOK, "PATCH", "/accounts/me", acc.Secret, `{"username":"`+long+`"}`)); got.Username != long {
		t.Errorf("username = %q, want the 64-character name", got.Username)
	}
	listed := decodeJSON[struct{ Accounts []accountBody }](t, f.must(t, http.StatusOK, "GET", "/accounts", testAdminSecret, ""))
	if len(listed.Accounts) != 1 {
		t.Errorf("refused signups created accounts: got %d accounts, want 1", len(listed.Accounts))
	}
}

func TestAccountMe(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ada")
	other := f.createAccount(t, "bob")
	ctx := context.Background()

	renamed := decodeJSON[accountBody](t, f.must(t, http.StatusOK, "PATCH", "/accounts/me", acc.Secret, `{"username":"ada lovelace"}`))
	if renamed.AccountID != acc.AccountID || renamed.Username != "ada lovelace" {
		t.Errorf("PATCH /accounts/me = %+v, want account %s renamed to ada lovelace", renamed, acc.AccountID)
	}
	if got := decodeJSON[accountBody](t, f.must(t, http.StatusOK, "GET", "/accounts/me", acc.Secret, "")); got.Username != "ada lovelace" {
		t.Errorf("GET /accounts/me after rename: username = %q, want %q", got.Username, "ada lovelace")
	}
	if got := decodeJSON[accountBody](t, f.must(t, http.StatusOK, "GET", "/accounts/me", other.Secret, "")); got.Username != "bob" {
		t.Errorf("renaming one account renamed another: username = %q, want bob", got.Username)
	}

	// Rotating: the old secret fails at once, wherever it is looked up; the new one works.
	rotated := decodeJSON[map[string]string](t, f.must(t, http.StatusOK, "POST", "/accounts/me/rotate-secret", acc.Secret, ""))
	newSecret := rotated["secret"]
	if rotated["accountId"] != acc.AccountID || !strings.HasPrefix(newSecret, "hsk_") || newSecret == acc.Secret {
		t.Fatalf("rotate-secret = %v, want account %s with a new hsk_ secret", rotated, acc.AccountID)
	}
	if status, body := f.do(t, "GET", "/accounts/me", acc.Secret, ""); status != http.StatusUnauthorized {
		t.Errorf("old secret after rotation: GET /accounts/me = %d %s, want 401", status, body)
	}
	if _, err := f.store.AccountBySecret(ctx, acc.Secret); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old secret after rotation: AccountBySecret = %v, want store.ErrNotFound", err)
	}
	if got := decodeJSON[accountBody](t, f.must(t, http.StatusOK, "GET", "/accounts/me", newSecret, "")); got.AccountID != acc.AccountID {
		t.Errorf("new secret is account %s, want %s", got.AccountID, acc.AccountID)
	}
	if got, err := f.store.AccountBySecret(ctx, newSecret); err != nil || got.ID != acc.AccountID {
		t.Errorf("new secret: AccountBySecret = %+v, %v; want account %s", got, err, acc.AccountID)
	}

	// Deleting: the secret stops working and the agents go with the account.
	f.createAgent(t, newSecret, withID("helper", helperConfig))
	f.createAgent(t, newSecret, withID("second", helperConfig))
	f.createAgent(t, other.Secret, withID("helper", helperConfig))
	f.must(t, http.StatusNoContent, "DELETE", "/accounts/me", newSecret, "")
	for _, r := range []struct{ method, path string }{
		{"GET", "/accounts/me"}, {"DELETE", "/accounts/me"}, {"GET", "/accounts/me/agents"},
	} {
		if status, body := f.do(t, r.method, r.path, newSecret, ""); status != http.StatusUnauthorized {
			t.Errorf("deleted account's secret: %s %s = %d %s, want 401", r.method, r.path, status, body)
		}
	}
	if _, err := f.store.AccountBySecret(ctx, newSecret); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted account's secret: AccountBySecret = %v, want store.ErrNotFound", err)
	}
	left, err := f.store.ListAgents(ctx, acc.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("deleted account still has %d agents, want 0", len(left))
	}
	if !f.purgeQueued(acc.AccountID) || f.purgeQueued(other.AccountID) {
		t.Errorf("queued %v, want the purge of the deleted account only", f.queued)
	}
	f.must(t, http.StatusNotFound, "GET", "/accounts/"+acc.AccountID, testAdminSecret, "")
	if got := decodeJSON[struct{ Agents []agentView }](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents", other.Secret, "")); len(got.Agents) != 1 {
		t.Errorf("deleting one account touched another's agents: %d left, want 1", len(got.Agents))
	}
}

func TestAdminRoutes(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	created := map[string]accountBody{}
	for _, name := range []string{"a1", "a2", "a3", "a4", "a5"} {
		acc := f.createAccount(t, name)
		created[acc.AccountID] = acc
	}
	target := f.createAccount(t, "target")
	created[target.AccountID] = target

	t.Run("listing pages with limit and cursor", func(t *testing.T) {
		seen := map[string]string{}
		cursor, pages := "", 0
		for {
			path := "/accounts?limit=2"
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			page := decodeJSON[struct {
				Accounts []accountBody
				Cursor   string
			}](t, f.must(t, http.StatusOK, "GET", path, testAdminSecret, ""))
			pages++
			if len(page.Accounts) > 2 {
				t.Fatalf("page %d has %d accounts, want at most 2", pages, len(page.Accounts))
			}
			for _, a := range page.Accounts {
				if _, dup := seen[a.AccountID]; dup {
					t.Errorf("account %s listed twice", a.AccountID)
				}
				if a.Secret != "" {
					t.Errorf("listing shows the secret of %s", a.AccountID)
				}
				seen[a.AccountID] = a.Username
			}
			if page.Cursor == "" {
				break
			}
			if pages > 10 {
				t.Fatal("listing never ends")
			}
			cursor = page.Cursor
		}
		want := map[string]string{}
		for id, a := range created {
			want[id] = a.Username
		}
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Errorf("listed accounts (-want +got):\n%s", diff)
		}
		if pages < 3 {
			t.Errorf("6 accounts at limit 2 came in %d pages, want at least 3", pages)
		}
		all := decodeJSON[struct{ Accounts []accountBody }](t, f.must(t, http.StatusOK, "GET", "/accounts", testAdminSecret, ""))
		if len(all.Accounts) != len(created) {
			t.Errorf("GET /accounts with the default limit listed %d accounts, want %d", len(all.Accounts), len(created))
		}
	})

	t.Run("bad limit", func(t *testing.T) {
		for _, limit := range []string{"0", "-1", "1001", "ten"} {
			status, body := f.do(t, "GET", "/accounts?limit="+limit, testAdminSecret, "")
			testenv.WantFieldError(t, status, body, "limit")
		}
	})

	t.Run("wrong or missing admin secret", func(t *testing.T) {
		routes := []struct{ method, path, body string }{
			{"GET", "/accounts", ""},
			{"GET", "/accounts/" + target.AccountID, ""},
			{"PATCH", "/accounts/" + target.AccountID, `{"username":"hijacked"}`},
			{"DELETE", "/accounts/" + target.AccountID, ""},
			{"POST", "/accounts/" + target.AccountID + "/rotate-secret", ""},
		}
		for _, r := range routes {
			for _, bearer := range []string{"", "adm_wrong", target.Secret} {
				status, body := f.do(t, r.method, r.path, bearer, r.body)
				if status != http.StatusUnauthorized {
					t.Errorf("%s %s with bearer %q = %d %s, want 401", r.method, r.path, bearer, status, body)
				}
			}
		}
		// Nothing the refused requests asked for happened.
		got := decodeJSON[accountBody](t, f.must(t, http.StatusOK, "GET", "/accounts/me", target.Secret, ""))
		if got.Username != "target" {
			t.Errorf("refused admin requests changed the account: username = %q, want target", got.Username)
		}
	})

	t.Run("get, rename, rotate and delete one account", func(t *testing.T) {
		path := "/accounts/" + target.AccountID
		got := decodeJSON[accountBody](t, f.must(t, http.StatusOK, "GET", path, testAdminSecret, ""))
		if got.AccountID != target.AccountID || got.Username != "target" || got.Secret != "" {
			t.Errorf("GET %s = %+v, want account target without its secret", path, got)
		}
		f.must(t, http.StatusNotFound, "GET", "/accounts/acc_missing", testAdminSecret, "")

		got = decodeJSON[accountBody](t, f.must(t, http.StatusOK, "PATCH", path, testAdminSecret, `{"username":"renamed"}`))
		if got.Username != "renamed" {
			t.Errorf("PATCH %s: username = %q, want renamed", path, got.Username)
		}
		if me := decodeJSON[accountBody](t, f.must(t, http.StatusOK, "GET", "/accounts/me", target.Secret, "")); me.Username != "renamed" {
			t.Errorf("the owner sees username %q, want renamed", me.Username)
		}

		rotated := decodeJSON[map[string]string](t, f.must(t, http.StatusOK, "POST", path+"/rotate-secret", testAdminSecret, ""))
		if rotated["accountId"] != target.AccountID || rotated["secret"] == "" || rotated["secret"] == target.Secret {
			t.Fatalf("rotate-secret = %v, want account %s with a new secret", rotated, target.AccountID)
		}
		if status, body := f.do(t, "GET", "/accounts/me", target.Secret, ""); status != http.StatusUnauthorized {
			t.Errorf("old secret after admin rotation = %d %s, want 401", status, body)
		}
		f.must(t, http.StatusOK, "GET", "/accounts/me", rotated["secret"], "")

		f.createAgent(t, rotated["secret"], withID("helper", helperConfig))
		f.must(t, http.StatusNoContent, "DELETE", path, testAdminSecret, "")
		if status, body := f.do(t, "GET", "/accounts/me", rotated["secret"], ""); status != http.StatusUnauthorized {
			t.Errorf("deleted account's secret = %d %s, want 401", status, body)
		}
		if left, err := f.store.ListAgents(context.Background(), target.AccountID); err != nil || len(left) != 0 {
			t.Errorf("deleted account has %d agents (err %v), want 0", len(left), err)
		}
		if !f.purgeQueued(target.AccountID) {
			t.Errorf("queued %v, want the purge of %s", f.queued, target.AccountID)
		}
		listed := decodeJSON[struct{ Accounts []accountBody }](t, f.must(t, http.StatusOK, "GET", "/accounts", testAdminSecret, ""))
		if slices.ContainsFunc(listed.Accounts, func(a accountBody) bool { return a.AccountID == target.AccountID }) {
			t.Errorf("GET /accounts lists the deleted account %s", target.AccountID)
		}
		for _, r := range []struct{ method, path, body string }{
			{"GET", path, ""},
			{"PATCH", path, `{"username":"ghost"}`},
			{"DELETE", path, ""},
			{"POST", path + "/rotate-secret", ""},
		} {
			if status, body := f.do(t, r.method, r.path, testAdminSecret, r.body); status != http.StatusNotFound {
				t.Errorf("%s %s on a deleted account = %d %s, want 404", r.method, r.path, status, body)
			}
		}
		for id := range created {
			if id != target.AccountID {
				f.must(t, http.StatusOK, "GET", "/accounts/"+id, testAdminSecret, "")
			}
		}
	})
}

func TestAdminRoutesDisabledWithoutAdminSecret(t *testing.T) {
	closed := newFixture(t, "", false)
	if status, body := closed.do(t, "POST", "/accounts", "", `{"username":"ada"}`); status != http.StatusForbidden {
		t.Errorf("POST /accounts with signup closed and no admin secret = %d %s, want 403", status, body)
	}

	open := newFixture(t, "", true)
	acc := decodeJSON[accountBody](t, open.must(t, http.StatusCreated, "POST", "/accounts", "", `{"username":"ada"}`))
	routes := []struct{ method, path, body string }{
		{"GET", "/accounts", ""},
		{"GET", "/accounts/" + acc.AccountID, ""},
		{"PATCH", "/accounts/" + acc.AccountID, `{"username":"x"}`},
		{"DELETE", "/accounts/" + acc.AccountID, ""},
		{"POST", "/accounts/" + acc.AccountID + "/rotate-secret", ""},
	}
	for _, r := range routes {
		// Not even an empty bearer matches the empty admin secret.
		for _, bearer := range []string{"", testAdminSecret, acc.Secret} {
			if status, body := open.do(t, r.method, r.path, bearer, r.body); status != http.StatusForbidden {
				t.Errorf("%s %s with bearer %q = %d %s, want 403", r.method, r.path, bearer, status, body)
			}
		}
	}
	if got := decodeJSON[accountBody](t, open.must(t, http.StatusOK, "GET", "/accounts/me", acc.Secret, "")); got.Username != "ada" {
		t.Errorf("refused admin requests changed the account: username = %q, want ada", got.Username)
	}
}

func TestAgentLifecycle(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ada")

	generated := f.createAgent(t, acc.Secret, helperConfig)
	if !strings.HasPrefix(generated.AgentID, "agt_") {
		t.Errorf("generated agentId = %q, want agt_…", generated.AgentID)
	}
	wantConfig := decodeJSON[map[string]any](t, []byte(helperConfig))
	wantConfig["tools"].(map[string]any)["tavilySearch"].(map[string]any)["apiKey"] = agentconfig.Redacted
	if diff := cmp.Diff(wantConfig, generated.Config); diff != "" {
		t.Errorf("created config (-want +got):\n%s", diff)
	}
	ts := testNow.Format(time.RFC3339)
	if generated.Version != 1 || generated.CreatedAt != ts || generated.UpdatedAt != ts {
		t.Errorf("created agent version %d, createdAt %q, updatedAt %q; want 1, %q, %q", generated.Version, generated.CreatedAt, generated.UpdatedAt, ts, ts)
	}

	named := f.createAgent(t, acc.Secret, withID("helper-2", helperConfig))
	if named.AgentID != "helper-2" {
		t.Errorf("agentId = %q, want helper-2", named.AgentID)
	}
	if _, ok := named.Config["agentId"]; ok {
		t.Errorf("the agentId was stored inside the config: %v", named.Config)
	}
	if status, body := f.do(t, "POST", "/accounts/me/agents", acc.Secret, withID("helper-2", `{"name":"other","model":`+scriptedHi+`}`)); status != http.StatusConflict {
		t.Errorf("duplicate agentId = %d %s, want 409", status, body)
	}
	for _, tt := range []struct{ name, body string }{
		{"bad characters", withID("not ok!", helperConfig)},
		{"too long", withID(strings.Repeat("a", 129), helperConfig)},
		{"not a string", `{"agentId":7,"name":"x","model":` + scriptedHi + `}`},
	} {
		t.Run("agentId "+tt.name, func(t *testing.T) {
			status, body := f.do(t, "POST", "/accounts/me/agents", acc.Secret, tt.body)
			testenv.WantFieldError(t, status, body, "agentId")
		})
	}

	list := decodeJSON[struct{ Agents []agentView }](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents", acc.Secret, ""))
	var ids []string
	for _, a := range list.Agents {
		ids = append(ids, a.AgentID)
	}
	slices.Sort(ids)
	if want := []string{generated.AgentID, "helper-2"}; !slices.Equal(ids, want) {
		t.Errorf("listed agents %v, want %v", ids, want)
	}

	got := decodeJSON[agentView](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents/helper-2", acc.Secret, ""))
	if diff := cmp.Diff(named, got); diff != "" {
		t.Errorf("GET agent (-created +got):\n%s", diff)
	}

	patched := decodeJSON[agentView](t, f.must(t, http.StatusOK, "PATCH", "/accounts/me/agents/helper-2", acc.Secret, `{"maxSteps":9,"tools":{"tavilySearch":null}}`))
	want := decodeJSON[map[string]any](t, []byte(helperConfig))
	want["maxSteps"] = float64(9)
	delete(want["tools"].(map[string]any), "tavilySearch")
	if diff := cmp.Diff(want, patched.Config); diff != "" {
		t.Errorf("patched config (-want +got):\n%s", diff)
	}
	if patched.Version != 2 {
		t.Errorf("patched version = %d, want 2", patched.Version)
	}
	if got := decodeJSON[agentView](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents/helper-2", acc.Secret, "")); got.Version != 2 || got.Config["maxSteps"] != float64(9) {
		t.Errorf("GET after PATCH: version %d, maxSteps %v; want 2, 9", got.Version, got.Config["maxSteps"])
	}
	patched = decodeJSON[agentView](t, f.must(t, http.StatusOK, "PATCH", "/accounts/me/agents/helper-2", acc.Secret, `{"system":"Be brief."}`))
	if patched.Version != 3 || patched.Config["system"] != "Be brief." || patched.Config["maxSteps"] != float64(9) {
		t.Errorf("second PATCH: version %d, system %v, maxSteps %v; want 3, Be brief., 9", patched.Version, patched.Config["system"], patched.Config["maxSteps"])
	}

	f.must(t, http.StatusNoContent, "DELETE", "/accounts/me/agents/helper-2", acc.Secret, "")
	for _, r := range []struct{ method, body string }{{"GET", ""}, {"PATCH", `{"maxSteps":2}`}, {"DELETE", ""}} {
		if status, body := f.do(t, r.method, "/accounts/me/agents/helper-2", acc.Secret, r.body); status != http.StatusNotFound {
			t.Errorf("%s on a deleted agent = %d %s, want 404", r.method, status, body)
		}
	}
	// A turn loads its agent as Load does: the deleted agent is not found.
	if _, err := f.agents.Load(context.Background(), acc.AccountID, "helper-2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Load of a deleted agent = %v, want store.ErrNotFound", err)
	}
	list = decodeJSON[struct{ Agents []agentView }](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents", acc.Secret, ""))
	if len(list.Agents) != 1 || list.Agents[0].AgentID != generated.AgentID {
		t.Errorf("agents after delete = %+v, want only %s", list.Agents, generated.AgentID)
	}
}

func TestAgentConfigValidation(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ada")
	const openai = `{"provider":"openai","model":"gpt-4o-mini"}`
	agentWith := func(model, tools string) string {
		return `{"name":"a","model":` + model + `,"tools":` + tools + `}`
	}
	tests := []struct {
		name, body, field string
	}{
		{"unknown tool", agentWith(scriptedHi, `{"weather":{}}`), "tools.weather"},
		{"option the tool does not take", agentWith(scriptedHi, `{"tavilySearch":{"maxResultz":3}}`), "tools.tavilySearch.maxResultz"},
		{"option of the wrong type", agentWith(scriptedHi, `{"tavilySearch":{"maxResults":"three"}}`), "tools.tavilySearch.maxResults"},
		{"option out of range", agentWith(scriptedHi, `{"tavilySearch":{"maxResults":50}}`), "tools.tavilySearch.maxResults"},
		{"shared key of the wrong type", agentWith(scriptedHi, `{"tavilySearch":{"enabled":"yes"}}`), "tools.tavilySearch.enabled"},
		{"external dispatch on a tool that does its own work", agentWith(scriptedHi, `{"tavilySearch":{"async":true,"execution":"external-dispatch"}}`), "tools.tavilySearch.execution"},
		{"execution without async", agentWith(scriptedHi, `{"tavilySearch":{"execution":"same-invocation"}}`), "tools.tavilySearch.execution"},
		{"unknown execution", agentWith(scriptedHi, `{"test_async":{"async":true,"execution":"later"}}`), "tools.test_async.execution"},
		{"googleSearch on an openai model", agentWith(openai, `{"googleSearch":{}}`), "tools.googleSearch"},
		{"unknown provider", `{"name":"a","model":{"provider":"mistral","model":"m"}}`, "model.provider"},
		{"no provider", `{"name":"a","model":{"model":"m"}}`, "model.provider"},
		{"unknown model field", `{"name":"a","model":{"provider":"openai","model":"gpt-4o-mini","temprature":0.2}}`, "model.temprature"},
		{"missing model id", `{"name":"a","model":{"provider":"anthropic"}}`, "model.model"},
		{"missing model", `{"name":"a"}`, "model"},
		{"bad base URL", `{"name":"a","model":{"provider":"openai","model":"m","baseURL":"file:///etc/passwd"}}`, "model.baseURL"},
		{"missing name", `{"model":` + scriptedHi + `}`, "name"},
		{"blank name", `{"name":"  ","model":` + scriptedHi + `}`, "name"},
		{"unknown top-level field", `{"name":"a","model":` + scriptedHi + `,"colour":"blue"}`, "colour"},
		{"maxSteps too large", `{"name":"a","model":` + scriptedHi + `,"maxSteps":1000}`, "maxSteps"},
		{"maxSteps negative", `{"name":"a","model":` + scriptedHi + `,"maxSteps":-1}`, "maxSteps"},
		{"maxSteps not a number", `{"name":"a","model":` + scriptedHi + `,"maxSteps":"ten"}`, "maxSteps"},
		{"redaction placeholder as the model key", `{"name":"a","model":{"provider":"openai","model":"m","apiKey":"[redacted]"}}`, "model.apiKey"},
		{"redaction placeholder as a tool key", agentWith(scriptedHi, `{"tavilySearch":{"apiKey":"[redacted]"}}`), "tools.tavilySearch.apiKey"},
		{"not an object", `["name"]`, ""},
		{"not JSON", `{"name":`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := f.do(t, "POST", "/accounts/me/agents", acc.Secret, tt.body)
			testenv.WantFieldError(t, status, body, tt.field)
		})
	}
	if list := decodeJSON[struct{ Agents []agentView }](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents", acc.Secret, "")); len(list.Agents) != 0 {
		t.Errorf("refused configs stored %d agents, want 0", len(list.Agents))
	}

	t.Run("accepted with a warning", func(t *testing.T) {
		v := f.createAgent(t, acc.Secret, agentWith(`{"provider":"google","model":"gemini-2.5-flash"}`, `{"googleSearch":{"async":true}}`))
		if len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "tools.googleSearch.async") {
			t.Errorf("warnings = %q, want one about tools.googleSearch.async", v.Warnings)
		}
	})

	t.Run("invalid PATCH leaves the agent unchanged", func(t *testing.T) {
		f.createAgent(t, acc.Secret, withID("steady", helperConfig))
		before := f.must(t, http.StatusOK, "GET", "/accounts/me/agents/steady", acc.Secret, "")
		for _, tt := range []struct{ name, patch, field string }{
			{"unknown tool", `{"tools":{"weather":{}}}`, "tools.weather"},
			{"name removed", `{"name":null}`, "name"},
			{"model id removed", `{"model":{"provider":"openai","script":null}}`, "model.model"},
			{"wrong option type", `{"tools":{"tavilySearch":{"maxResults":"many"}}}`, "tools.tavilySearch.maxResults"},
			{"maxSteps too large", `{"maxSteps":1000,"system":"changed"}`, "maxSteps"},
			{"unknown field", `{"colour":"blue"}`, "colour"},
			{"not an object", `[1]`, "config"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				status, body := f.do(t, "PATCH", "/accounts/me/agents/steady", acc.Secret, tt.patch)
				testenv.WantFieldError(t, status, body, tt.field)
				after := f.must(t, http.StatusOK, "GET", "/accounts/me/agents/steady", acc.Secret, "")
				if diff := cmp.Diff(string(before), string(after)); diff != "" {
					t.Errorf("a refused PATCH changed the agent (-before +after):\n%s", diff)
				}
			})
		}
		if got := decodeJSON[agentView](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents/steady", acc.Secret, "")); got.Version != 1 {
			t.Errorf("version after refused PATCHes = %d, want 1", got.Version)
		}
	})
}

func TestAgentSecretsNeverLeave(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ada")
	ctx := context.Background()
	const rotatedModelKey = "sk-model-rotated-5d2a-do-not-leak"
	secretStrings := []string{modelKey, tavilyKey, rotatedModelKey}
	// bodies holds every agent the API answered with, to check none shows a secret.
	var bodies [][]byte
	keep := func(b []byte) []byte { bodies = append(bodies, b); return b }
	wantNoSecret := func(t *testing.T, body []byte) {
		t.Helper()
		for _, s := range secretStrings {
			if bytes.Contains(body, []byte(s)) {
				t.Errorf("response shows secret %q: %s", s, body)
			}
		}
	}
	wantRedacted := func(t *testing.T, v agentView, paths ...string) {
		t.Helper()
		for _, p := range paths {
			var cur any = v.Config
			for _, k := range strings.Split(p, ".") {
				m, _ := cur.(map[string]any)
				cur = m[k]
			}
			if cur != agentconfig.Redacted {
				t.Errorf("agent %s config.%s = %v, want %q", v.AgentID, p, cur, agentconfig.Redacted)
			}
		}
	}
	wantLoaded := func(t *testing.T, agentID, wantModelKey, wantTavilyKey string) {
		t.Helper()
		cfg, err := f.agents.Load(ctx, acc.AccountID, agentID)
		if err != nil {
			t.Fatalf("Load(%s): %v", agentID, err)
		}
		var m struct{ APIKey string }
		var tv struct{ APIKey string }
		_ = json.Unmarshal(cfg.Model, &m)
		_ = json.Unmarshal(cfg.Tools["tavilySearch"], &tv)
		if m.APIKey != wantModelKey || tv.APIKey != wantTavilyKey {
			t.Errorf("Load(%s) keys = model %q, tavilySearch %q; want %q, %q", agentID, m.APIKey, tv.APIKey, wantModelKey, wantTavilyKey)
		}
	}

	v := decodeJSON[agentView](t, keep(f.must(t, http.StatusCreated, "POST", "/accounts/me/agents", acc.Secret, withID("researcher", researcherConfig))))
	wantRedacted(t, v, "model.apiKey", "tools.tavilySearch.apiKey")
	wantLoaded(t, "researcher", modelKey, tavilyKey)
	f.createAgent(t, acc.Secret, withID("helper", helperConfig))

	t.Run("reads are redacted", func(t *testing.T) {
		got := decodeJSON[agentView](t, keep(f.must(t, http.StatusOK, "GET", "/accounts/me/agents/researcher", acc.Secret, "")))
		wantRedacted(t, got, "model.apiKey", "tools.tavilySearch.apiKey")
		list := decodeJSON[struct{ Agents []agentView }](t, keep(f.must(t, http.StatusOK, "GET", "/accounts/me/agents", acc.Secret, "")))
		if len(list.Agents) != 2 {
			t.Fatalf("listed %d agents, want 2", len(list.Agents))
		}
		for _, a := range list.Agents {
			wantRedacted(t, a, "tools.tavilySearch.apiKey")
		}
	})

	t.Run("a PATCH that leaves the secrets out keeps them", func(t *testing.T) {
		got := decodeJSON[agentView](t, keep(f.must(t, http.StatusOK, "PATCH", "/accounts/me/agents/researcher", acc.Secret, `{"maxSteps":6}`)))
		wantRedacted(t, got, "model.apiKey", "tools.tavilySearch.apiKey")
		wantLoaded(t, "researcher", modelKey, tavilyKey)
	})

	t.Run("a PATCH that sends the redacted config back keeps them", func(t *testing.T) {
		current := decodeJSON[agentView](t, keep(f.must(t, http.StatusOK, "GET", "/accounts/me/agents/researcher", acc.Secret, "")))
		current.Config["system"] = "You research carefully."
		echo, err := json.Marshal(current.Config)
		if err != nil {
			t.Fatal(err)
		}
		got := decodeJSON[agentView](t, keep(f.must(t, http.StatusOK, "PATCH", "/accounts/me/agents/researcher", acc.Secret, string(echo))))
		if got.Config["system"] != "You research carefully." {
			t.Errorf("system = %v, want the patched one", got.Config["system"])
		}
		wantRedacted(t, got, "model.apiKey", "tools.tavilySearch.apiKey")
		wantLoaded(t, "researcher", modelKey, tavilyKey)
	})

	t.Run("a refused PATCH shows no secret", func(t *testing.T) {
		status, body := f.do(t, "PATCH", "/accounts/me/agents/researcher", acc.Secret, `{"model":{"apiKey":12}}`)
		wantNoSecret(t, body)
		testenv.WantFieldError(t, status, body, "model.apiKey")
		wantLoaded(t, "researcher", modelKey, tavilyKey)
	})

	t.Run("a secret under another spelling is refused", func(t *testing.T) {
		// encoding/json would match APIKey to apiKey, past the redaction of model.apiKey.
		status, body := f.do(t, "POST", "/accounts/me/agents", acc.Secret, `{"name":"a","model":{"provider":"openai","model":"m","APIKey":"`+modelKey+`"}}`)
		wantNoSecret(t, body)
		testenv.WantFieldError(t, status, body, "model.APIKey")
	})

	t.Run("a PATCH may replace a secret", func(t *testing.T) {
		got := decodeJSON[agentView](t, keep(f.must(t, http.StatusOK, "PATCH", "/accounts/me/agents/researcher", acc.Secret, `{"model":{"apiKey":"`+rotatedModelKey+`"}}`)))
		wantRedacted(t, got, "model.apiKey", "tools.tavilySearch.apiKey")
		wantLoaded(t, "researcher", rotatedModelKey, tavilyKey)
	})

	t.Run("a PATCH of other fields keeps a tool's secret for the turns", func(t *testing.T) {
		wantLoaded(t, "helper", "", tavilyKey)
		keep(f.must(t, http.StatusOK, "PATCH", "/accounts/me/agents/helper", acc.Secret, `{"system":"You help briefly."}`))
		wantLoaded(t, "helper", "", tavilyKey)
		keep(f.must(t, http.StatusOK, "PATCH", "/accounts/me/agents/helper", acc.Secret, `{"tools":{"tavilySearch":{"apiKey":"[redacted]","maxResults":5}}}`))
		wantLoaded(t, "helper", "", tavilyKey)
	})

	t.Run("the placeholder is not a new secret", func(t *testing.T) {
		f.createAgent(t, acc.Secret, withID("keyless", `{"name":"keyless","model":`+scriptedHi+`,"tools":{"tavilySearch":{}}}`))
		for _, tt := range []struct{ patch, field string }{
			{`{"tools":{"tavilySearch":{"apiKey":"[redacted]"}}}`, "tools.tavilySearch.apiKey"},
			{`{"model":{"provider":"openai","model":"gpt-4o-mini","script":null,"apiKey":"[redacted]"}}`, "model.apiKey"},
		} {
			status, body := f.do(t, "PATCH", "/accounts/me/agents/keyless", acc.Secret, tt.patch)
			testenv.WantFieldError(t, status, body, tt.field)
		}
		got := decodeJSON[agentView](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents/keyless", acc.Secret, ""))
		if got.Version != 1 {
			t.Errorf("keyless agent at version %d after refused PATCHes, want 1", got.Version)
		}
	})

	for _, b := range bodies {
		wantNoSecret(t, b)
		if !bytes.Contains(b, []byte(agentconfig.Redacted)) {
			t.Errorf("response shows no %q: %s", agentconfig.Redacted, b)
		}
	}

	// At rest: the Agents table holds the secrets only sealed.
	out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: &f.tables.Agents})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 3 {
		t.Fatalf("the agents table holds %d items, want 3", len(out.Items))
	}
	for _, it := range out.Items {
		id := it["agentId"].(*ddb.AttributeValueMemberS).Value
		for _, s := range secretStrings {
			if p := testenv.FindString(it, s); p != "" {
				t.Errorf("agent %s stores secret %q in the clear at %s", id, s, p)
			}
		}
		sealed, _ := it["secrets"].(*ddb.AttributeValueMemberB)
		if id != "keyless" && (sealed == nil || len(sealed.Value) == 0) {
			t.Errorf("agent %s has no sealed secrets attribute", id)
		}
	}
}

func TestAccountsAreIsolated(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	a := f.createAccount(t, "alice")
	b := f.createAccount(t, "bob")
	const aConfig = `{"name":"alice private agent","system":"alice system prompt","model":{"provider":"scripted","script":[{"text":"alice answer"}]}}`
	const bConfig = `{"name":"bob agent","model":{"provider":"scripted","script":[{"text":"bob answer"}]}}`
	aAgent := f.createAgent(t, a.Secret, aConfig)
	f.createAgent(t, b.Secret, withID("mine", bConfig))

	t.Run("another account's agent is not found", func(t *testing.T) {
		path := "/accounts/me/agents/" + aAgent.AgentID
		for _, r := range []struct{ method, body string }{
			{"GET", ""}, {"PATCH", `{"name":"taken over"}`}, {"DELETE", ""},
		} {
			status, body := f.do(t, r.method, path, b.Secret, r.body)
			if status != http.StatusNotFound {
				t.Errorf("bob %s alice's agent = %d %s, want 404", r.method, status, body)
			}
			if bytes.Contains(body, []byte("alice")) {
				t.Errorf("bob %s alice's agent shows alice's data: %s", r.method, body)
			}
		}
		got := decodeJSON[agentView](t, f.must(t, http.StatusOK, "GET", path, a.Secret, ""))
		if got.Version != 1 || got.Config["name"] != "alice private agent" {
			t.Errorf("alice's agent after bob's attempts: version %d, name %v; want 1, alice private agent", got.Version, got.Config["name"])
		}
	})

	t.Run("the same agent id in two accounts is two agents", func(t *testing.T) {
		f.createAgent(t, a.Secret, withID("assistant", aConfig))
		f.createAgent(t, b.Secret, withID("assistant", bConfig))
		for _, tt := range []struct{ secret, want string }{{a.Secret, "alice private agent"}, {b.Secret, "bob agent"}} {
			got := decodeJSON[agentView](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents/assistant", tt.secret, ""))
			if got.Config["name"] != tt.want {
				t.Errorf("agent assistant is named %v, want %q", got.Config["name"], tt.want)
			}
		}
	})

	t.Run("listing shows only the account's own agents", func(t *testing.T) {
		for _, tt := range []struct {
			secret string
			want   []string
		}{
			{a.Secret, []string{aAgent.AgentID, "assistant"}},
			{b.Secret, []string{"assistant", "mine"}},
		} {
			list := decodeJSON[struct{ Agents []agentView }](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents", tt.secret, ""))
			var ids []string
			for _, v := range list.Agents {
				ids = append(ids, v.AgentID)
			}
			slices.Sort(ids)
			want := slices.Sorted(slices.Values(tt.want))
			if diff := cmp.Diff(want, ids); diff != "" {
				t.Errorf("listed agents (-want +got):\n%s", diff)
			}
		}
	})
}

// The auth scheme is case-insensitive (RFC 7235 §2.1): "bearer x" and "BEARER x" work like
// "Bearer x" on the account and admin routes; other schemes and empty tokens do not.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ada")
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		t.Run(scheme, func(t *testing.T) {
			if status, body := testenv.Call(t, "GET", f.srv.URL+"/accounts/me", scheme+" "+acc.Secret, ""); status != http.StatusOK || !bytes.Contains(body, []byte(`"ada"`)) {
				t.Errorf("GET /accounts/me with %q = %d %s, want 200", scheme+" <account secret>", status, body)
			}
			if status, body := testenv.Call(t, "GET", f.srv.URL+"/accounts", scheme+"  "+testAdminSecret, ""); status != http.StatusOK {
				t.Errorf("GET /accounts with %q = %d %s, want 200", scheme+"  <admin secret>", status, body)
			}
		})
	}
	for _, auth := range []string{"", "Basic " + acc.Secret, "Token " + acc.Secret, "Bearer", "Bearer ", "Bearer" + acc.Secret, "Bearers " + acc.Secret, acc.Secret} {
		if status, body := testenv.Call(t, "GET", f.srv.URL+"/accounts/me", auth, ""); status != http.StatusUnauthorized || !bytes.Contains(body, []byte("missing bearer token")) {
			t.Errorf("GET /accounts/me with Authorization %q = %d %s, want 401 missing bearer token", auth, status, body)
		}
	}
}
