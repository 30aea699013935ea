package agentstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

const (
	modelKey  = "sk-model-3c1d-do-not-leak"
	tavilyKey = "tvly-9e44-do-not-leak"
)

// keyedConfig holds a model key and a tool key.
const keyedConfig = `{
  "name": "researcher",
  "system": "You research things.",
  "model": {"provider":"openai","model":"gpt-4o-mini","apiKey":"` + modelKey + `"},
  "maxSteps": 4,
  "tools": {"current_time": {}, "tavilySearch": {"apiKey":"` + tavilyKey + `","maxResults":3}}
}`

// plainConfig holds no secret.
const plainConfig = `{"name":"plain","model":{"provider":"scripted","script":[{"text":"hi"}]},"tools":{"current_time":{}}}`

var testNow = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

type env struct {
	db     *dynamodb.Client
	tables store.Tables
	store  *store.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := testenv.DynamoDB(t)
	tables := testenv.Tables(t, db)
	// Agents are stored only for live accounts: the tests' accounts are items of the table.
	for _, id := range []string{"acc_1", "acc_2"} {
		_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &tables.Accounts, Item: map[string]types.AttributeValue{
			"accountId": &types.AttributeValueMemberS{Value: id}, "username": &types.AttributeValueMemberS{Value: id},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return &env{db: db, tables: tables, store: store.New(db, tables)}
}

// service returns a service over the env's store; sealer may be nil.
func (e *env) service(sealer agentstore.Sealer) *agentstore.Service {
	return agentstore.New(e.store, sealer, builtintools.ConfigChecks(), func() time.Time { return testNow })
}

// newBox seals with a fresh local key.
func newBox(*testing.T) *secrets.Box { return secrets.New(secrets.NewRandomLocal()) }

// asJSON decodes JSON into a generic value, for comparing documents whatever their layout.
func asJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return v
}

func TestCreateThenLoadReturnsTheSecrets(t *testing.T) {
	e := newEnv(t)
	svc := e.service(newBox(t))
	ctx := context.Background()
	v, err := svc.Create(ctx, "acc_1", "researcher", []byte(keyedConfig))
	if err != nil {
		t.Fatal(err)
	}
	if v.AgentID != "researcher" || v.Version != 1 || v.CreatedAt != testNow.Format(time.RFC3339) {
		t.Errorf("Create = %s version %d at %s, want researcher version 1 at %s", v.AgentID, v.Version, v.CreatedAt, testNow.Format(time.RFC3339))
	}
	if strings.Contains(string(v.Config), modelKey) || strings.Contains(string(v.Config), tavilyKey) {
		t.Errorf("Create returned a config with secrets: %s", v.Config)
	}
	if got, err := svc.Get(ctx, "acc_1", "researcher"); err != nil || strings.Count(string(got.Config), agentconfig.Redacted) != 2 {
		t.Errorf("Get = %s (err %v), want both secrets shown as %q", got.Config, err, agentconfig.Redacted)
	}

	cfg, err := svc.Load(ctx, "acc_1", "researcher")
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(asJSON(t, []byte(keyedConfig)), asJSON(t, loaded)); diff != "" {
		t.Errorf("Load (-created +loaded):\n%s", diff)
	}

	if _, err := svc.Load(ctx, "acc_2", "researcher"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Load from another account: err = %v, want store.ErrNotFound", err)
	}
	if _, err := svc.Create(ctx, "acc_1", "researcher", []byte(plainConfig)); !errors.Is(err, store.ErrExists) {
		t.Errorf("Create on a taken id: err = %v, want store.ErrExists", err)
	}
}

func TestSealedSecretsAreBoundToTheirAgent(t *testing.T) {
	e := newEnv(t)
	svc := e.service(newBox(t))
	ctx := context.Background()
	for _, k := range []struct{ account, agent string }{{"acc_1", "source"}, {"acc_1", "other"}, {"acc_2", "source"}} {
		if _, err := svc.Create(ctx, k.account, k.agent, []byte(keyedConfig)); err != nil {
			t.Fatal(err)
		}
	}
	source, err := e.store.Agent(ctx, "acc_1", "source")
	if err != nil {
		t.Fatal(err)
	}
	if len(source.Secrets) == 0 {
		t.Fatal("the source agent has no sealed secrets")
	}
	for _, tt := range []struct{ name, account, agent string }{
		{"another agent of the account", "acc_1", "other"},
		{"the same agent id in another account", "acc_2", "source"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 &e.tables.Agents,
				Key:                       map[string]types.AttributeValue{"accountId": &types.AttributeValueMemberS{Value: tt.account}, "agentId": &types.AttributeValueMemberS{Value: tt.agent}},
				UpdateExpression:          aws.String("SET secrets = :s"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberB{Value: source.Secrets}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Load(ctx, tt.account, tt.agent); err == nil || errors.Is(err, store.ErrNotFound) {
				t.Errorf("Load with a copied blob: err = %v, want an error opening the secrets", err)
			}
			if _, err := svc.Update(ctx, tt.account, tt.agent, []byte(`{"maxSteps":2}`)); err == nil {
				t.Error("Update over a copied blob succeeded, want an error opening the secrets")
			}
		})
	}
	// The original still opens.
	if _, err := svc.Load(ctx, "acc_1", "source"); err != nil {
		t.Errorf("Load of the source agent: %v", err)
	}
}

func TestUpdateFromAStaleVersionConflicts(t *testing.T) {
	e := newEnv(t)
	svc := e.service(newBox(t))
	ctx := context.Background()
	if _, err := svc.Create(ctx, "acc_1", "researcher", []byte(keyedConfig)); err != nil {
		t.Fatal(err)
	}
	stale, err := e.store.Agent(ctx, "acc_1", "researcher")
	if err != nil {
		t.Fatal(err)
	}
	v, err := svc.Update(ctx, "acc_1", "researcher", []byte(`{"system":"first writer"}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Version != 2 {
		t.Fatalf("Update version = %d, want 2", v.Version)
	}

	// A second writer that read version 1 must not overwrite the first.
	stale.Config = json.RawMessage(`{"name":"second writer","model":{"provider":"scripted","script":[{"text":"hi"}]}}`)
	if _, err := e.store.UpdateAgent(ctx, stale, testNow); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("UpdateAgent from version 1 after version 2 was written: err = %v, want store.ErrConflict", err)
	}
	got, err := svc.Load(ctx, "acc_1", "researcher")
	if err != nil {
		t.Fatal(err)
	}
	if got.System != "first writer" || got.Name != "researcher" {
		t.Errorf("after the conflict: name %q, system %q; want the first writer's researcher", got.Name, got.System)
	}
	if a, err := e.store.Agent(ctx, "acc_1", "researcher"); err != nil || a.Version != 2 {
		t.Errorf("stored version = %d (err %v), want 2", a.Version, err)
	}
}

func TestConcurrentUpdatesLoseNoWrite(t *testing.T) {
	e := newEnv(t)
	svc := e.service(newBox(t))
	ctx := context.Background()
	if _, err := svc.Create(ctx, "acc_1", "researcher", []byte(keyedConfig)); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		succeeded = map[int64]string{} // version → the system prompt written at it
	)
	for i := range writers {
		wg.Go(func() {
			system := "writer " + strconv.Itoa(i)
			v, err := svc.Update(ctx, "acc_1", "researcher", []byte(`{"system":"`+system+`"}`))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if prev, dup := succeeded[v.Version]; dup {
					t.Errorf("%s and %s both wrote version %d", prev, system, v.Version)
				}
				succeeded[v.Version] = system
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("%s: err = %v, want nil or store.ErrConflict", system, err)
			}
		})
	}
	wg.Wait()
	a, err := e.store.Agent(ctx, "acc_1", "researcher")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1 + len(succeeded)); a.Version != want {
		t.Errorf("version = %d after %d successful updates, want %d", a.Version, len(succeeded), want)
	}
	cfg, err := svc.Load(ctx, "acc_1", "researcher")
	if err != nil {
		t.Fatal(err)
	}
	if want := succeeded[a.Version]; cfg.System != want {
		t.Errorf("system = %q, want %q, the write of the latest version", cfg.System, want)
	}
}

func TestUpdateMissingAgent(t *testing.T) {
	e := newEnv(t)
	svc := e.service(newBox(t))
	ctx := context.Background()
	if _, err := svc.Update(ctx, "acc_1", "ghost", []byte(`{"maxSteps":2}`)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Update of a missing agent: err = %v, want store.ErrNotFound", err)
	}
	// Deleted between the read and the write.
	if _, err := svc.Create(ctx, "acc_1", "brief", []byte(plainConfig)); err != nil {
		t.Fatal(err)
	}
	a, err := e.store.Agent(ctx, "acc_1", "brief")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Delete(ctx, "acc_1", "brief"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.UpdateAgent(ctx, a, testNow); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateAgent of an agent deleted since the read: err = %v, want store.ErrNotFound", err)
	}
	if err := svc.Delete(ctx, "acc_1", "brief"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second Delete: err = %v, want store.ErrNotFound", err)
	}
}

func TestUpdateKeepsAndReplacesSecrets(t *testing.T) {
	e := newEnv(t)
	svc := e.service(newBox(t))
	ctx := context.Background()
	if _, err := svc.Create(ctx, "acc_1", "researcher", []byte(keyedConfig)); err != nil {
		t.Fatal(err)
	}
	keys := func() (string, string) {
		t.Helper()
		cfg, err := svc.Load(ctx, "acc_1", "researcher")
		if err != nil {
			t.Fatal(err)
		}
		var m, tv struct{ APIKey string }
		_ = json.Unmarshal(cfg.Model, &m)
		_ = json.Unmarshal(cfg.Tools["tavilySearch"], &tv)
		return m.APIKey, tv.APIKey
	}
	for _, tt := range []struct {
		name, patch           string
		wantModel, wantTavily string
	}{
		{"left out", `{"maxSteps":5}`, modelKey, tavilyKey},
		{"sent back redacted", `{"model":{"apiKey":"[redacted]"},"tools":{"tavilySearch":{"apiKey":"[redacted]","maxResults":4}}}`, modelKey, tavilyKey},
		{"replaced", `{"model":{"apiKey":"sk-new"}}`, "sk-new", tavilyKey},
		{"removed with its tool", `{"tools":{"tavilySearch":null}}`, "sk-new", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := svc.Update(ctx, "acc_1", "researcher", []byte(tt.patch))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{modelKey, tavilyKey, "sk-new"} {
				if strings.Contains(string(v.Config), s) {
					t.Errorf("Update returned secret %q: %s", s, v.Config)
				}
			}
			if m, tv := keys(); m != tt.wantModel || tv != tt.wantTavily {
				t.Errorf("keys = %q, %q; want %q, %q", m, tv, tt.wantModel, tt.wantTavily)
			}
		})
	}
	// The placeholder may keep a stored secret but never becomes one.
	_, err := svc.Update(ctx, "acc_1", "researcher", []byte(`{"tools":{"tavilySearch":{"apiKey":"[redacted]"}}}`))
	var fe *agentconfig.FieldError
	if !errors.As(err, &fe) || fe.Field != "tools.tavilySearch.apiKey" {
		t.Errorf("placeholder as a new secret: err = %v, want a FieldError at tools.tavilySearch.apiKey", err)
	}
}

func TestNoSealerRefusesSecrets(t *testing.T) {
	e := newEnv(t)
	svc := e.service(nil)
	ctx := context.Background()
	_, err := svc.Create(ctx, "acc_1", "researcher", []byte(keyedConfig))
	if err == nil || !strings.Contains(err.Error(), "no secret key is configured") {
		t.Fatalf("Create with secrets and no sealer: err = %v, want one saying no secret key is configured", err)
	}
	if strings.Contains(err.Error(), modelKey) || strings.Contains(err.Error(), tavilyKey) {
		t.Errorf("the error shows a secret: %v", err)
	}
	if _, err := svc.Get(ctx, "acc_1", "researcher"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refused agent: Get err = %v, want store.ErrNotFound", err)
	}

	v, err := svc.Create(ctx, "acc_1", "plain", []byte(plainConfig))
	if err != nil {
		t.Fatalf("Create without secrets and no sealer: %v", err)
	}
	cfg, err := svc.Load(ctx, "acc_1", "plain")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "plain" {
		t.Errorf("Load name = %q, want plain", cfg.Name)
	}
	if _, err := svc.Update(ctx, "acc_1", "plain", []byte(`{"tools":{"tavilySearch":{"apiKey":"`+tavilyKey+`"}}}`)); err == nil || !strings.Contains(err.Error(), "no secret key is configured") {
		t.Errorf("Update adding a secret with no sealer: err = %v, want one saying no secret key is configured", err)
	}
	if got, err := svc.Get(ctx, "acc_1", "plain"); err != nil || got.Version != v.Version {
		t.Errorf("after the refused Update: version %d (err %v), want %d", got.Version, err, v.Version)
	}
	if _, err := svc.Update(ctx, "acc_1", "plain", []byte(`{"maxSteps":3}`)); err != nil {
		t.Errorf("Update without secrets and no sealer: %v", err)
	}

	// A service without the key cannot open what one with it sealed.
	if _, err := e.service(newBox(t)).Create(ctx, "acc_1", "sealed", []byte(keyedConfig)); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Load(ctx, "acc_1", "sealed"); err == nil || !strings.Contains(err.Error(), "no secret key is configured") {
		t.Errorf("Load of sealed secrets with no sealer: err = %v, want one saying no secret key is configured", err)
	}
}
