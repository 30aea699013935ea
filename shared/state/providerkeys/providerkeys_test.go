package providerkeys_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/providerkeys"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

// An account's key is sealed on its item, bound to the account and the provider, fills only
// blocks that name no key, and is gone the moment the account is deleted.
func TestAccountKeys(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	tables := testenv.Tables(t, db)
	st := store.New(db, tables)
	keys := providerkeys.New(st, secrets.New(secrets.NewRandomLocal()))
	now := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	ada, _, err := st.CreateAccount(ctx, "ada", now)
	if err != nil {
		t.Fatal(err)
	}
	bob, _, err := st.CreateAccount(ctx, "bob", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Put(ctx, ada.ID, providerkeys.Key{Provider: "openai", APIKey: "sk-ada", BaseURL: "https://llm.example.com/v1"}, now); err != nil {
		t.Fatal(err)
	}
	if err := keys.Put(ctx, ada.ID, providerkeys.Key{Provider: "bedrock", APIKey: "x"}, now); !errors.Is(err, providerkeys.ErrUnknownProvider) {
		t.Errorf("a bedrock key: %v, want ErrUnknownProvider", err)
	}

	raw := func(id string) map[string]types.AttributeValue {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Accounts, Key: map[string]types.AttributeValue{"accountId": &types.AttributeValueMemberS{Value: id}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	stored := raw(ada.ID)["providerKey_openai"].(*types.AttributeValueMemberM).Value
	sealed := stored["key"].(*types.AttributeValueMemberB).Value
	if len(sealed) == 0 || string(sealed) == "sk-ada" || json.Valid(sealed) {
		t.Errorf("stored key %q: want it sealed", sealed)
	}
	// Copied to another account's item, the sealed key does not open there.
	if err := st.SetProviderKey(ctx, bob.ID, "openai", &store.ProviderKey{Sealed: sealed}, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Open(ctx, bob.ID, "openai"); err == nil {
		t.Error("ada's sealed key opened on bob's item, want it bound to ada")
	}
	if err := keys.Delete(ctx, bob.ID, "openai", now); err != nil {
		t.Fatal(err)
	}
	if err := keys.Delete(ctx, bob.ID, "openai", now); !errors.Is(err, providerkeys.ErrNoKey) {
		t.Errorf("deleting a key bob no longer has: %v, want ErrNoKey", err)
	}

	for _, tt := range []struct{ account, block, want string }{
		{ada.ID, `{"provider":"openai","model":"m"}`, `{"apiKey":"sk-ada","baseURL":"https://llm.example.com/v1","model":"m","provider":"openai"}`},
		{ada.ID, `{"provider":"openai","model":"m","baseURL":"https://own.example.com"}`, `{"apiKey":"sk-ada","baseURL":"https://own.example.com","model":"m","provider":"openai"}`},
		{ada.ID, `{"provider":"openai","model":"m","apiKey":"sk-own"}`, `{"provider":"openai","model":"m","apiKey":"sk-own"}`},
		{ada.ID, `{"provider":"anthropic","model":"m"}`, `{"provider":"anthropic","model":"m"}`},
		{bob.ID, `{"provider":"openai","model":"m"}`, `{"provider":"openai","model":"m"}`},
		{"acc_gone", `{"provider":"openai","model":"m"}`, `{"provider":"openai","model":"m"}`},
		// A fallback without a key of its own gets the account's too.
		{ada.ID, `{"provider":"anthropic","model":"m","fallbacks":[{"provider":"openai","model":"f"},{"provider":"openai","model":"g","apiKey":"sk-own"}]}`,
			`{"fallbacks":[{"apiKey":"sk-ada","baseURL":"https://llm.example.com/v1","model":"f","provider":"openai"},{"provider":"openai","model":"g","apiKey":"sk-own"}],"model":"m","provider":"anthropic"}`},
	} {
		got, err := keys.Fill(ctx, tt.account, json.RawMessage(tt.block))
		if err != nil || string(got) != tt.want {
			t.Errorf("Fill(%s, %s) = %s, %v; want %s", tt.account, tt.block, got, err, tt.want)
		}
	}

	list, err := keys.List(ctx, ada.ID)
	if diff := cmp.Diff([]providerkeys.Key{{Provider: "openai", BaseURL: "https://llm.example.com/v1", UpdatedAt: "2026-11-28T06:00:00Z"}}, list); err != nil || diff != "" {
		t.Errorf("List: %v (-want +got):\n%s", err, diff)
	}
	if err := st.DeleteAccount(ctx, ada.ID, now); err != nil {
		t.Fatal(err)
	}
	if v, ok := raw(ada.ID)["providerKey_openai"]; ok {
		t.Errorf("the deleted account's tombstone keeps its key: %v", v)
	}
	if _, err := keys.List(ctx, ada.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("List of a deleted account: %v, want ErrNotFound", err)
	}
}
