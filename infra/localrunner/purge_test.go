package localrunner_test

import (
	"context"
	"encoding/json"
	asyncworker "github.com/agentharness/harness/functions/async-worker/wire"
	"github.com/agentharness/harness/infra/faketelegram"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const chatty = `{"name":"chatty","model":{"provider":"scripted","script":[{"text":"hi"}]}}`

// TestDeletingAnAccountPurgesItsConversations: DELETE /accounts/me answers 204, the secret stops
// working at once, and async-worker soon deletes every item of the account's conversations, its
// skills' and workspaces' rows and objects, its channel bindings and its kept tool results, while another
// account's stay. With short invocations the purge runs out of time after each
// conversation and goes on in the next message it queues.
func TestDeletingAnAccountPurgesItsConversations(t *testing.T) {
	for _, tt := range []struct {
		name string
		// invocation is how long async-worker's invocations get; 0 keeps the template's.
		invocation time.Duration
		wantPasses int
	}{
		{name: "one pass", wantPasses: 1},
		// Shorter than the purge's margin: each pass purges one conversation.
		{name: "short invocations", invocation: 5 * time.Second, wantPasses: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stack := testenv.Stack(t)
			// The binding's token is checked with a local stand-in of the Bot API.
			tg := httptest.NewServer(faketelegram.New(&faketelegram.Options{Token: telegramToken, BotID: 4242, BotUsername: "harness_bot"}))
			t.Cleanup(tg.Close)
			env := map[string]string{"ADMIN_SECRET": adminSecret, "TELEGRAM_API_URL": tg.URL, "MCP_PRIVATE_ENDPOINTS": "allow"}
			bigURL := testenv.BigMCPServer(t)
			opts := stack.Options(func(k string) string { return env[k] })
			var mu sync.Mutex
			passes := map[string]int{} // purge messages received, by account
			opts.Functions = map[string]localrunner.Constructor{
				"AsyncWorkerFunction": func(d agentdeps.Deps) (localrunner.Handlers, error) {
					w, err := asyncworker.Worker(d)
					if err != nil {
						return localrunner.Handlers{}, err
					}
					return localrunner.Handlers{SQS: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
						for _, rec := range ev.Records {
							var m struct{ Type, AccountID string }
							if json.Unmarshal([]byte(rec.Body), &m) == nil && m.Type == "purge" {
								mu.Lock()
								passes[m.AccountID]++
								mu.Unlock()
							}
						}
						if tt.invocation > 0 {
							var cancel context.CancelFunc
							ctx, cancel = context.WithTimeout(ctx, tt.invocation)
							defer cancel()
						}
						return w.Handle(ctx, ev)
					}}, nil
				},
			}
			_, srv := testenv.Serve(t, opts)

			id, secret := createAccount(t, srv, "ada")
			otherID, otherSecret := createAccount(t, srv, "eve")
			for _, s := range []string{secret, otherSecret} {
				if res := call(t, srv, http.MethodPost, "/accounts/me/agents", s, `{"agentId":"chatty",`+chatty[1:]); res.status != http.StatusCreated {
					t.Fatalf("creating the agent = %d %s", res.status, res.body)
				}
				for range 2 { // two versions, two objects
					if res := call(t, srv, http.MethodPost, "/accounts/me/skills", s, string(filesJSON(t, "SKILL.md", releaseNotesMD))); res.status/100 != 2 {
						t.Fatalf("uploading a skill = %d %s", res.status, res.body)
					}
				}
				if res := call(t, srv, http.MethodPost, "/accounts/me/workspaces", s, `{"name":"notes"}`); res.status != http.StatusCreated {
					t.Fatalf("creating a workspace = %d %s", res.status, res.body)
				}
				if res := call(t, srv, http.MethodPut, "/accounts/me/workspaces/notes/files/a.txt", s, "a"); res.status != http.StatusCreated {
					t.Fatalf("writing a workspace's file = %d %s", res.status, res.body)
				}
				if res := call(t, srv, http.MethodPost, "/accounts/me/channels", s, `{"type":"telegram","agentId":"chatty","botToken":"`+telegramToken+`"}`); res.status != http.StatusCreated {
					t.Fatalf("binding a channel = %d %s", res.status, res.body)
				}
				// A tool result too large for its conversation is kept in the results bucket.
				big := createAgent(t, srv, s, bigAgent(bigURL))
				if res := call(t, srv, http.MethodPost, "/", s, `{"agentId":"`+big+`","id":"conv-big","message":"go"}`); res.status != http.StatusOK {
					t.Fatalf("the turn of the agent with a large result = %d %s", res.status, res.body)
				}
			}
			if n := toolResultObjects(t, stack, id); n != 1 {
				t.Fatalf("the account keeps %d tool results, want 1", n)
			}
			if rows, objects := skillItems(t, stack, id); rows != 1 || objects != 2 {
				t.Fatalf("the account has %d skill rows and %d objects, want 1 and 2", rows, objects)
			}
			// The head and versions 0 and 1; the empty tree, the tree of version 1 and its file.
			if rows, objects := workspaceItems(t, stack, id); rows != 3 || objects != 3 {
				t.Fatalf("the account has %d workspace rows and %d objects, want 3 and 3", rows, objects)
			}
			if n := channelItems(t, stack, id); n != 2 {
				t.Fatalf("the account has %d items in ChannelsTable, want its binding and its index item", n)
			}
			for _, conv := range []string{"conv-1", "conv-2"} {
				turn(t, srv, secret, conv)
			}
			turn(t, srv, otherSecret, "conv-1")
			if n := len(heads(t, stack, id)); n != 3 {
				t.Fatalf("ByAccount lists %d conversations of the account, want 3", n)
			}
			otherItems := testenv.ConversationItems(t, stack.DB, stack.Tables.Conversations, otherID)
			if len(otherItems) == 0 {
				t.Fatal("the other account has no conversation items")
			}

			if res := call(t, srv, http.MethodDelete, "/accounts/me", secret, ""); res.status != http.StatusNoContent {
				t.Fatalf("DELETE /accounts/me = %d %s, want 204", res.status, res.body)
			}
			if res := call(t, srv, http.MethodGet, "/accounts/me", secret, ""); res.status != http.StatusUnauthorized {
				t.Errorf("the deleted account's secret: GET /accounts/me = %d %s, want 401", res.status, res.body)
			}
			if res := call(t, srv, http.MethodPost, "/", secret, `{"agentId":"chatty","message":"hi"}`); res.status != http.StatusUnauthorized {
				t.Errorf("the deleted account's secret: POST / = %d %s, want 401", res.status, res.body)
			}

			deadline := time.Now().Add(20 * time.Second)
			for len(testenv.ConversationItems(t, stack.DB, stack.Tables.Conversations, id)) > 0 || len(heads(t, stack, id)) > 0 || skillsLeft(t, stack, id) || workspacesLeft(t, stack, id) ||
				channelItems(t, stack, id) > 0 || toolResultObjects(t, stack, id) > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("20 s after the deletion the account still has conversation items %v (heads in ByAccount: %d), skills %v, workspaces %v, channel items %d, tool results %d",
						testenv.ConversationItems(t, stack.DB, stack.Tables.Conversations, id), len(heads(t, stack, id)), skillsLeft(t, stack, id), workspacesLeft(t, stack, id),
						channelItems(t, stack, id), toolResultObjects(t, stack, id))
				}
				time.Sleep(100 * time.Millisecond)
			}
			mu.Lock()
			got := passes[id]
			mu.Unlock()
			if got < tt.wantPasses {
				t.Errorf("the purge took %d passes, want at least %d", got, tt.wantPasses)
			}
			if rows, objects := skillItems(t, stack, otherID); rows != 1 || objects != 2 {
				t.Errorf("the other account has %d skill rows and %d objects after the purge, want its 1 and 2", rows, objects)
			}
			if rows, objects := workspaceItems(t, stack, otherID); rows != 3 || objects != 3 {
				t.Errorf("the other account has %d workspace rows and %d objects after the purge, want its 3 and 3", rows, objects)
			}
			if n := channelItems(t, stack, otherID); n != 2 {
				t.Errorf("the other account has %d items in ChannelsTable after the purge, want its 2", n)
			}
			if n := toolResultObjects(t, stack, otherID); n != 1 {
				t.Errorf("the other account keeps %d tool results after the purge, want its 1", n)
			}
			if after := testenv.ConversationItems(t, stack.DB, stack.Tables.Conversations, otherID); len(after) != len(otherItems) {
				t.Errorf("the other account has %d conversation items after the purge, want its %d", len(after), len(otherItems))
			}
			if res := call(t, srv, http.MethodGet, "/accounts/me", otherSecret, ""); res.status != http.StatusOK {
				t.Errorf("the other account: GET /accounts/me = %d %s, want 200", res.status, res.body)
			}
		})
	}
}

// turn runs one turn of the agent chatty on conversation conv and reads it to its end.
func turn(t *testing.T, srv *httptest.Server, secret, conv string) {
	t.Helper()
	res := call(t, srv, http.MethodPost, "/", secret, `{"agentId":"chatty","id":"`+conv+`","message":"hello"}`)
	if res.status != http.StatusOK {
		t.Fatalf("turn on %s = %d %s, want 200", conv, res.status, res.body)
	}
}

// skillItems counts an account's rows in SkillsTable and its objects in SkillsBucket.
func skillItems(t *testing.T, stack *testenv.Resources, accountID string) (rows, objects int) {
	t.Helper()
	return accountItems(t, stack, "SkillsTable", "SkillsBucket", "skills/", accountID)
}

func skillsLeft(t *testing.T, stack *testenv.Resources, accountID string) bool {
	t.Helper()
	rows, objects := skillItems(t, stack, accountID)
	return rows+objects > 0
}

// workspaceItems counts an account's rows in WorkspacesTable and its objects in WorkspacesBucket.
func workspaceItems(t *testing.T, stack *testenv.Resources, accountID string) (rows, objects int) {
	t.Helper()
	return accountItems(t, stack, "WorkspacesTable", "WorkspacesBucket", "workspaces/", accountID)
}

func workspacesLeft(t *testing.T, stack *testenv.Resources, accountID string) bool {
	t.Helper()
	rows, objects := workspaceItems(t, stack, accountID)
	return rows+objects > 0
}

// accountItems counts an account's rows in table (keyed by accountId) and its objects in bucket
// under prefix<accountId>/.
func accountItems(t *testing.T, stack *testenv.Resources, table, bucket, prefix, accountID string) (rows, objects int) {
	t.Helper()
	ctx := context.Background()
	out, err := stack.DB.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(stack.Name(table)),
		KeyConditionExpression:    aws.String("accountId = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberS{Value: accountID}},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := stack.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(stack.Name(bucket)), Prefix: aws.String(prefix + accountID + "/")})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Items), len(keys.Contents)
}

// channelItems counts an account's bindings and index items in ChannelsTable.
func channelItems(t *testing.T, stack *testenv.Resources, accountID string) int {
	t.Helper()
	out, err := stack.DB.Scan(context.Background(), &dynamodb.ScanInput{
		TableName:        aws.String(stack.Name("ChannelsTable")),
		FilterExpression: aws.String("accountId = :a OR pk = :index"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":a": &types.AttributeValueMemberS{Value: accountID}, ":index": &types.AttributeValueMemberS{Value: "account#" + accountID},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Items)
}

// heads lists the conversation heads of an account in the index ByAccount.
func heads(t *testing.T, stack *testenv.Resources, accountID string) []map[string]types.AttributeValue {
	t.Helper()
	out, err := stack.DB.Query(context.Background(), &dynamodb.QueryInput{
		TableName:                 &stack.Tables.Conversations,
		IndexName:                 aws.String("ByAccount"),
		KeyConditionExpression:    aws.String("accountId = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberS{Value: accountID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Items
}

// Work a deleted account left on the queue (an /async turn, a continuation) is dropped: run,
// it would write a conversation after the purge had looked.
func TestDeletedAccountsWorkIsDropped(t *testing.T) {
	stack := testenv.Stack(t)
	srv, w, held := serveHoldingTurns(t, stack)

	id, secret := createAccount(t, srv, "ada")
	if res := call(t, srv, http.MethodPost, "/accounts/me/agents", secret, `{"agentId":"chatty",`+chatty[1:]); res.status != http.StatusCreated {
		t.Fatalf("creating the agent = %d %s", res.status, res.body)
	}
	if res := call(t, srv, http.MethodPost, "/async", secret, `{"agentId":"chatty","id":"later","message":"hello"}`); res.status != http.StatusAccepted {
		t.Fatalf("POST /async = %d %s, want 202", res.status, res.body)
	}
	var turnMsg events.SQSMessage
	select {
	case turnMsg = <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the /async turn never reached the worker")
	}
	if res := call(t, srv, http.MethodDelete, "/accounts/me", secret, ""); res.status != http.StatusNoContent {
		t.Fatalf("DELETE /accounts/me = %d %s, want 204", res.status, res.body)
	}

	out, err := w.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{turnMsg}})
	if err != nil || len(out.BatchItemFailures) != 0 {
		t.Fatalf("the deleted account's turn: %+v, %v; want it dropped, not retried", out, err)
	}
	if items := testenv.ConversationItems(t, stack.DB, stack.Tables.Conversations, id); len(items) != 0 {
		t.Errorf("the deleted account's turn ran and wrote %v", items)
	}
}
