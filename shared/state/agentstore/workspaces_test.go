package agentstore_test

import (
	"context"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool/builtintools"
)

const workingConfig = `{"name":"worker","model":{"provider":"scripted","script":[{"text":"hi"}]},"workspaces":[{"name":"notes"}]}`

// config.workspaces must name the account's workspaces when the config is written.
func TestConfigWorkspacesNameTheAccountsWorkspaces(t *testing.T) {
	ctx := context.Background()
	stack := testenv.Stack(t)
	st := store.New(stack.DB, stack.Tables)
	ws := workspaces.New(stack.DB, stack.Name("WorkspacesTable"), stack.S3, stack.Name("WorkspacesBucket"))
	svc := agentstore.New(st, nil, builtintools.ConfigChecks(), nil).WithWorkspaces(ws)
	acc, _, err := st.CreateAccount(ctx, "ada", testNow)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := st.CreateAccount(ctx, "eve", testNow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Create(ctx, other.ID, "notes"); err != nil {
		t.Fatal(err)
	}
	_, err = svc.Create(ctx, acc.ID, "worker", []byte(workingConfig))
	refusedAt(t, "another account's workspace", err, "workspaces[0].name", "no workspace named notes in this account (create it with POST /accounts/me/workspaces)")

	if _, err := ws.Create(ctx, acc.ID, "notes"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, acc.ID, "worker", []byte(workingConfig)); err != nil {
		t.Fatalf("a config naming the account's workspace: %v", err)
	}
	_, err = svc.Update(ctx, acc.ID, "worker", []byte(`{"workspaces":[{"name":"notes"},{"name":"drafts"}]}`))
	refusedAt(t, "a patch naming a workspace the account lacks", err, "workspaces[1].name", "no workspace named drafts")

	_, err = svc.Update(ctx, acc.ID, "worker", []byte(`{"memory":{"workspace":"recall"}}`))
	refusedAt(t, "a memory in a workspace the account lacks", err, "memory.workspace", "no workspace named recall in this account")
	if _, err := ws.Create(ctx, acc.ID, "recall"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Update(ctx, acc.ID, "worker", []byte(`{"memory":{"workspace":"recall","scope":"endUser"}}`)); err != nil {
		t.Fatalf("a memory in the account's workspace: %v", err)
	}

	bare := agentstore.New(st, nil, builtintools.ConfigChecks(), nil)
	_, err = bare.Create(ctx, acc.ID, "worker-2", []byte(workingConfig))
	refusedAt(t, "no workspaces store", err, "workspaces", "this deployment keeps no workspaces")
	_, err = bare.Create(ctx, acc.ID, "worker-3", []byte(`{"name":"m","model":{"provider":"scripted","script":[{"text":"hi"}]},"memory":{"workspace":"recall"}}`))
	refusedAt(t, "no workspaces store", err, "memory.workspace", "this deployment keeps no workspaces")
}
