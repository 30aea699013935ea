package skills_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// stored is a skills store on the template's SkillsTable and SkillsBucket, created for this test.
type stored struct {
	*skills.Store
	stack *testenv.Resources
}

func newStore(t *testing.T) stored {
	t.Helper()
	stack := testenv.Stack(t)
	s, err := skills.FromConfig(stack.DB, stack.S3, skills.Config{Table: stack.Name("SkillsTable"), Bucket: stack.Name("SkillsBucket")})
	if err != nil || s == nil {
		t.Fatalf("FromConfig = %v, %v", s, err)
	}
	return stored{s, stack}
}

// objects lists the keys in the skills bucket under prefix.
func (s stored) objects(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := s.stack.S3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(s.stack.Name("SkillsBucket")), Prefix: &prefix})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, *o.Key)
	}
	return keys
}

// rows counts the items of the account in the skills table, with or without a version.
func (s stored) rows(t *testing.T, accountID string) int {
	t.Helper()
	out, err := s.stack.DB.Query(context.Background(), &dynamodb.QueryInput{
		TableName:                 aws.String(s.stack.Name("SkillsTable")),
		KeyConditionExpression:    aws.String("accountId = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberS{Value: accountID}},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Items)
}

// bundle is a skill named name whose template.md holds content.
func bundle(t *testing.T, name, content string) *skills.Bundle {
	t.Helper()
	b, err := skills.ParseFiles(map[string]string{
		"SKILL.md":    "---\nname: " + name + "\ndescription: Writes " + name + ".\n---\nUse template.md.\n",
		"template.md": content,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func template(t *testing.T, b *skills.Bundle) string {
	t.Helper()
	data, err := b.File("template.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestStoreVersions(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

	first, created, err := s.Save(ctx, "acc_a", bundle(t, "release-notes", "v1"), t0)
	if err != nil || !created || first.Version != 1 || !first.CreatedAt.Equal(t0) {
		t.Fatalf("first Save = %+v, created %v, %v; want version 1, new, created at t0", first, created, err)
	}
	got, err := s.Get(ctx, "acc_a", "release-notes")
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(first.CreatedAt) || !got.UpdatedAt.Equal(first.UpdatedAt) || got.Version != 1 || got.Bytes != first.Bytes ||
		!slices.Equal(got.Files, []skills.File{{Path: "template.md", Bytes: 2}}) || got.Description != "Writes release-notes." {
		t.Errorf("Get = %+v, want what Save returned, %+v", got, first)
	}

	t1 := t0.Add(time.Hour)
	second, created, err := s.Save(ctx, "acc_a", bundle(t, "release-notes", "version two"), t1)
	if err != nil || created || second.Version != 2 || !second.CreatedAt.Equal(t0) || !second.UpdatedAt.Equal(t1) {
		t.Fatalf("replacing Save = %+v, created %v, %v; want version 2, not new, created at t0, updated at t1", second, created, err)
	}
	// A turn that pinned version 1 still reads it.
	for v, want := range map[int64]string{1: "v1", 2: "version two"} {
		b, err := s.Load(ctx, "acc_a", "release-notes", v)
		if err != nil || template(t, b) != want || b.Version != v || b.Body != "Use template.md." {
			t.Errorf("Load(%d) = %+v, %v; want template %q", v, b, err, want)
		}
	}
	if _, err := s.Load(ctx, "acc_a", "release-notes", 3); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("Load(3) = %v, want ErrNotFound", err)
	}
	if b, err := s.LoadCurrent(ctx, "acc_a", "release-notes"); err != nil || template(t, b) != "version two" {
		t.Errorf("LoadCurrent = %+v, %v; want version two", b, err)
	}

	if _, err := s.Put(ctx, "acc_a", bundle(t, "incident-report", "x"), t1); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx, "acc_a")
	if err != nil || len(list) != 2 || list[0].Name != "incident-report" || list[1].Name != "release-notes" || list[1].Version != 2 {
		t.Errorf("List = %+v, %v; want incident-report then release-notes at version 2", list, err)
	}

	// Each Save keeps the objects of the five versions before it, and prunes the rest.
	for i := 3; i <= 9; i++ {
		if _, err := s.Put(ctx, "acc_a", bundle(t, "release-notes", fmt.Sprint("v", i)), t1); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"4", "5", "6", "7", "8", "9"}
	var kept []string
	for _, k := range s.objects(t, "skills/acc_a/release-notes/") {
		kept = append(kept, k[len("skills/acc_a/release-notes/"):len(k)-len(".json")])
	}
	slices.Sort(kept)
	if !slices.Equal(kept, want) {
		t.Errorf("versions kept = %v, want %v", kept, want)
	}
	if _, err := s.Load(ctx, "acc_a", "release-notes", 3); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("Load of a pruned version = %v, want ErrNotFound", err)
	}
	if b, err := s.Load(ctx, "acc_a", "release-notes", 4); err != nil || template(t, b) != "v4" {
		t.Errorf("Load(4) = %+v, %v; want v4", b, err)
	}
}

// Another account's skill is as absent as one that does not exist, and so is a name off the
// grammar.
func TestStoreAccountsAndNames(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.Put(ctx, "acc_a", bundle(t, "release-notes", "a's"), time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ account, name string }{{"acc_b", "release-notes"}, {"acc_a", "../acc_b/x"}, {"acc_a", "Release-Notes"}, {"acc/a", "release-notes"}} {
		if _, err := s.Get(ctx, tt.account, tt.name); !errors.Is(err, skills.ErrNotFound) {
			t.Errorf("Get(%s, %s) = %v, want ErrNotFound", tt.account, tt.name, err)
		}
		if _, err := s.Load(ctx, tt.account, tt.name, 1); !errors.Is(err, skills.ErrNotFound) {
			t.Errorf("Load(%s, %s) = %v, want ErrNotFound", tt.account, tt.name, err)
		}
		if err := s.Delete(ctx, tt.account, tt.name); !errors.Is(err, skills.ErrNotFound) {
			t.Errorf("Delete(%s, %s) = %v, want ErrNotFound", tt.account, tt.name, err)
		}
	}
	if list, err := s.List(ctx, "acc_b"); err != nil || len(list) != 0 || list == nil {
		t.Errorf("List(acc_b) = %#v, %v; want an empty list", list, err)
	}
	if _, err := s.Put(ctx, "acc_a", &skills.Bundle{}, time.Now()); err == nil {
		t.Error("Put of a bundle no parser made succeeded")
	}
	if b, err := s.Load(ctx, "acc_a", "release-notes", 1); err != nil || template(t, b) != "a's" {
		t.Errorf("the owner's skill after the other account's attempts: %+v, %v", b, err)
	}
}

func TestStoreDelete(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for i := range 3 {
		if _, err := s.Put(ctx, "acc_a", bundle(t, "release-notes", fmt.Sprint("v", i+1)), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "acc_a", bundle(t, "release", "kept"), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "acc_a", "release-notes"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "acc_a", "release-notes"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
	if _, err := s.Load(ctx, "acc_a", "release-notes", 3); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("Load of the deleted skill's last version = %v, want ErrNotFound", err)
	}
	if keys := s.objects(t, "skills/acc_a/release-notes/"); len(keys) != 0 {
		t.Errorf("the deleted skill's objects are left: %v", keys)
	}
	if keys := s.objects(t, "skills/acc_a/release/"); len(keys) != 1 {
		t.Errorf("the other skill's objects = %v, want its one version", keys)
	}
	if err := s.Delete(ctx, "acc_a", "release-notes"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("a second Delete = %v, want ErrNotFound", err)
	}
	if names, err := s.Names(ctx, "acc_a"); err != nil || !slices.Equal(names, []string{"release"}) {
		t.Errorf("Names = %v, %v; want [release]", names, err)
	}
	// Uploaded again, the skill is new, and numbers its versions past the deleted ones.
	again, created, err := s.Save(ctx, "acc_a", bundle(t, "release-notes", "again"), time.Now())
	if err != nil || !created || again.Version != 4 {
		t.Errorf("Save after Delete = %+v, created %v, %v; want a new skill at version 4", again, created, err)
	}
}

func TestStoreDeleteAll(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, acc := range []string{"acc_a", "acc_b"} {
		for _, name := range []string{"release-notes", "incident-report"} {
			if _, err := s.Put(ctx, acc, bundle(t, name, "x"), time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Delete(ctx, "acc_a", "incident-report"); err != nil { // leaves its version count
		t.Fatal(err)
	}
	for range 2 {
		if err := s.DeleteAll(ctx, "acc_a"); err != nil {
			t.Fatal(err)
		}
	}
	if n, keys := s.rows(t, "acc_a"), s.objects(t, "skills/acc_a/"); n != 0 || len(keys) != 0 {
		t.Errorf("after DeleteAll the account has %d rows and objects %v, want none", n, keys)
	}
	if n, keys := s.rows(t, "acc_b"), s.objects(t, "skills/acc_b/"); n != 2 || len(keys) != 2 {
		t.Errorf("the other account has %d rows and objects %v, want its two skills", n, keys)
	}
}

// Uploads of one skill at once never write over each other's objects: each that succeeded
// loads as it was uploaded, under the version it was given.
func TestStoreConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	// Each upload numbers at most two versions, so three never push one out of the five kept.
	const n = 3
	var wg sync.WaitGroup
	results := make([]skills.Skill, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = s.Put(ctx, "acc_a", bundle(t, "release-notes", fmt.Sprint("upload ", i)), time.Now())
		})
	}
	wg.Wait()
	ok := 0
	for i := range n {
		if errors.Is(errs[i], skills.ErrConflict) {
			continue
		}
		if errs[i] != nil {
			t.Fatalf("upload %d: %v", i, errs[i])
		}
		ok++
		b, err := s.Load(ctx, "acc_a", "release-notes", results[i].Version)
		if err != nil || template(t, b) != fmt.Sprint("upload ", i) {
			t.Errorf("upload %d, version %d, loads as %+v, %v", i, results[i].Version, b, err)
		}
	}
	if ok == 0 {
		t.Fatal("every upload failed")
	}
	cur, err := s.Get(ctx, "acc_a", "release-notes")
	if err != nil || !slices.ContainsFunc(results, func(r skills.Skill) bool { return r.Version == cur.Version }) {
		t.Errorf("the current version %+v, %v is none of the uploads' %+v", cur, err, results)
	}
}
