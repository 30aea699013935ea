package localrunner_test

import (
	"net/http"
	"testing"

	"github.com/agentharness/harness/infra/faketavily"
)

// The workspace routes reach account-manage through the template's events, a file path of any
// depth through the greedy {path+}.
func TestWorkspacesThroughTheTemplate(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "ada")
	if res := call(t, srv, http.MethodPost, "/accounts/me/workspaces", secret, `{"name":"notes"}`); res.status != http.StatusCreated {
		t.Fatalf("creating a workspace = %d %s", res.status, res.body)
	}
	if res := call(t, srv, http.MethodPut, "/accounts/me/workspaces/notes/files/docs/deep/a.txt", secret, "deep"); res.status != http.StatusCreated {
		t.Fatalf("writing a nested file = %d %s", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/accounts/me/workspaces/notes/files/docs/deep/a.txt", secret, ""); res.status != http.StatusOK || string(res.body) != "deep" {
		t.Errorf("reading it = %d %s", res.status, res.body)
	}
	for _, p := range []string{"/files", "/history", "/diff?from=0&to=1"} {
		if res := call(t, srv, http.MethodGet, "/accounts/me/workspaces/notes"+p, secret, ""); res.status != http.StatusOK {
			t.Errorf("GET %s = %d %s", p, res.status, res.body)
		}
	}
	if res := call(t, srv, http.MethodDelete, "/accounts/me/workspaces/notes", secret, ""); res.status != http.StatusNoContent {
		t.Errorf("deleting the workspace = %d %s", res.status, res.body)
	}
}
