package channels_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const (
	slackToken    = "xoxb-1234-5678-AbCdEfGhIjKlMnOp"
	signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	telegramToken = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw8"
)

// stored is a channels store on the template's ChannelsTable, created for this test.
type stored struct {
	*channels.Store
	db    *dynamodb.Client
	table string
}

func newStore(t *testing.T) stored {
	t.Helper()
	stack := testenv.Stack(t)
	s, err := channels.FromConfig(stack.DB, secrets.New(secrets.NewRandomLocal()), stack.Name("ChannelsTable"))
	if err != nil || s == nil {
		t.Fatalf("FromConfig = %v, %v", s, err)
	}
	return stored{s, stack.DB, stack.Name("ChannelsTable")}
}

// raw is the binding's item as stored.
func (s stored) raw(t *testing.T, bindingID string) map[string]types.AttributeValue {
	t.Helper()
	out, err := s.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &s.table,
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "binding#" + bindingID}, "sk": &types.AttributeValueMemberS{Value: "binding"},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// partition lists the sort keys of the items under pk.
func (s stored) partition(t *testing.T, pk string) []string {
	t.Helper()
	out, err := s.db.Query(context.Background(), &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}},
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

func slackBinding(accountID, agentID string) channels.Binding {
	return channels.Binding{
		AccountID: accountID, Type: channels.Slack, AgentID: agentID, Approvers: []string{"U012AB3CD"}, MentionsOnly: true,
		BotUserID: "U0BOT", BotID: "B0BOT",
		Secrets: channels.Secrets{BotToken: slackToken, SigningSecret: signingSecret},
	}
}

func TestStoreBindings(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

	created, err := s.Create(ctx, slackBinding("acc_a", "helper"), t0)
	if err != nil {
		t.Fatal(err)
	}
	if !channels.ValidID(created.ID) || !strings.HasPrefix(created.ID, "chb_") || len(created.ID) != 47 || created.Version != 1 || !created.CreatedAt.Equal(t0) {
		t.Fatalf("Create = %+v; want a chb_ id of 32 random bytes, version 1, created at t0", created)
	}
	got, err := s.Get(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.AccountID != "acc_a" || got.Secrets != created.Secrets || !slices.Equal(got.Approvers, []string{"U012AB3CD"}) ||
		!got.MentionsOnly || got.BotUserID != "U0BOT" || got.BotID != "B0BOT" || !got.UpdatedAt.Equal(t0) {
		t.Errorf("Get = %+v, want what Create stored, secrets opened", got)
	}
	if _, err := s.Owned(ctx, "acc_a", created.ID); err != nil {
		t.Errorf("Owned by its account = %v", err)
	}
	if _, err := s.Owned(ctx, "acc_b", created.ID); !errors.Is(err, channels.ErrNotFound) {
		t.Errorf("Owned by another account = %v, want ErrNotFound", err)
	}

	// Sealed at rest: no secret's bytes are anywhere in the item.
	item := s.raw(t, created.ID)
	for name, v := range item {
		var b []byte
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			b = []byte(v.Value)
		case *types.AttributeValueMemberB:
			b = v.Value
		}
		for _, secret := range []string{slackToken, signingSecret, "AbCdEfGhIjKlMnOp"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("attribute %s holds %q in clear", name, secret)
			}
		}
	}

	// A second binding, created later, lists after the first; another account lists none.
	telegram := channels.Binding{AccountID: "acc_a", Type: channels.Telegram, AgentID: "helper", Approvers: []string{},
		BotUserID: "123456789", BotUsername: "helper_bot",
		Secrets: channels.Secrets{BotToken: telegramToken, WebhookSecret: channels.NewWebhookSecret()}}
	second, err := s.Create(ctx, telegram, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx, "acc_a")
	if err != nil || len(list) != 2 || list[0].ID != created.ID || list[1].ID != second.ID {
		t.Fatalf("List = %+v, %v; want both bindings, oldest first", list, err)
	}
	if list[0].Secrets != (channels.Secrets{}) || list[1].BotUsername != "helper_bot" || list[1].MentionsOnly {
		t.Errorf("List = %+v; want the bindings as stored, secrets not opened", list)
	}
	if other, err := s.List(ctx, "acc_b"); err != nil || len(other) != 0 || other == nil {
		t.Errorf("List of another account = %#v, %v; want an empty list", other, err)
	}

	// Update: secrets resealed, version bumped; an update from the old version conflicts.
	rotated := got
	rotated.Secrets.BotToken = "xoxb-9999-rotated"
	rotated.Approvers = nil
	t1 := t0.Add(time.Hour)
	updated, err := s.Update(ctx, rotated, t1)
	if err != nil || updated.Version != 2 || !updated.UpdatedAt.Equal(t1) || !updated.CreatedAt.Equal(t0) {
		t.Fatalf("Update = %+v, %v; want version 2, updated at t1", updated, err)
	}
	if again, err := s.Get(ctx, created.ID); err != nil || again.Secrets.BotToken != "xoxb-9999-rotated" || again.Secrets.SigningSecret != signingSecret || len(again.Approvers) != 0 {
		t.Errorf("Get after Update = %+v, %v; want the new token, the signing secret kept, no approvers", again, err)
	}
	if _, err := s.Update(ctx, got, t1); !errors.Is(err, channels.ErrConflict) {
		t.Errorf("Update from version 1 after version 2 = %v, want ErrConflict", err)
	}
	stolen := updated
	stolen.AccountID = "acc_b"
	if _, err := s.Update(ctx, stolen, t1); !errors.Is(err, channels.ErrNotFound) {
		t.Errorf("Update as another account = %v, want ErrNotFound", err)
	}
	retyped := updated
	retyped.Type, retyped.Secrets = channels.Telegram, telegram.Secrets
	if _, err := s.Update(ctx, retyped, t1); !errors.Is(err, channels.ErrNotFound) {
		t.Errorf("Update changing the type = %v, want ErrNotFound", err)
	}
	var inv *channels.InvalidError
	if _, err := s.Update(ctx, channels.Binding{ID: created.ID, AccountID: "acc_a", Type: channels.Slack, AgentID: "helper", Version: 2}, t1); !errors.As(err, &inv) || inv.Field != "botToken" {
		t.Errorf("Update without secrets = %v, want botToken refused", err)
	}

	// Delete: another account's is absent; the owner's goes with its index item.
	if err := s.Delete(ctx, "acc_b", created.ID); !errors.Is(err, channels.ErrNotFound) {
		t.Errorf("Delete by another account = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "acc_a", created.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "acc_a", created.ID); !errors.Is(err, channels.ErrNotFound) {
		t.Errorf("Delete twice = %v, want ErrNotFound", err)
	}
	for _, op := range []func() error{
		func() error { _, err := s.Get(ctx, created.ID); return err },
		func() error { _, err := s.Update(ctx, updated, t1); return err },
	} {
		if err := op(); !errors.Is(err, channels.ErrNotFound) {
			t.Errorf("a deleted binding: %v, want ErrNotFound", err)
		}
	}
	if sks := s.partition(t, "account#acc_a"); !slices.Equal(sks, []string{"binding#" + second.ID}) {
		t.Errorf("the account's index holds %v, want only the second binding", sks)
	}

	// DeleteAll, twice: nothing of the account is left.
	for range 2 {
		if err := s.DeleteAll(ctx, "acc_a"); err != nil {
			t.Fatal(err)
		}
	}
	if sks := s.partition(t, "account#acc_a"); len(sks) != 0 {
		t.Errorf("after DeleteAll the index holds %v", sks)
	}
	if _, err := s.Get(ctx, second.ID); !errors.Is(err, channels.ErrNotFound) {
		t.Errorf("Get after DeleteAll = %v, want ErrNotFound", err)
	}
}

func TestStoreRefusesInvalidBindings(t *testing.T) {
	s := newStore(t)
	b := slackBinding("acc_a", "helper")
	b.Approvers = []string{"U012AB3CD", "not-a-user"}
	var inv *channels.InvalidError
	if _, err := s.Create(context.Background(), b, time.Now()); !errors.As(err, &inv) || inv.Field != "approvers[1]" {
		t.Fatalf("Create with a bad approver = %v, want approvers[1] refused", err)
	}
	if _, err := s.Create(context.Background(), slackBinding("a#b", "helper"), time.Now()); err == nil {
		t.Error("Create for an account id off the grammar succeeded")
	}
	if sks := s.partition(t, "account#acc_a"); len(sks) != 0 {
		t.Errorf("a refused binding left %v", sks)
	}
}

// An id that NewID could not have made is ErrNotFound before any request reaches DynamoDB.
func TestMalformedIDsAreNotLookedUp(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer srv.Close()
	db := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(srv.URL), Region: "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("local", "local", ""),
		RetryMaxAttempts: 1,
	})
	s := channels.New(db, "ChannelsTable", secrets.New(secrets.NewRandomLocal()))
	ctx := context.Background()
	valid := channels.NewID()
	for _, id := range []string{"", "chb_", "chb_x", valid[:len(valid)-1], valid + "A", "agt_" + valid[4:], valid[:10] + "#" + valid[11:], valid[:10] + "/" + valid[11:], strings.Repeat("x", 3000)} {
		b := slackBinding("acc_a", "helper")
		b.ID = id
		for name, op := range map[string]func() error{
			"Get":    func() error { _, err := s.Get(ctx, id); return err },
			"Owned":  func() error { _, err := s.Owned(ctx, "acc_a", id); return err },
			"Update": func() error { _, err := s.Update(ctx, b, time.Now()); return err },
			"Delete": func() error { return s.Delete(ctx, "acc_a", id) },
		} {
			if err := op(); !errors.Is(err, channels.ErrNotFound) {
				t.Errorf("%s(%q) = %v, want ErrNotFound", name, id, err)
			}
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached DynamoDB, want none", n)
	}
	// The stand-in does answer, so the count above means something.
	if _, err := s.Get(ctx, valid); err == nil || errors.Is(err, channels.ErrNotFound) || requests.Load() == 0 {
		t.Errorf("Get of a well-formed id = %v after %d requests, want the stand-in's failure", err, requests.Load())
	}
}
