package accounts_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/accounts"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/google/go-cmp/cmp"
)

// newWorkspacesFixture serves account-manage with workspaces, on the template's tables and
// bucket.
func newWorkspacesFixture(t *testing.T) *fixture {
	t.Helper()
	stack := testenv.Stack(t)
	st := store.New(stack.DB, stack.Tables)
	clock := func() time.Time { return testNow }
	svc := agentstore.New(st, secrets.New(secrets.NewRandomLocal()), builtintools.ConfigChecks(), clock)
	ws := workspaces.New(stack.DB, stack.Name("WorkspacesTable"), stack.S3, stack.Name("WorkspacesBucket"))
	f := &fixture{db: stack.DB, tables: stack.Tables, store: st, agents: svc}
	f.srv = httptest.NewServer(accounts.NewFrom(accounts.Options{
		Store: st, Agents: svc, Workspaces: ws, AdminSecret: testAdminSecret, Now: clock, Logger: slog.New(slog.DiscardHandler),
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// send calls account-manage with headers (name, value, name, value…) and returns the response
// with its body read.
func (f *fixture) send(t *testing.T, method, path, secret, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	for i := 0; i < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

type fileWritten struct {
	Path    string `json:"path"`
	Version int64  `json:"version"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
}

func TestWorkspaceFiles(t *testing.T) {
	f := newWorkspacesFixture(t)
	secret := f.createAccount(t, "alice").Secret
	created := decodeJSON[map[string]any](t, f.must(t, http.StatusCreated, "POST", "/accounts/me/workspaces", secret, `{"name":"notes"}`))
	if created["name"] != "notes" || created["version"] != float64(0) || created["createdAt"] == nil {
		t.Errorf("created = %v", created)
	}
	f.must(t, http.StatusConflict, "POST", "/accounts/me/workspaces", secret, `{"name":"notes"}`)
	f.must(t, http.StatusBadRequest, "POST", "/accounts/me/workspaces", secret, `{"name":"no/slash"}`)

	resp, body := f.send(t, "PUT", "/accounts/me/workspaces/notes/files/docs/a.md", secret, "# one")
	put := decodeJSON[fileWritten](t, []byte(body))
	if resp.StatusCode != http.StatusCreated || put.Version != 1 || put.Size != 5 || put.Path != "docs/a.md" || put.SHA256 != workspaces.Digest([]byte("# one")) {
		t.Fatalf("PUT a new file = %d %s", resp.StatusCode, body)
	}
	resp, body = f.send(t, "PUT", "/accounts/me/workspaces/notes/files/docs/a.md", secret, "# two")
	if resp.StatusCode != http.StatusOK || decodeJSON[fileWritten](t, []byte(body)).Version != 2 {
		t.Fatalf("PUT over the file = %d %s", resp.StatusCode, body)
	}

	resp, body = f.send(t, "GET", "/accounts/me/workspaces/notes/files/docs/a.md", secret, "")
	if resp.StatusCode != http.StatusOK || body != "# two" || resp.Header.Get("ETag") != `"2"` || resp.Header.Get("X-Workspace-Version") != "2" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/markdown") {
		t.Errorf("GET the file = %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if _, body = f.send(t, "GET", "/accounts/me/workspaces/notes/files/docs/a.md?version=1", secret, ""); body != "# one" {
		t.Errorf("GET at version 1 = %q, want # one", body)
	}
	for _, p := range []string{"/files/", "/files"} {
		resp, body = f.send(t, "GET", "/accounts/me/workspaces/notes"+p, secret, "")
		want := `{"entries":[{"name":"docs","type":"dir","size":5}],"path":"","version":2}`
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != want {
			t.Errorf("GET the root (%s) = %d %s, want %s", p, resp.StatusCode, body, want)
		}
	}
	f.must(t, http.StatusNotFound, "GET", "/accounts/me/workspaces/notes/files/docs/b.md", secret, "")
	f.must(t, http.StatusNotFound, "GET", "/accounts/me/workspaces/notes/files/docs/a.md?version=9", secret, "")
	f.must(t, http.StatusBadRequest, "GET", "/accounts/me/workspaces/notes/files/docs/a.md?version=x", secret, "")
	// The router redirects a path it can clean (docs//a.md); escaped, the grammar refuses it.
	f.must(t, http.StatusBadRequest, "PUT", "/accounts/me/workspaces/notes/files/docs%2F%2Fa.md", secret, "x")
	f.must(t, http.StatusBadRequest, "PUT", "/accounts/me/workspaces/notes/files/docs%2F..%2Fa.md", secret, "x")
	f.must(t, http.StatusBadRequest, "PUT", "/accounts/me/workspaces/notes/files/a%5Cb", secret, "x")

	// If-Match makes a write conditional on the version; a moved workspace is 409.
	resp, body = f.send(t, "PUT", "/accounts/me/workspaces/notes/files/b.txt", secret, "b", "If-Match", `"1"`)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, `"version":2`) || !strings.Contains(body, `"paths":[]`) {
		t.Errorf("PUT over a moved version = %d %s, want 409 naming version 2", resp.StatusCode, body)
	}
	resp, body = f.send(t, "PUT", "/accounts/me/workspaces/notes/files/docs/a.md", secret, "# mine", "If-Match", "1")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, `"paths":["docs/a.md"]`) {
		t.Errorf("PUT over a path changed since = %d %s, want 409 naming docs/a.md", resp.StatusCode, body)
	}
	if resp, body = f.send(t, "PUT", "/accounts/me/workspaces/notes/files/b.txt", secret, "b", "If-Match", `"2"`); resp.StatusCode != http.StatusCreated {
		t.Errorf("PUT over the current version = %d %s", resp.StatusCode, body)
	}
	f.must(t, http.StatusRequestEntityTooLarge, "PUT", "/accounts/me/workspaces/notes/files/big", secret, strings.Repeat("x", workspaces.MaxFileBytes+1))

	if resp, body = f.send(t, "DELETE", "/accounts/me/workspaces/notes/files/b.txt", secret, ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"version":4`) {
		t.Errorf("DELETE the file = %d %s", resp.StatusCode, body)
	}
	f.must(t, http.StatusNotFound, "DELETE", "/accounts/me/workspaces/notes/files/b.txt", secret, "")

	history := decodeJSON[struct {
		Commits []workspaces.Commit `json:"commits"`
		Cursor  string              `json:"cursor"`
	}](t, f.must(t, http.StatusOK, "GET", "/accounts/me/workspaces/notes/history?limit=2", secret, ""))
	if len(history.Commits) != 2 || history.Commits[0].Version != 4 || history.Commits[0].Author.Kind != "api" || history.Cursor != "3" {
		t.Errorf("history = %+v", history)
	}
	diff := decodeJSON[struct {
		From, To int64
		Changes  []workspaces.PathChange
	}](t, f.must(t, http.StatusOK, "GET", "/accounts/me/workspaces/notes/diff?from=1&to=3", secret, ""))
	var got []string
	for _, c := range diff.Changes {
		got = append(got, c.Change+" "+c.Path)
	}
	if want := []string{"added b.txt", "modified docs/a.md"}; diff.From != 1 || diff.To != 3 || !cmp.Equal(want, got) {
		t.Errorf("diff = %+v (%v), want %v", diff, got, want)
	}

	list := decodeJSON[struct {
		Workspaces []map[string]any `json:"workspaces"`
	}](t, f.must(t, http.StatusOK, "GET", "/accounts/me/workspaces", secret, ""))
	if len(list.Workspaces) != 1 || list.Workspaces[0]["version"] != float64(4) || list.Workspaces[0]["files"] != float64(1) || list.Workspaces[0]["bytes"] != float64(5) {
		t.Errorf("list = %+v", list)
	}

	f.must(t, http.StatusNoContent, "DELETE", "/accounts/me/workspaces/notes", secret, "")
	f.must(t, http.StatusNotFound, "DELETE", "/accounts/me/workspaces/notes", secret, "")
	f.must(t, http.StatusNotFound, "GET", "/accounts/me/workspaces/notes/files/docs/a.md", secret, "")
}

// Another account's workspace answers as a missing one does, and an end-user token is refused
// before anything is read.
func TestWorkspacesAreTheAccounts(t *testing.T) {
	f := newWorkspacesFixture(t)
	alice, bob := f.createAccount(t, "alice").Secret, f.createAccount(t, "bob").Secret
	f.must(t, http.StatusCreated, "POST", "/accounts/me/workspaces", alice, `{"name":"notes"}`)
	f.must(t, http.StatusCreated, "PUT", "/accounts/me/workspaces/notes/files/a.txt", alice, "alice's")

	for _, tt := range []struct{ method, path string }{
		{"GET", "/accounts/me/workspaces/notes/files/a.txt"},
		{"GET", "/accounts/me/workspaces/notes/files/"},
		{"PUT", "/accounts/me/workspaces/notes/files/a.txt"},
		{"DELETE", "/accounts/me/workspaces/notes/files/a.txt"},
		{"GET", "/accounts/me/workspaces/notes/history"},
		{"GET", "/accounts/me/workspaces/notes/diff?from=0&to=1"},
		{"DELETE", "/accounts/me/workspaces/notes"},
	} {
		_, missing := f.do(t, tt.method, strings.ReplaceAll(tt.path, "notes", "absent"), bob, "bob's")
		status, body := f.do(t, tt.method, tt.path, bob, "bob's")
		if status != http.StatusNotFound || string(body) != strings.ReplaceAll(string(missing), "absent", "notes") {
			t.Errorf("bob's %s %s = %d %s, want the 404 of a missing workspace, %s", tt.method, tt.path, status, body, missing)
		}
	}
	if _, body := f.send(t, "GET", "/accounts/me/workspaces/notes/files/a.txt", alice, ""); body != "alice's" {
		t.Errorf("alice's file after bob's attempts = %q", body)
	}

	token := "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln"
	for _, p := range []string{"/accounts/me/workspaces", "/accounts/me/workspaces/notes/files/a.txt"} {
		status, body := f.do(t, "GET", p, token, "")
		if status != http.StatusUnauthorized || !strings.Contains(string(body), "end-user token") {
			t.Errorf("GET %s with a token = %d %s, want 401 refusing the token", p, status, body)
		}
	}
}
