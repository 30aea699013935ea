package asynctools_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/wire/awsclient"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
)

// t0 is now, not a fixed date: DynamoDB Local runs TTL deletion, and rows of a date long past
// (expiresAt = deadline + 30 days) would vanish in the middle of a test.
var t0 = time.Now().UTC().Truncate(time.Millisecond)

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newStore(t *testing.T, blobs asynctools.Blobs) *asynctools.Store {
	t.Helper()
	db, table := newTable(t)
	return asynctools.NewStore(db, table, blobs)
}

// newTable provisions the template's tables under a prefix of this test's own and returns its
// AsyncToolResultsTable.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	db := testenv.DynamoDB(t)
	tpl, err := template.Load(filepath.Join(testenv.Root(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := "t" + random(4) + "-"
	if err := template.Provision(context.Background(), db, tpl, func(id string) string { return prefix + id }); err != nil {
		t.Fatal(err)
	}
	return db, prefix + "AsyncToolResultsTable"
}

// s3Blobs returns a blob store over a new bucket of the S3 emulator.
func s3Blobs(t *testing.T) *blobstore.S3 {
	t.Helper()
	if os.Getenv("AWS_ENDPOINT_URL_S3") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("AWS_ENDPOINT_URL_S3 is not set: run the tests with `make test`, which starts the S3 emulator")
	}
	cfg, err := awsclient.Config(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := awsclient.S3(cfg)
	name := "async-results-" + random(4)
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
	return blobstore.NewS3(c, name)
}

func newGroup() string { return asynctools.NewGroupID(random(16), 1) }

func call(groupID, toolCallID string, deadline time.Time) asynctools.Result {
	_, hash := asynctools.NewToken()
	return asynctools.Result{
		ID:             asynctools.ResultID(groupID, toolCallID),
		AccountID:      "acc_1",
		AgentID:        "agent_1",
		ConversationID: "conv_1",
		TurnID:         "turn_1",
		ToolCallID:     toolCallID,
		ToolName:       "research",
		Mode:           asynctools.ExternalDispatch,
		TokenHash:      hash,
		Deadline:       deadline,
		ParentUntil:    t0.Add(15 * time.Minute),
		Delivery:       asynctools.Delivery{EventID: "evt_1"},
		CreatedAt:      t0,
	}
}

func register(t *testing.T, s *asynctools.Store, r asynctools.Result) {
	t.Helper()
	if _, created, err := s.Register(context.Background(), r); err != nil || !created {
		t.Fatalf("Register(%s) = created %v, %v; want created", r.ID, created, err)
	}
}

func completed(resp string) asynctools.Outcome {
	return asynctools.Outcome{Status: asynctools.Completed, Response: json.RawMessage(resp)}
}

func settle(t *testing.T, s *asynctools.Store, id string, o asynctools.Outcome, now time.Time) asynctools.Result {
	t.Helper()
	r, dup, err := s.Settle(context.Background(), id, o, now)
	if err != nil || dup {
		t.Fatalf("Settle(%s) = duplicate %v, %v; want a first settle", id, dup, err)
	}
	return r
}

func TestRegisterAndSettle(t *testing.T) {
	s := newStore(t, nil)
	ctx := context.Background()
	g := newGroup()
	r := call(g, "call_1", t0.Add(time.Hour))

	got, created, err := s.Register(ctx, r)
	if err != nil || !created {
		t.Fatalf("Register = created %v, %v", created, err)
	}
	want := r
	want.Status = asynctools.Running
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Register returned (-want +got):\n%s", diff)
	}
	if read, err := s.Result(ctx, r.ID); err != nil || !cmp.Equal(want, read) {
		t.Fatalf("Result after Register = %v (diff %s)", err, cmp.Diff(want, read))
	}

	// A retried pass registers the same call again: it gets the row that exists, not a new one.
	again := r
	again.TokenHash, again.CreatedAt = "other", t0.Add(time.Minute)
	existing, created, err := s.Register(ctx, again)
	if err != nil || created {
		t.Fatalf("Register again = created %v, %v; want the existing row", created, err)
	}
	if diff := cmp.Diff(want, existing); diff != "" {
		t.Fatalf("Register again returned (-want +got):\n%s", diff)
	}

	now := t0.Add(time.Minute)
	done := settle(t, s, r.ID, completed(`{"answer": 42, "sources": ["a"]}`), now)
	if done.Status != asynctools.Completed || string(done.Response) != `{"answer": 42, "sources": ["a"]}` ||
		!done.SettledAt.Equal(now) || done.ResponseKey != "" {
		t.Fatalf("settled row = %+v", done)
	}

	// The same outcome again, formatted differently, is a duplicate that returns the record.
	rec, dup, err := s.Settle(ctx, r.ID, completed(`{"sources":["a"],"answer":42}`), now.Add(time.Second))
	if err != nil || !dup || !cmp.Equal(done, rec) {
		t.Fatalf("identical settle = duplicate %v, %v, row diff %s", dup, err, cmp.Diff(done, rec))
	}
	// A different outcome conflicts and reports what was recorded.
	var conflict *asynctools.ConflictError
	_, _, err = s.Settle(ctx, r.ID, completed(`{"answer": 43}`), now)
	if !errors.As(err, &conflict) || conflict.Recorded.Status != asynctools.Completed || !cmp.Equal(done, conflict.Recorded) {
		t.Fatalf("conflicting settle = %v, want *ConflictError recording the completion", err)
	}
	_, _, err = s.Settle(ctx, r.ID, asynctools.Outcome{Status: asynctools.Failed, Error: "boom"}, now)
	if !errors.As(err, &conflict) || conflict.Recorded.Status != asynctools.Completed {
		t.Fatalf("failing a completed call = %v, want *ConflictError", err)
	}

	for _, id := range []string{asynctools.ResultID(g, "call_unknown"), asynctools.ResultID(newGroup(), "call_1"), "ag_nope.x", ""} {
		if _, _, err := s.Settle(ctx, id, completed(`1`), now); !errors.Is(err, asynctools.ErrNotFound) {
			t.Errorf("Settle(%q) = %v, want ErrNotFound", id, err)
		}
		if _, err := s.Result(ctx, id); !errors.Is(err, asynctools.ErrNotFound) {
			t.Errorf("Result(%q) = %v, want ErrNotFound", id, err)
		}
	}
	if _, _, err := s.Settle(ctx, r.ID, completed(`{not json`), now); err == nil || errors.As(err, &conflict) {
		t.Errorf("settling with a response that is not JSON = %v, want a plain error", err)
	}
}

func TestTimeout(t *testing.T) {
	s := newStore(t, nil)
	ctx := context.Background()
	deadline := t0.Add(time.Minute)
	r := call(newGroup(), "call_1", deadline)
	register(t, s, r)
	timeout := asynctools.Outcome{Status: asynctools.Failed, Error: "timed out", Timeout: true}

	if _, _, err := s.Settle(ctx, r.ID, timeout, deadline.Add(-time.Millisecond)); !errors.Is(err, asynctools.ErrNotDue) {
		t.Fatalf("timeout before the deadline = %v, want ErrNotDue", err)
	}
	if got, _ := s.Result(ctx, r.ID); got.Status != asynctools.Running {
		t.Fatalf("row is %s after a refused timeout, want running", got.Status)
	}
	got := settle(t, s, r.ID, timeout, deadline)
	if got.Status != asynctools.Failed || got.Error != "timed out" {
		t.Fatalf("timed-out row = %+v", got)
	}
	// The parent and the sweeper may both time it out.
	if _, dup, err := s.Settle(ctx, r.ID, timeout, deadline.Add(time.Second)); err != nil || !dup {
		t.Fatalf("second timeout = duplicate %v, %v; want a duplicate", dup, err)
	}
	var conflict *asynctools.ConflictError
	_, _, err := s.Settle(ctx, r.ID, completed(`"late"`), deadline.Add(time.Second))
	if !errors.As(err, &conflict) || conflict.Recorded.Status != asynctools.Failed || conflict.Recorded.Error != "timed out" {
		t.Fatalf("late success = %v, want *ConflictError recording the timeout", err)
	}
}

func TestOversizedResponseGoesToBlobs(t *testing.T) {
	db, table := newTable(t)
	s := asynctools.NewStore(db, table, s3Blobs(t))
	ctx := context.Background()
	r := call(newGroup(), "call_1", t0.Add(time.Hour))
	register(t, s, r)

	// Quotes and multi-byte runes: the preview must escape the one and not split the other.
	var b strings.Builder
	b.WriteString(`{"text":"`)
	for b.Len() < asynctools.DefaultInlineLimit+1000 {
		b.WriteString(`Grüße, \"quoted\" <b>日本</b> `)
	}
	b.WriteString(`"}`)
	full := b.String()

	got := settle(t, s, r.ID, completed(full), t0)
	if !strings.HasPrefix(got.ResponseKey, "results/"+r.ID+"/") || !strings.HasSuffix(got.ResponseKey, ".json") {
		t.Fatalf("ResponseKey = %q", got.ResponseKey)
	}
	if got.ResponseBytes != len(full) {
		t.Fatalf("ResponseBytes = %d, want %d", got.ResponseBytes, len(full))
	}
	if len(got.Response) > asynctools.PreviewBytes {
		t.Fatalf("preview is %d bytes, want at most %d", len(got.Response), asynctools.PreviewBytes)
	}
	var preview string
	if err := json.Unmarshal(got.Response, &preview); err != nil {
		t.Fatalf("preview %s is not a JSON string: %v", got.Response, err)
	}
	if !utf8.ValidString(preview) || !strings.HasPrefix(full, preview) || len(preview) < asynctools.PreviewBytes/2 {
		t.Fatalf("preview (%d bytes) is not a long valid prefix of the response: %q", len(preview), preview)
	}
	if read, err := s.Result(ctx, r.ID); err != nil || !cmp.Equal(got, read) {
		t.Fatalf("Result = %v, diff %s", err, cmp.Diff(got, read))
	}
	whole, err := s.FullResponse(ctx, got)
	if err != nil || string(whole) != full {
		t.Fatalf("FullResponse = %d bytes, %v; want the %d-byte response", len(whole), err, len(full))
	}

	// A conflicting large completion neither lands nor replaces the recorded blob.
	var conflict *asynctools.ConflictError
	other := strings.Replace(full, "Grüße", "Hallo", 1)
	if _, _, err := s.Settle(ctx, r.ID, completed(other), t0); !errors.As(err, &conflict) {
		t.Fatalf("conflicting large settle = %v, want *ConflictError", err)
	}
	if whole, err := s.FullResponse(ctx, got); err != nil || string(whole) != full {
		t.Fatalf("FullResponse after a conflicting settle = %v, changed %v", err, string(whole) != full)
	}
	// An identical one is a duplicate.
	if _, dup, err := s.Settle(ctx, r.ID, completed(full), t0); err != nil || !dup {
		t.Fatalf("identical large settle = duplicate %v, %v", dup, err)
	}

	// A small response is returned as it is.
	small := call(r.ID[:25], "call_2", t0.Add(time.Hour))
	register(t, s, small)
	done := settle(t, s, small.ID, completed(`[1,2]`), t0)
	if whole, err := s.FullResponse(ctx, done); err != nil || string(whole) != `[1,2]` {
		t.Fatalf("FullResponse of an inline response = %s, %v", whole, err)
	}

	// Without a blob store an oversized response is an error and the row stays running.
	noBlobs := asynctools.NewStore(db, table, nil)
	big := call(r.ID[:25], "call_3", t0.Add(time.Hour))
	register(t, s, big)
	if _, _, err := noBlobs.Settle(ctx, big.ID, completed(full), t0); err == nil {
		t.Fatal("settling an oversized response without a blob store succeeded")
	}
	if row, _ := s.Result(ctx, big.ID); row.Status != asynctools.Running {
		t.Fatalf("row is %s after the refused settle, want running", row.Status)
	}
}

func TestSealLoadAndPending(t *testing.T) {
	s := newStore(t, nil)
	ctx := context.Background()
	g := newGroup()
	a, b, c := call(g, "call_a", t0.Add(time.Hour)), call(g, "call_b", t0.Add(time.Hour)), call(g, "call_c", t0.Add(time.Hour))

	// a completes before the group is sealed; b is still running; c was never registered.
	register(t, s, a)
	register(t, s, b)
	settle(t, s, a.ID, completed(`"a"`), t0)

	st, err := s.Load(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if st.Group != nil || st.Pending() != nil || st.Settled() || len(st.Rows) != 2 {
		t.Fatalf("unsealed state = group %v, pending %v, settled %v, %d rows", st.Group, st.Pending(), st.Settled(), len(st.Rows))
	}

	group := asynctools.Group{
		ID: g, AccountID: "acc_1", AgentID: "agent_1", ConversationID: "conv_1",
		Expected: []string{a.ID, b.ID, c.ID},
		Delivery: asynctools.Delivery{EventID: "evt_1"},
		SealedBy: "parent",
	}
	sealedAt := t0.Add(time.Second)
	got, sealed, err := s.Seal(ctx, group, sealedAt, t0.Add(2*time.Hour))
	if err != nil || !sealed {
		t.Fatalf("Seal = sealed %v, %v", sealed, err)
	}
	want := group
	want.SealedAt = sealedAt
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Seal returned (-want +got):\n%s", diff)
	}
	// The sweeper (or a retried pass) sealing it again gets the group as first sealed.
	late := group
	late.Expected, late.SealedBy = []string{a.ID}, "sweeper"
	existing, sealed, err := s.Seal(ctx, late, t0.Add(time.Minute), t0.Add(time.Hour))
	if err != nil || sealed {
		t.Fatalf("second Seal = sealed %v, %v; want the existing group", sealed, err)
	}
	if diff := cmp.Diff(want, existing); diff != "" {
		t.Fatalf("second Seal returned (-want +got):\n%s", diff)
	}

	st, err = s.Load(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if st.Group == nil || !cmp.Equal(want, *st.Group) {
		t.Fatalf("loaded group = %+v, want %+v", st.Group, want)
	}
	if diff := cmp.Diff([]string{b.ID, c.ID}, st.Pending()); diff != "" || st.Settled() {
		t.Fatalf("Pending (-want +got):\n%s, settled %v", diff, st.Settled())
	}
	if row, ok := st.Row(a.ID); !ok || row.Status != asynctools.Completed || string(row.Response) != `"a"` {
		t.Fatalf("Row(a) = %+v, %v", row, ok)
	}
	if _, ok := st.Row(c.ID); ok {
		t.Fatal("Row(c) found a row that was never registered")
	}

	settle(t, s, b.ID, completed(`"b"`), t0.Add(time.Minute))
	register(t, s, c)
	st, _ = s.Load(ctx, g)
	if diff := cmp.Diff([]string{c.ID}, st.Pending()); diff != "" || st.Settled() {
		t.Fatalf("Pending (-want +got):\n%s, settled %v", diff, st.Settled())
	}
	settle(t, s, c.ID, asynctools.Outcome{Status: asynctools.Failed, Error: "no"}, t0.Add(time.Minute))
	st, _ = s.Load(ctx, g)
	if len(st.Pending()) != 0 || !st.Settled() || len(st.Rows) != 3 {
		t.Fatalf("after all settled: pending %v, settled %v, %d rows", st.Pending(), st.Settled(), len(st.Rows))
	}

	// Every call completed before the group was sealed: it is settled the moment it is sealed.
	g2 := newGroup()
	x, y := call(g2, "call_x", t0.Add(time.Hour)), call(g2, "call_y", t0.Add(time.Hour))
	register(t, s, x)
	register(t, s, y)
	settle(t, s, x.ID, completed(`1`), t0)
	settle(t, s, y.ID, completed(`2`), t0)
	if _, sealed, err := s.Seal(ctx, asynctools.Group{ID: g2, Expected: []string{x.ID, y.ID}, SealedBy: "parent"}, t0, t0.Add(time.Hour)); err != nil || !sealed {
		t.Fatalf("Seal = %v, %v", sealed, err)
	}
	if st, err := s.Load(ctx, g2); err != nil || !st.Settled() || len(st.Pending()) != 0 {
		t.Fatalf("group settled before its seal: settled %v, pending %v, %v", st.Settled(), st.Pending(), err)
	}

	// The group of an unknown id is empty; ids of another group are refused at the seal.
	if st, err := s.Load(ctx, newGroup()); err != nil || st.Group != nil || len(st.Rows) != 0 {
		t.Fatalf("Load of an unknown group = %+v, %v", st, err)
	}
	if _, _, err := s.Seal(ctx, asynctools.Group{ID: newGroup(), Expected: []string{x.ID}}, t0, t0); err == nil {
		t.Fatal("sealing a group expecting another group's result succeeded")
	}
}

func TestClaimConsumeReschedule(t *testing.T) {
	s := newStore(t, nil)
	ctx := context.Background()
	g := newGroup()

	if _, err := s.Claim(ctx, g, t0, t0.Add(time.Minute)); !errors.Is(err, asynctools.ErrNotFound) {
		t.Fatalf("Claim of an unsealed group = %v, want ErrNotFound", err)
	}
	if err := s.Consume(ctx, g, t0); !errors.Is(err, asynctools.ErrNotFound) {
		t.Fatalf("Consume of an unsealed group = %v, want ErrNotFound", err)
	}
	if err := s.Reschedule(ctx, g, t0); !errors.Is(err, asynctools.ErrNotFound) {
		t.Fatalf("Reschedule of an unsealed group = %v, want ErrNotFound", err)
	}
	if _, _, err := s.Seal(ctx, asynctools.Group{ID: g, SealedBy: "parent"}, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Claim(ctx, g, t0.Add(time.Second), t0.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("first Claim = %v, %v; want true", ok, err)
	}
	if ok, err := s.Claim(ctx, g, t0.Add(2*time.Second), t0.Add(time.Minute)); err != nil || ok {
		t.Fatalf("second Claim = %v, %v; want false", ok, err)
	}
	if err := s.Consume(ctx, g, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(ctx, g, t0.Add(4*time.Second)); err != nil {
		t.Fatalf("second Consume: %v", err)
	}
	if err := s.Reschedule(ctx, g, t0.Add(time.Hour)); err != nil {
		t.Fatalf("Reschedule of a consumed group: %v", err)
	}
	st, _ := s.Load(ctx, g)
	if st.Group == nil || !st.Group.ClaimedAt.Equal(t0.Add(time.Second)) || !st.Group.ConsumedAt.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("group after claim and consume = %+v", st.Group)
	}

	// A group whose continuation ran without a claim (its parent went on itself) is not claimed.
	g2 := newGroup()
	if _, _, err := s.Seal(ctx, asynctools.Group{ID: g2}, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(ctx, g2, t0); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Claim(ctx, g2, t0, t0.Add(time.Minute)); err != nil || ok {
		t.Fatalf("Claim of a consumed group = %v, %v; want false", ok, err)
	}
}

func TestDue(t *testing.T) {
	s := newStore(t, nil)
	ctx := context.Background()
	now := t0.Add(5 * time.Minute)

	// Several groups, so that the items spread over the index's shards.
	var want []asynctools.DueItem
	var consumed []string
	for i := range 6 {
		g := newGroup()
		late := call(g, "call_late", t0.Add(time.Duration(i)*time.Second)) // past its deadline, running
		done := call(g, "call_done", t0.Add(time.Minute))                  // past its deadline, settled
		live := call(g, "call_live", t0.Add(10*time.Minute))               // not due yet
		for _, r := range []asynctools.Result{late, done, live} {
			register(t, s, r)
		}
		settle(t, s, done.ID, completed(`1`), t0)
		want = append(want, asynctools.DueItem{GroupID: g, ResultID: late.ID, DueAt: late.Deadline})

		groupDue := t0.Add(time.Minute + time.Duration(i)*time.Second)
		if _, _, err := s.Seal(ctx, asynctools.Group{ID: g}, t0, groupDue); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			want = append(want, asynctools.DueItem{GroupID: g, DueAt: groupDue})
		} else {
			consumed = append(consumed, g)
		}
	}
	for _, g := range consumed {
		if err := s.Consume(ctx, g, t0); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(want, func(a, b asynctools.DueItem) int { return a.DueAt.Compare(b.DueAt) })

	got, err := s.Due(ctx, now, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Due (-want +got):\n%s", diff)
	}
	if got, err := s.Due(ctx, now, 2); err != nil || !cmp.Equal(want[:2], got) {
		t.Fatalf("Due with limit 2 = %v, %v; want the two earliest %v", got, err, want[:2])
	}
	if got, err := s.Due(ctx, t0.Add(-time.Second), 100); err != nil || len(got) != 0 {
		t.Fatalf("Due before anything is due = %v, %v", got, err)
	}

	// A rescheduled group leaves the list until its new time; a claimed one comes back at its
	// resend time.
	var groups []string
	for _, it := range want {
		if it.ResultID == "" {
			groups = append(groups, it.GroupID)
		}
	}
	if err := s.Reschedule(ctx, groups[0], now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Claim(ctx, groups[1], now, now.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	got, err = s.Due(ctx, now, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range got {
		if it.ResultID == "" && (it.GroupID == groups[0] || it.GroupID == groups[1]) {
			t.Fatalf("Due lists group %s after it was rescheduled or claimed", it.GroupID)
		}
	}
	if len(got) != len(want)-2 {
		t.Fatalf("Due lists %d items, want %d", len(got), len(want)-2)
	}
	got, _ = s.Due(ctx, now.Add(time.Minute), 100)
	if !slices.ContainsFunc(got, func(it asynctools.DueItem) bool { return it.GroupID == groups[1] && it.ResultID == "" }) {
		t.Fatalf("Due at the resend time does not list the claimed group: %v", got)
	}
}

// The writes stay within one unit each: a row and a group item are far below 1 KB.
func TestWriteUnits(t *testing.T) {
	var rows, groups asynctools.Meter
	base := newStore(t, nil)
	ctx := context.Background()
	g := newGroup()
	r := call(g, "call_1", t0.Add(time.Hour))

	s := base.WithMeter(&rows)
	register(t, s, r)
	settle(t, s, r.ID, completed(`{"answer":"a short one"}`), t0)
	table, index := rows.Writes()
	t.Logf("register+settle: %.1f table, %.1f index write units", table, index)
	if table <= 0 || table > 2 {
		t.Errorf("register+settle took %.1f table write units, want 1 to 2", table)
	}

	s = base.WithMeter(&groups)
	if _, _, err := s.Seal(ctx, asynctools.Group{ID: g, AccountID: "acc_1", AgentID: "agent_1", ConversationID: "conv_1",
		Expected: []string{r.ID}, Delivery: asynctools.Delivery{EventID: "evt_1"}, SealedBy: "parent"}, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Claim(ctx, g, t0, t0.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	if err := s.Consume(ctx, g, t0); err != nil {
		t.Fatal(err)
	}
	table, index = groups.Writes()
	t.Logf("seal+claim+consume: %.1f table, %.1f index write units", table, index)
	if table <= 0 || table > 3 {
		t.Errorf("seal+claim+consume took %.1f table write units, want 1 to 3", table)
	}
	// The store the meter was added to does not count.
	before, _ := rows.Writes()
	register(t, base, call(g, "call_2", t0.Add(time.Hour)))
	if after, _ := rows.Writes(); after != before {
		t.Errorf("a write of the unmetered store was counted: %.1f table units, were %.1f", after, before)
	}
}

// Concurrent completions of the same call with the same outcome: one lands, the others are
// told they are duplicates.
func TestConcurrentSettles(t *testing.T) {
	s := newStore(t, nil)
	r := call(newGroup(), "call_1", t0.Add(time.Hour))
	register(t, s, r)

	const n = 20
	var (
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		firsts, duplicates int
		errs               []error
	)
	for range n {
		wg.Go(func() {
			_, dup, err := s.Settle(context.Background(), r.ID, completed(`{"v":1}`), t0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case dup:
				duplicates++
			default:
				firsts++
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 || firsts != 1 || duplicates != n-1 {
		t.Fatalf("%d settles: %d first, %d duplicates, errors %v; want 1 first and %d duplicates", n, firsts, duplicates, errs, n-1)
	}
}
