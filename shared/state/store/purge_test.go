package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// conversation writes a conversation of n messages (n >= 1) for accountID and ends its turn.
func conversation(t *testing.T, s *store.Store, accountID, id string, n int, now time.Time) {
	t.Helper()
	ctx := context.Background()
	turn, err := s.TakeLease(ctx, accountID, id, "agent", now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]model.Message, n)
	for i := range msgs {
		msgs[i] = text(model.RoleUser, fmt.Sprint("message ", i))
	}
	if err := turn.Append(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := turn.End(ctx, model.Usage{}); err != nil {
		t.Fatal(err)
	}
}

func conversationItems(t *testing.T, db *dynamodb.Client, tables store.Tables, accountID string) int {
	t.Helper()
	return len(testenv.ConversationItems(t, db, tables.Conversations, accountID))
}

func accountItem(t *testing.T, db *dynamodb.Client, tables store.Tables, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &tables.Accounts, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"accountId": &types.AttributeValueMemberS{Value: id}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// A purge goes on across index pages within a pass and across passes when its time runs out;
// it deletes every item of the account's conversations and its agents, fences a turn still
// running, touches no other account, and removes the tombstone only once the index has settled.
func TestPurgeDeletesEveryConversationAcrossPagesAndPasses(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	tables := testenv.Tables(t, db)
	s := store.New(db, tables)
	t0 := time.Now()

	acc, _, err := s.CreateAccount(ctx, "ada", t0)
	if err != nil {
		t.Fatal(err)
	}
	other, otherSecret, err := s.CreateAccount(ctx, "eve", t0)
	if err != nil {
		t.Fatal(err)
	}
	// 30 messages take two BatchWriteItem calls; six conversations take three index pages of 2.
	conversation(t, s, acc.ID, "long", 30, t0)
	for i := range 4 {
		conversation(t, s, acc.ID, fmt.Sprint("c", i), 2, t0)
	}
	conversation(t, s, other.ID, "c0", 3, t0)
	// A turn still running when the purge comes must not leave messages behind it.
	running, err := s.TakeLease(ctx, acc.ID, "running", "agent", t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := running.Append(ctx, text(model.RoleUser, "before")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateAgent(ctx, store.Agent{AccountID: acc.ID, ID: "helper", Config: json.RawMessage(`{}`)}, t0); err != nil {
		t.Fatal(err)
	}
	want := 31 + 4*3 + 2
	if n := conversationItems(t, db, tables, acc.ID); n != want {
		t.Fatalf("before the purge the account has %d conversation items, want %d", n, want)
	}

	// A live account is never purged.
	if _, err := s.PurgeAccount(ctx, acc.ID, store.Purge{Now: t0}); !errors.Is(err, store.ErrAccountLive) {
		t.Fatalf("PurgeAccount of a live account = %v, want ErrAccountLive", err)
	}
	if n := conversationItems(t, db, tables, acc.ID); n != want {
		t.Fatalf("a refused purge left %d conversation items, want %d", n, want)
	}

	if err := s.DeleteAccount(ctx, acc.ID, t0); err != nil {
		t.Fatal(err)
	}
	// Out of time from the start: the pass purges one conversation and says there is more.
	first, err := s.PurgeAccount(ctx, acc.ID, store.Purge{Now: t0, Until: t0.Add(-time.Second), PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if first.Conversations != 1 || !first.More || first.Finished {
		t.Fatalf("first pass = %+v, want 1 conversation and more to do", first)
	}
	rest, err := s.PurgeAccount(ctx, acc.ID, store.Purge{Now: t0, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rest.Conversations != 5 || rest.More || rest.Finished {
		t.Fatalf("second pass = %+v, want the 5 other conversations, nothing more, the tombstone kept (too young)", rest)
	}
	if got := first.Items + rest.Items; got != want {
		t.Errorf("the passes deleted %d items, want %d", got, want)
	}
	if n := conversationItems(t, db, tables, acc.ID); n != 0 {
		t.Errorf("after the purge the account has %d conversation items, want 0", n)
	}
	if err := running.Append(ctx, text(model.RoleAssistant, "after")); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("append by a turn running through the purge = %v, want ErrLeaseLost", err)
	}
	if n := conversationItems(t, db, tables, acc.ID); n != 0 {
		t.Errorf("after the running turn's append the account has %d conversation items, want 0", n)
	}
	if agents, err := s.ListAgents(ctx, acc.ID); err != nil || len(agents) != 0 {
		t.Errorf("after the purge the account has agents %v (%v), want none", agents, err)
	}
	if n := conversationItems(t, db, tables, other.ID); n != 4 {
		t.Errorf("the other account has %d conversation items, want its 4", n)
	}
	if got, err := s.AccountBySecret(ctx, otherSecret); err != nil || got.ID != other.ID {
		t.Errorf("the other account = %+v, %v; want it untouched", got, err)
	}

	if item := accountItem(t, db, tables, acc.ID); item == nil {
		t.Fatal("the tombstone is gone before the index settled")
	}
	done, err := s.PurgeAccount(ctx, acc.ID, store.Purge{Now: t0.Add(2 * time.Minute)})
	if err != nil || !done.Finished || done.Conversations != 0 {
		t.Fatalf("pass after the index settled = %+v, %v; want finished with nothing left to delete", done, err)
	}
	if item := accountItem(t, db, tables, acc.ID); item != nil {
		t.Errorf("the tombstone is still there after the finished purge: %v", item)
	}
	if again, err := s.PurgeAccount(ctx, acc.ID, store.Purge{Now: t0.Add(3 * time.Minute)}); err != nil || !again.Finished {
		t.Errorf("purging a purged account = %+v, %v; want finished", again, err)
	}
}

// A deleted account is a tombstone no account read or write finds.
func TestDeletedAccountIsNotFound(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	acc, secret, err := s.CreateAccount(ctx, "ada", now)
	if err != nil {
		t.Fatal(err)
	}
	// What decides who else may call it: its token key, its registered keys, its origins.
	if _, err := s.PutAccountTokenKey(ctx, acc.ID, store.TokenKey{ID: "key_1", Sealed: []byte("sealed"), Public: make([]byte, 32)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetIssuer(ctx, acc.ID, `{"keys":[]}`, "https://example.com/jwks", now); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOrigins(ctx, acc.ID, []string{"https://app.example.com"}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAccount(ctx, acc.ID, now); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"AccountAccess":  second(s.AccountAccess(ctx, acc.ID)),
		"SetIssuer":      s.SetIssuer(ctx, acc.ID, "", "", now),
		"SetOrigins":     s.SetOrigins(ctx, acc.ID, nil, now),
		"SetProviderKey": s.SetProviderKey(ctx, acc.ID, "openai", &store.ProviderKey{Sealed: []byte("sealed")}, now),
		"ProviderKeys":   second(s.ProviderKeys(ctx, acc.ID)),
		"DeleteAccount":  s.DeleteAccount(ctx, acc.ID, now),
		"Account":        second(s.Account(ctx, acc.ID)),
		"BySecret":       second(s.AccountBySecret(ctx, secret)),
		"RenameAccount":  second(s.RenameAccount(ctx, acc.ID, "x", now)),
		"RotateSecret":   second(s.RotateSecret(ctx, acc.ID, now)),
	} {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s of a deleted account = %v, want ErrNotFound", name, err)
		}
	}
	accs, _, err := s.ListAccounts(ctx, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(accs, func(a store.Account) bool { return a.ID == acc.ID }) {
		t.Errorf("ListAccounts lists the deleted account: %+v", accs)
	}
}

func second[T any](_ T, err error) error { return err }

// The sweeper's claim of a due purge holds for one retry period: two sweeps do not both queue it.
func TestDuePurgesAreClaimedOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t0 := time.Now()
	acc, _, err := s.CreateAccount(ctx, "ada", t0)
	if err != nil {
		t.Fatal(err)
	}
	live, _, err := s.CreateAccount(ctx, "eve", t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAccount(ctx, acc.ID, t0); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		at   time.Duration
		want []string
	}{
		{time.Minute, nil},                   // just queued by account-manage
		{11 * time.Minute, []string{acc.ID}}, // never purged: due again
		{12 * time.Minute, nil},              // claimed a minute ago
		{22 * time.Minute, []string{acc.ID}},
	} {
		got, err := s.ClaimDuePurges(ctx, t0.Add(tt.at), 100)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tt.want) || slices.Contains(got, live.ID) {
			t.Errorf("due purges at +%s = %v, want %v", tt.at, got, tt.want)
		}
	}
}

// failingDeletes refuses every DeleteItem while on: a purge cut short after it deleted a
// conversation's messages, before its head.
type failingDeletes struct {
	base dynamodb.HTTPClient
	on   atomic.Bool
}

func (f *failingDeletes) Do(req *http.Request) (*http.Response, error) {
	if !f.on.Load() || req.Header.Get("X-Amz-Target") != "DynamoDB_20120810.DeleteItem" {
		return f.base.Do(req)
	}
	body := `{"__type":"com.amazon.coral.validate#ValidationException","message":"injected failure"}`
	return &http.Response{
		StatusCode: http.StatusBadRequest, Request: req, ContentLength: int64(len(body)),
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:   io.NopCloser(strings.NewReader(body)),
	}, nil
}

// A purge cut short keeps the conversation's head, so the next pass finds it again, and holds
// its lease meanwhile: a turn that was running cannot add messages behind the purge, nor can a
// new one start.
func TestInterruptedPurgeFencesTheConversation(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	tables := testenv.Tables(t, db)
	s := store.New(db, tables)
	fail := &failingDeletes{}
	cut := store.New(dynamodb.New(db.Options(), func(o *dynamodb.Options) {
		fail.base = o.HTTPClient
		o.HTTPClient = fail
	}), tables)
	t0 := time.Now()
	acc, _, err := s.CreateAccount(ctx, "ada", t0)
	if err != nil {
		t.Fatal(err)
	}
	running, err := s.TakeLease(ctx, acc.ID, "c", "agent", t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := running.Append(ctx, text(model.RoleUser, "one"), text(model.RoleAssistant, "two")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAccount(ctx, acc.ID, t0); err != nil {
		t.Fatal(err)
	}
	fail.on.Store(true)
	if _, err := cut.PurgeAccount(ctx, acc.ID, store.Purge{Now: t0}); err == nil {
		t.Fatal("the cut purge succeeded, want its injected failure")
	}
	fail.on.Store(false)
	if n := conversationItems(t, db, tables, acc.ID); n != 1 {
		t.Fatalf("the cut purge left %d items, want the head alone", n)
	}
	if err := running.Append(ctx, text(model.RoleUser, "three")); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("append by the running turn after the cut purge = %v, want ErrLeaseLost", err)
	}
	if _, err := s.TakeLease(ctx, acc.ID, "c", "agent", t0.Add(2*time.Hour), t0.Add(3*time.Hour)); !errors.Is(err, store.ErrBusy) {
		t.Errorf("a new turn on the conversation being purged = %v, want ErrBusy", err)
	}
	res, err := s.PurgeAccount(ctx, acc.ID, store.Purge{Now: t0})
	if err != nil || res.Conversations != 1 {
		t.Fatalf("the next pass = %+v, %v; want it to find the conversation again", res, err)
	}
	if n := conversationItems(t, db, tables, acc.ID); n != 0 {
		t.Errorf("after the next pass the account has %d conversation items, want 0", n)
	}
}
