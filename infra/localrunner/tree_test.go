package localrunner_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
	turnpkg "github.com/agentharness/harness/shared/turn"
)

// conversations lists the account's conversations, read from the index the account purge
// reads.
func conversations(t *testing.T, stack *testenv.Resources, accountID string) []string {
	t.Helper()
	var out []string
	in := &dynamodb.QueryInput{
		TableName: aws.String(stack.Tables.Conversations), IndexName: aws.String("ByAccount"),
		KeyConditionExpression:    aws.String("accountId = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberS{Value: accountID}},
	}
	for p := dynamodb.NewQueryPaginator(stack.DB, in); p.HasMorePages(); {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			out = append(out, strings.TrimPrefix(it["conversationKey"].(*types.AttributeValueMemberS).Value, accountID+"#"))
		}
	}
	return out
}

// withMCPLoopback is a runner tune that lets agents call MCP servers on loopback (the runner's
// own /mcp among them).
func withMCPLoopback(o *localrunner.Options) {
	getenv := o.Getenv
	o.Getenv = func(k string) string {
		if k == "MCP_PRIVATE_ENDPOINTS" {
			return "allow"
		}
		return getenv(k)
	}
}

// sseText is the text and the tool outputs of an SSE turn's answer.
func sseText(t *testing.T, body []byte) (text string, outputs []string) {
	t.Helper()
	var b strings.Builder
	for _, c := range testenv.Chunks(t, bytes.NewReader(body)) {
		switch c["type"] {
		case "text-delta":
			b.WriteString(c["delta"].(string))
		case "tool-output-available":
			outputs = append(outputs, fmt.Sprint(c["output"]))
		case "tool-output-error":
			outputs = append(outputs, fmt.Sprint(c["errorText"]))
		}
	}
	return b.String(), outputs
}

// An agent whose MCP server is the harness's own POST /mcp, with its own secret, calls itself
// over and over: each call's turn joins the caller's turn tree one level down, and the call
// that would start the eleventh level is refused, so the recursion ends after the root and ten
// turns below it, and every one of them answers.
func TestTurnTreeBoundsRecursionThroughOwnMCP(t *testing.T) {
	e := newAsyncEnvOn(t, testenv.Stack(t), withMCPLoopback)
	stack, runner, accountID, secret := e.stack, e.srv, e.accountID, e.secret
	createAgent(t, runner, secret, `{"agentId":"loop","name":"loop","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"self__run_agent_loop","input":{"message":"again"}}]},
		{"text":"back"}]},
		"mcpServers":{"self":{"url":"`+runner.URL+`/mcp","bearerToken":"`+secret+`","timeoutMs":20000}}}`)

	res := call(t, runner, http.MethodPost, "/", secret, `{"agentId":"loop","message":"go"}`)
	if res.status != http.StatusOK {
		t.Fatalf("the root turn = %d %s", res.status, res.body)
	}
	if text, outputs := sseText(t, res.body); text != "back" || len(outputs) != 1 || !strings.Contains(outputs[0], "back") {
		t.Errorf("the root's answer %q with tool outputs %q, want its call answered and then its text", text, outputs)
	}
	limit := fmt.Sprintf("a tree may be %d deep", turnpkg.DefaultTreeMaxDepth)
	if n := e.logs.count("tool failed", nil); n != 1 || !strings.Contains(e.logs.dump(slog.LevelWarn), limit) {
		t.Errorf("%d tool calls failed, want one: the deepest, refused with %q; the log:\n%s", n, limit, e.logs.dump(slog.LevelWarn))
	}
	// Turns that outlived their caller would go on adding conversations: look twice.
	want := turnpkg.DefaultTreeMaxDepth + 1
	for range 2 {
		if n := len(conversations(t, stack, accountID)); n != want {
			t.Fatalf("the account has %d conversations of the agent, want %d: the root and %d levels below it", n, want, turnpkg.DefaultTreeMaxDepth)
		}
		time.Sleep(time.Second)
	}
}

// Blocking subagent calls three deep, three per turn, would run 1+3+9+27 = 40 turns from one
// request: the tree stops them at its turn limit, counted across every level, and the calls
// past it get the refusal as their result.
func TestTurnTreeBoundsSubagentFanOut(t *testing.T) {
	e := newAsyncEnvOn(t, testenv.Stack(t), nil)
	stack, runner, accountID, secret := e.stack, e.srv, e.accountID, e.secret
	createAgent(t, runner, secret, `{"agentId":"fan","name":"fan","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"fan","input":{"message":"one"}},{"name":"fan","input":{"message":"two"}},{"name":"fan","input":{"message":"three"}}]},
		{"text":"fanned: {{toolResults}}"}]},
		"subagent":{"maxDepth":3,"maxChildrenPerTurn":3,"agents":[{"name":"fan","agentId":"fan"}]}}`)

	res := call(t, runner, http.MethodPost, "/", secret, `{"agentId":"fan","message":"go"}`)
	if res.status != http.StatusOK {
		t.Fatalf("the root turn = %d %s", res.status, res.body)
	}
	text, _ := sseText(t, res.body)
	if n := len(conversations(t, stack, accountID)); n != turnpkg.DefaultTreeMaxTurns {
		t.Errorf("the request ran %d turns, want the tree's limit of %d", n, turnpkg.DefaultTreeMaxTurns)
	}
	limit := "as many as a tree may"
	if !strings.Contains(text, limit) {
		t.Errorf("the root's answer %q, want the refused calls' reason (%q) in it", text, limit)
	}
}

// A root turn that is stopped stops the turns below it: here a turn that a POST /mcp call
// started in another invocation, which would otherwise run on after its caller has gone.
func TestTurnTreeStopReachesTurnsBelow(t *testing.T) {
	e := newAsyncEnvOn(t, testenv.Stack(t), withMCPLoopback)
	stack, runner, accountID, secret := e.stack, e.srv, e.accountID, e.secret
	createAgent(t, runner, secret, `{"agentId":"slow","name":"slow","model":{"provider":"scripted","script":[{"delayMs":30000,"text":"late"}]}}`)
	createAgent(t, runner, secret, `{"agentId":"root","name":"root","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"self__run_agent_slow","input":{"message":"take your time"}}]},
		{"text":"done"}]},
		"mcpServers":{"self":{"url":"`+runner.URL+`/mcp","bearerToken":"`+secret+`","timeoutMs":60000}}}`)

	ctx, cancel := context.WithTimeout(context.Background(), asyncWait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, runner.URL+"/", strings.NewReader(`{"agentId":"root","id":"conv_tree_root","message":"go"}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		res, err := runner.Client().Do(req)
		if err == nil {
			_, err = bytes.NewBuffer(nil).ReadFrom(res.Body)
			res.Body.Close()
		}
		done <- err
	}()

	var slow string
	for slow == "" {
		if ctx.Err() != nil {
			t.Fatal("the slow agent's turn never started")
		}
		for _, c := range conversations(t, stack, accountID) {
			if c != "conv_tree_root" {
				slow = c
			}
		}
		time.Sleep(pollEvery)
	}
	time.Sleep(300 * time.Millisecond) // its model is thinking now
	if res := call(t, runner, http.MethodPost, "/chat/conv_tree_root/stop", secret, ``); res.status != http.StatusOK {
		t.Fatalf("stopping the root = %d %s", res.status, res.body)
	}
	if err := <-done; err != nil {
		t.Fatalf("the root's stream: %v", err)
	}
	// The slow turn thinks for 30 s; stopped, it ends within a few stop polls.
	deadline := time.Now().Add(8 * time.Second)
	for {
		status := eventStatusOf(t, stack, accountID, slow)
		if status == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn below the stopped root is %q 8 s after the stop, want cancelled", status)
		}
		time.Sleep(pollEvery)
	}
}

// eventStatusOf is the status of the event of the turn in conversationID ("" while none).
func eventStatusOf(t *testing.T, stack *testenv.Resources, accountID, conversationID string) string {
	t.Helper()
	out, err := stack.DB.Scan(context.Background(), &dynamodb.ScanInput{
		TableName:                 aws.String(stack.Tables.Events),
		FilterExpression:          aws.String("conversationId = :c AND begins_with(eventKey, :a)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberS{Value: conversationID}, ":a": &types.AttributeValueMemberS{Value: accountID + "#"}},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) == 0 {
		return ""
	}
	return out.Items[0]["status"].(*types.AttributeValueMemberS).Value
}

// A TreeHeader the harness did not make is refused before anything runs.
func TestTurnTreeForgedHeaderRefused(t *testing.T) {
	runner := serve(t, testenv.Stack(t), nil)
	_, secret := createAccount(t, runner, "tree-forged")
	req, _ := http.NewRequest(http.MethodPost, runner.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(turnpkg.TreeHeader, "eyJyIjoidHJlZV94IiwiZCI6MH0")
	res, err := runner.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(res.Body)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body.String(), turnpkg.TreeHeader) {
		t.Fatalf("a forged %s = %d %s, want 400 naming the header", turnpkg.TreeHeader, res.StatusCode, body.String())
	}
}
