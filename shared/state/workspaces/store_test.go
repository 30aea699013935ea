package workspaces_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
)

// stored is a workspaces store on the template's WorkspacesTable and WorkspacesBucket, created
// for this test.
type stored struct {
	*workspaces.Store
	stack *testenv.Resources
}

func newStore(t *testing.T) stored {
	t.Helper()
	stack := testenv.Stack(t)
	s, err := workspaces.FromConfig(stack.DB, stack.S3, workspaces.Config{Table: stack.Name("WorkspacesTable"), Bucket: stack.Name("WorkspacesBucket")})
	if err != nil || s == nil {
		t.Fatalf("FromConfig = %v, %v", s, err)
	}
	return stored{s, stack}
}

// objects counts the objects in the workspaces bucket under prefix.
func (s stored) objects(t *testing.T, prefix string) int {
	t.Helper()
	out, err := s.stack.S3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(s.stack.Name("WorkspacesBucket")), Prefix: &prefix})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}

// rows are the sort keys of the account's items in the workspaces table.
func (s stored) rows(t *testing.T, accountID string) []string {
	t.Helper()
	out, err := s.stack.DB.Query(context.Background(), &dynamodb.QueryInput{
		TableName:                 aws.String(s.stack.Name("WorkspacesTable")),
		KeyConditionExpression:    aws.String("accountId = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberS{Value: accountID}},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	var sks []string
	for _, it := range out.Items {
		sks = append(sks, it["sk"].(*types.AttributeValueMemberS).Value)
	}
	return sks
}

func (s stored) read(t *testing.T, account, ws, path string, version int64) string {
	t.Helper()
	f, err := s.File(context.Background(), account, ws, path, version)
	if err != nil {
		t.Fatalf("File(%s, %d): %v", path, version, err)
	}
	return string(f.Data)
}

func write(path, data string) workspaces.Change {
	return workspaces.Change{Path: path, Data: []byte(data)}
}

var api = workspaces.Author{Kind: workspaces.ByAPI}

func TestCommitReadListHistoryDiff(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	ws, err := s.Create(ctx, "acc_a", "notes")
	if err != nil || ws.Version != 0 || ws.Name != "notes" {
		t.Fatalf("Create = %+v, %v; want notes at version 0", ws, err)
	}
	if _, err := s.Create(ctx, "acc_a", "notes"); !errors.Is(err, workspaces.ErrExists) {
		t.Errorf("Create again = %v, want ErrExists", err)
	}

	agent := workspaces.Author{Kind: workspaces.ByTool, AgentID: "ag_1", ConversationID: "conv_1", ToolCallID: "call_1"}
	c1, err := s.Commit(ctx, "acc_a", "notes", 0, []workspaces.Change{write("a.txt", "one"), write("docs/b.md", "bee"), write("docs/deep/c.md", "sea")}, agent)
	if err != nil || c1.Version != 1 || c1.Parent != 0 || c1.Author != agent || len(c1.Changes) != 3 {
		t.Fatalf("first Commit = %+v, %v", c1, err)
	}
	c2, err := s.Commit(ctx, "acc_a", "notes", 1, []workspaces.Change{write("a.txt", "two"), {Path: "docs/b.md", Delete: true}}, api)
	if err != nil || c2.Version != 2 {
		t.Fatalf("second Commit = %+v, %v", c2, err)
	}
	// The same bytes again change nothing, and make no commit.
	if c, err := s.Commit(ctx, "acc_a", "notes", workspaces.Latest, []workspaces.Change{write("a.txt", "two")}, api); err != nil || c.Version != 2 {
		t.Errorf("a Commit that changes nothing = %+v, %v; want version 2", c, err)
	}

	if got := s.read(t, "acc_a", "notes", "a.txt", workspaces.Latest); got != "two" {
		t.Errorf("a.txt now = %q, want two", got)
	}
	if got := s.read(t, "acc_a", "notes", "a.txt", 1); got != "one" {
		t.Errorf("a.txt at version 1 = %q, want one", got)
	}
	if got := s.read(t, "acc_a", "notes", "docs/b.md", 1); got != "bee" {
		t.Errorf("docs/b.md at version 1 = %q, want bee", got)
	}
	if _, err := s.File(ctx, "acc_a", "notes", "docs/b.md", workspaces.Latest); !errors.Is(err, workspaces.ErrNotFound) {
		t.Errorf("deleted docs/b.md = %v, want ErrNotFound", err)
	}
	if _, err := s.File(ctx, "acc_a", "notes", "a.txt", 3); !errors.Is(err, workspaces.ErrNotFound) {
		t.Errorf("a version to come = %v, want ErrNotFound", err)
	}

	root, v, err := s.List(ctx, "acc_a", "notes", "", workspaces.Latest)
	want := []workspaces.DirEntry{{Name: "a.txt", Type: "file", Size: 3}, {Name: "docs", Type: "dir", Size: 3}}
	if err != nil || v != 2 || !cmp.Equal(want, root) {
		t.Errorf("List(root) = %+v, %d, %v; want %+v at 2", root, v, err, want)
	}
	docs, _, err := s.List(ctx, "acc_a", "notes", "docs", 1)
	want = []workspaces.DirEntry{{Name: "b.md", Type: "file", Size: 3}, {Name: "deep", Type: "dir", Size: 3}}
	if err != nil || !cmp.Equal(want, docs) {
		t.Errorf("List(docs, 1) = %+v, %v; want %+v", docs, err, want)
	}
	if _, _, err := s.List(ctx, "acc_a", "notes", "a.txt", workspaces.Latest); !errors.Is(err, workspaces.ErrNotFound) {
		t.Errorf("List of a file = %v, want ErrNotFound", err)
	}

	head, err := s.Get(ctx, "acc_a", "notes")
	if err != nil || head.Version != 2 || head.Files != 2 || head.Bytes != 6 {
		t.Errorf("Get = %+v, %v; want version 2, 2 files, 6 bytes", head, err)
	}

	page, next, err := s.History(ctx, "acc_a", "notes", 2, "")
	if err != nil || len(page) != 2 || page[0].Version != 2 || page[1].Version != 1 || page[1].Author != agent || next != "1" {
		t.Fatalf("History = %+v, %q, %v; want versions 2, 1 and a cursor", page, next, err)
	}
	page, next, err = s.History(ctx, "acc_a", "notes", 2, next)
	if err != nil || len(page) != 1 || page[0].Version != 0 || next != "" {
		t.Errorf("History's last page = %+v, %q, %v; want version 0 alone", page, next, err)
	}

	d, err := s.Diff(ctx, "acc_a", "notes", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range d {
		got = append(got, c.Change+" "+c.Path)
	}
	if want := []string{"added a.txt", "added docs/deep/c.md"}; !slices.Equal(want, got) {
		t.Errorf("Diff(0, 2) = %v, want %v", got, want)
	}
	d, err = s.Diff(ctx, "acc_a", "notes", 1, 2)
	if err != nil || len(d) != 2 || d[0].Change != workspaces.Modified || d[0].Before == nil || d[0].After == nil || d[1].Change != workspaces.Deleted || d[1].After != nil {
		t.Errorf("Diff(1, 2) = %+v, %v; want a.txt modified, docs/b.md deleted", d, err)
	}

	list, err := s.Workspaces(ctx, "acc_a")
	if err != nil || len(list) != 1 || list[0].Name != "notes" || list[0].Version != 2 {
		t.Errorf("Workspaces = %+v, %v", list, err)
	}
	// Another account sees none of it.
	if _, err := s.File(ctx, "acc_b", "notes", "a.txt", workspaces.Latest); !errors.Is(err, workspaces.ErrNotFound) {
		t.Errorf("another account's read = %v, want ErrNotFound", err)
	}
	if list, err := s.Workspaces(ctx, "acc_b"); err != nil || len(list) != 0 {
		t.Errorf("another account's Workspaces = %+v, %v", list, err)
	}
}

// Two writers from the same base: of different paths, both land, the later rebased; of the
// same path, the later is refused whole.
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.Create(ctx, "acc_a", "w"); err != nil {
		t.Fatal(err)
	}
	base, err := s.Commit(ctx, "acc_a", "w", 0, []workspaces.Change{write("shared.txt", "base")}, api)
	if err != nil {
		t.Fatal(err)
	}

	first, err := s.Commit(ctx, "acc_a", "w", base.Version, []workspaces.Change{write("one.txt", "1")}, api)
	if err != nil || first.Version != base.Version+1 {
		t.Fatalf("first writer = %+v, %v", first, err)
	}
	second, err := s.Commit(ctx, "acc_a", "w", base.Version, []workspaces.Change{write("two.txt", "2")}, api)
	if err != nil || second.Version != base.Version+2 || second.Parent != first.Version {
		t.Fatalf("second writer of another path = %+v, %v; want version %d over %d", second, err, base.Version+2, first.Version)
	}
	for _, p := range []string{"one.txt", "two.txt", "shared.txt"} {
		if _, err := s.File(ctx, "acc_a", "w", p, workspaces.Latest); err != nil {
			t.Errorf("%s after both writers: %v", p, err)
		}
	}

	if _, err := s.Commit(ctx, "acc_a", "w", second.Version, []workspaces.Change{write("shared.txt", "mine")}, api); err != nil {
		t.Fatal(err)
	}
	head := second.Version + 1
	before := s.rows(t, "acc_a")
	_, err = s.Commit(ctx, "acc_a", "w", second.Version, []workspaces.Change{write("new.txt", "x"), write("shared.txt", "theirs")}, api)
	var conflict *workspaces.Conflict
	if !errors.As(err, &conflict) || !slices.Equal(conflict.Paths, []string{"shared.txt"}) || conflict.Head != head {
		t.Fatalf("writer of a path changed since its base = %v, want a Conflict on shared.txt at %d", err, head)
	}
	if got := s.read(t, "acc_a", "w", "shared.txt", workspaces.Latest); got != "mine" {
		t.Errorf("shared.txt = %q, want mine", got)
	}
	if _, err := s.File(ctx, "acc_a", "w", "new.txt", workspaces.Latest); !errors.Is(err, workspaces.ErrNotFound) {
		t.Errorf("the refused batch's other path = %v, want ErrNotFound", err)
	}
	if got := s.rows(t, "acc_a"); !cmp.Equal(before, got) {
		t.Errorf("rows after the conflict (-want +got):\n%s", cmp.Diff(before, got))
	}
	if ws, err := s.Get(ctx, "acc_a", "w"); err != nil || ws.Version != head {
		t.Errorf("head after the conflict = %+v, %v; want version %d", ws, err, head)
	}

	// Exact refuses any move; Latest overwrites.
	if _, err := s.CommitExact(ctx, "acc_a", "w", second.Version, []workspaces.Change{write("other.txt", "x")}, api); !errors.As(err, &conflict) {
		t.Errorf("CommitExact over a moved workspace = %v, want a Conflict", err)
	}
	if c, err := s.Commit(ctx, "acc_a", "w", workspaces.Latest, []workspaces.Change{write("shared.txt", "theirs")}, api); err != nil || c.Version != head+1 {
		t.Errorf("Commit over Latest = %+v, %v; want version %d", c, err, head+1)
	}
}

func TestRefusals(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.Create(ctx, "acc_a", "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "acc_a", "w", 0, []workspaces.Change{write("dir/file.txt", "x")}, api); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		changes []workspaces.Change
		field   string
	}{
		{"no changes", nil, "changes"},
		{"a path twice", []workspaces.Change{write("a", "1"), write("a", "2")}, "path"},
		{"a file too large", []workspaces.Change{{Path: "big", Data: make([]byte, workspaces.MaxFileBytes+1)}}, "path"},
		{"a file where a directory is", []workspaces.Change{write("dir", "x")}, "path"},
		{"a file beneath a file", []workspaces.Change{write("dir/file.txt/x", "x")}, "path"},
	} {
		_, err := s.Commit(ctx, "acc_a", "w", workspaces.Latest, tt.changes, api)
		var inv *workspaces.InvalidError
		if !errors.As(err, &inv) || inv.Field != tt.field {
			t.Errorf("%s: Commit = %v, want a refusal of %s", tt.name, err, tt.field)
		}
	}
	if _, err := s.Commit(ctx, "acc_a", "w", workspaces.Latest, []workspaces.Change{{Path: "absent", Delete: true}}, api); !errors.Is(err, workspaces.ErrNotFound) {
		t.Errorf("deleting an absent path = %v, want ErrNotFound", err)
	}
	if _, err := s.Create(ctx, "acc_a", "no/slash"); err == nil {
		t.Error("Create of a name off the grammar succeeded")
	}
	if ws, err := s.Get(ctx, "acc_a", "w"); err != nil || ws.Version != 1 {
		t.Errorf("after the refusals: %+v, %v; want version 1", ws, err)
	}
}

func TestPathProblem(t *testing.T) {
	long := strings.Repeat("a", 256)
	for _, p := range []string{"a.txt", "a/b/c.txt", "dir/.hidden", "a b/ü.md", strings.Repeat("a/", 63) + "b"} {
		if problem := workspaces.PathProblem(p); problem != "" {
			t.Errorf("PathProblem(%q) = %q, want none", p, problem)
		}
	}
	for _, p := range []string{"", "/a", "a/", "a//b", "./a", "a/../b", "..", `a\b`, "a\x00b", "a\nb", "a\x7fb", long, "\xff",
		strings.Repeat("a/", 64) + "b", strings.Repeat(strings.Repeat("a", 200)+"/", 5) + strings.Repeat("a", 25)} {
		if workspaces.PathProblem(p) == "" {
			t.Errorf("PathProblem(%q) accepted it", p)
		}
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, name := range []string{"gone", "kept"} {
		if _, err := s.Create(ctx, "acc_a", name); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, "acc_a", name, 0, []workspaces.Change{write("f", name)}, api); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "acc_a", "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "acc_a", "gone"); !errors.Is(err, workspaces.ErrNotFound) {
		t.Errorf("Delete again = %v, want ErrNotFound", err)
	}
	if _, err := s.File(ctx, "acc_a", "gone", "f", 1); !errors.Is(err, workspaces.ErrNotFound) {
		t.Errorf("a deleted workspace's file = %v, want ErrNotFound", err)
	}
	for _, sk := range s.rows(t, "acc_a") {
		if strings.Contains(sk, "gone") {
			t.Errorf("row %s outlived its workspace", sk)
		}
	}
	if got := s.read(t, "acc_a", "kept", "f", workspaces.Latest); got != "kept" {
		t.Errorf("the other workspace's file = %q", got)
	}
	// Created again, the name starts over.
	if ws, err := s.Create(ctx, "acc_a", "gone"); err != nil || ws.Version != 0 {
		t.Errorf("Create after Delete = %+v, %v", ws, err)
	}

	if _, err := s.Create(ctx, "acc_b", "other"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.DeleteAll(ctx, "acc_a"); err != nil {
			t.Fatal(err)
		}
	}
	if rows := s.rows(t, "acc_a"); len(rows) != 0 {
		t.Errorf("rows after DeleteAll: %v", rows)
	}
	if n := s.objects(t, "workspaces/acc_a/"); n != 0 {
		t.Errorf("%d objects after DeleteAll", n)
	}
	if n := s.objects(t, "workspaces/acc_b/"); n == 0 || len(s.rows(t, "acc_b")) != 2 {
		t.Errorf("another account's workspace went with DeleteAll")
	}
}

// Writers racing from one base over different paths all land, one version each.
func TestRacingWriters(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.Create(ctx, "acc_a", "w"); err != nil {
		t.Fatal(err)
	}
	const writers = 5
	versions := make(chan int64, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			c, err := s.Commit(ctx, "acc_a", "w", 0, []workspaces.Change{write(fmt.Sprintf("f%d", i), "x")}, api)
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
			versions <- c.Version
		})
	}
	wg.Wait()
	close(versions)
	got := slices.Sorted(func(yield func(int64) bool) {
		for v := range versions {
			yield(v)
		}
	})
	if want := []int64{1, 2, 3, 4, 5}; !slices.Equal(want, got) {
		t.Errorf("versions = %v, want %v", got, want)
	}
	if ws, err := s.Get(ctx, "acc_a", "w"); err != nil || ws.Files != writers {
		t.Errorf("head = %+v, %v; want %d files", ws, err, writers)
	}
}
