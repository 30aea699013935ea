package agentstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/builtintools"
)

const skilledConfig = `{"name":"writer","model":{"provider":"scripted","script":[{"text":"hi"}]},"skills":["release-notes"]}`

// refusedAt asserts err is a *agentconfig.FieldError at field whose problem says want.
func refusedAt(t *testing.T, what string, err error, field, want string) {
	t.Helper()
	var fe *agentconfig.FieldError
	if !errors.As(err, &fe) || fe.Field != field || !strings.Contains(fe.Problem, want) {
		t.Errorf("%s: %v, want a refusal at %s saying %q", what, err, field, want)
	}
}

// config.skills must name the account's skills when the config is written, created or patched.
func TestConfigSkillsNameTheAccountsSkills(t *testing.T) {
	ctx := context.Background()
	stack := testenv.Stack(t)
	st := store.New(stack.DB, stack.Tables)
	sk := skills.New(stack.DB, stack.Name("SkillsTable"), stack.S3, stack.Name("SkillsBucket"))
	svc := agentstore.New(st, nil, builtintools.ConfigChecks(), nil).WithSkills(sk)
	acc, _, err := st.CreateAccount(ctx, "ada", testNow)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := st.CreateAccount(ctx, "eve", testNow)
	if err != nil {
		t.Fatal(err)
	}

	_, err = svc.Create(ctx, acc.ID, "writer", []byte(skilledConfig))
	refusedAt(t, "a skill the account lacks", err, "skills[0]", "no skill named release-notes in this account (upload it with POST /accounts/me/skills)")

	b, err := skills.ParseFiles(map[string]string{"SKILL.md": "---\nname: release-notes\ndescription: Writes release notes.\n---\n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sk.Put(ctx, other.ID, b, testNow); err != nil {
		t.Fatal(err)
	}
	_, err = svc.Create(ctx, acc.ID, "writer", []byte(skilledConfig))
	refusedAt(t, "another account's skill", err, "skills[0]", "no skill named release-notes")

	if _, err := sk.Put(ctx, acc.ID, b, testNow); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, acc.ID, "writer", []byte(skilledConfig)); err != nil {
		t.Fatalf("a config naming the account's skill: %v", err)
	}
	_, err = svc.Update(ctx, acc.ID, "writer", []byte(`{"skills":["release-notes","incident-report"]}`))
	refusedAt(t, "a patch naming a skill the account lacks", err, "skills[1]", "no skill named incident-report")

	// A deployment that keeps no skills refuses configs that name some, and takes the others.
	bare := agentstore.New(st, nil, builtintools.ConfigChecks(), nil)
	_, err = bare.Create(ctx, acc.ID, "writer-2", []byte(skilledConfig))
	refusedAt(t, "no skill store", err, "skills", "this deployment keeps no skills")
	if _, err := bare.Create(ctx, acc.ID, "plain", []byte(plainConfig)); err != nil {
		t.Errorf("a config naming no skill, with no skill store: %v", err)
	}
}
