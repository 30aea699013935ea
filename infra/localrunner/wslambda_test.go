package localrunner_test

import (
	"context"
	"encoding/json"
	"fmt"
	accountmanage "github.com/agentharness/harness/functions/account-manage/wire"
	asyncworker "github.com/agentharness/harness/functions/async-worker/wire"
	wsgateway "github.com/agentharness/harness/functions/ws-gateway/wire"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/agentharness/harness/infra/fakeapigw"
	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/appserver"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/wire/wsconn"
)

// apigw is ws-gateway and async-worker run as API Gateway and their queue invoke them, posting
// to a stand-in of the @connections endpoint with SigV4-signed requests that the stand-in
// verifies, and account-manage closing connections through the same endpoint.
type apigw struct {
	t    *testing.T
	fake *fakeapigw.Server
	g    *appserver.Gateway
	srv  *httptest.Server
	seen map[string]int
}

func onAPIGateway(t *testing.T) *apigw {
	creds := aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "test-secret-key"}
	fake := fakeapigw.New(creds, "us-east-1")
	endpoint := httptest.NewServer(fake)
	t.Cleanup(endpoint.Close)
	poster := &wsconn.Poster{Endpoint: endpoint.URL + "/live", Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, "")}

	stack := testenv.Stack(t)
	env := map[string]string{"ADMIN_SECRET": adminSecret}
	opts := stack.Options(func(k string) string { return env[k] })
	gateways := make(chan *appserver.Gateway, 1)
	opts.Functions = map[string]localrunner.Constructor{
		"WsGatewayFunction": func(d agentdeps.Deps) (localrunner.Handlers, error) {
			d.Poster = poster
			g, err := wsgateway.Gateway(d)
			if err == nil {
				gateways <- g
			}
			return localrunner.Handlers{}, err
		},
		"AsyncWorkerFunction": func(d agentdeps.Deps) (localrunner.Handlers, error) {
			d.Poster = poster
			w, err := asyncworker.Worker(d)
			if err != nil {
				return localrunner.Handlers{}, err
			}
			return localrunner.Handlers{SQS: w.Handle}, nil
		},
		"AccountManageFunction": func(d agentdeps.Deps) (localrunner.Handlers, error) {
			d.Poster = poster
			h, err := accountmanage.Handler(d)
			return localrunner.Handlers{HTTP: h}, err
		},
	}
	_, srv := testenv.Serve(t, opts)
	return &apigw{t: t, fake: fake, g: <-gateways, srv: srv, seen: map[string]int{}}
}

// invoke sends one route's event for connection conn; query is a name and a value.
func (a *apigw) invoke(route, conn, body string, headers map[string]string, query ...string) events.APIGatewayProxyResponse {
	a.t.Helper()
	var params map[string]string
	if len(query) == 2 {
		params = map[string]string{query[0]: query[1]}
	}
	out, err := a.g.HandleLambda(context.Background(), events.APIGatewayWebsocketProxyRequest{
		Body: body, Headers: headers, QueryStringParameters: params,
		RequestContext: events.APIGatewayWebsocketProxyRequestContext{RouteKey: route, ConnectionID: conn, DomainName: "example", Stage: "live"},
	})
	if err != nil {
		a.t.Fatalf("%s: %v", route, err)
	}
	return out
}

// await waits for a frame posted to conn that match accepts, after those it returned before,
// and returns it with the frames up to it.
func (a *apigw) await(conn, what string, match func(map[string]any) bool) (map[string]any, []map[string]any) {
	a.t.Helper()
	var frames []map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		msgs := a.fake.Messages(conn)
		for ; a.seen[conn] < len(msgs); a.seen[conn]++ {
			var m map[string]any
			if err := json.Unmarshal(msgs[a.seen[conn]], &m); err != nil {
				a.t.Fatalf("posted frame is not JSON: %s", msgs[a.seen[conn]])
			}
			frames = append(frames, m)
			if match(m) {
				a.seen[conn]++
				return m, frames
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.t.Fatalf("no %s posted; frames: %v", what, frames)
	return nil, nil
}

// TestWebSocketOnAPIGateway runs ws-gateway on API Gateway's events (onAPIGateway): a bad
// secret is refused at $connect, and a controller-owned tool goes round the whole way. Rotating
// the secret (account-manage, through the same endpoint) closes a passive stream connection of
// the old one with a signed DELETE.
func TestWebSocketOnAPIGateway(t *testing.T) {
	a := onAPIGateway(t)
	fake, srv, invoke := a.fake, a.srv, a.invoke
	_, secret := createAccount(t, srv, "apigw")
	agentID := createAgent(t, srv, secret, ticketAgent)

	if out := invoke("$connect", "bad=", "", map[string]string{"Authorization": "Bearer hsk_wrong"}); out.StatusCode != http.StatusUnauthorized {
		t.Errorf("$connect with a wrong secret = %d, want 401", out.StatusCode)
	}
	if out := invoke("$connect", "none=", "", nil); out.StatusCode != http.StatusUnauthorized {
		t.Errorf("$connect without a secret = %d, want 401", out.StatusCode)
	}
	const conn = "Zm9vYmFyMTIz="
	fake.Connect(conn)
	if out := invoke("$connect", conn, "", map[string]string{"authorization": "Bearer " + secret}); out.StatusCode != http.StatusOK {
		t.Fatalf("$connect = %d %s", out.StatusCode, out.Body)
	}
	await := func(what string, match func(map[string]any) bool) (map[string]any, []map[string]any) {
		t.Helper()
		return a.await(conn, what, match)
	}

	invoke("$default", conn, `{"type":"runtime_start","request_id":"rs","agent_id":"`+agentID+`","create_conversation":{"body":{}},"external_tools":[`+lookupTicket+`]}`, nil)
	m, _ := await("runtime_start_response", typeIs("runtime_start_response"))
	if m["success"] != true {
		t.Fatalf("runtime_start answered %v", m)
	}
	rt, _ := json.Marshal(m["runtime"])
	invoke("$default", conn, `{"type":"input","request_id":"in","runtime":`+string(rt)+`,"payload":{"kind":"create_message","messages":[{"role":"user","content":"LET-123?"}]}}`, nil)
	if m, _ := await("input_accepted", typeIs("input_accepted")); m["accepted"] != true {
		t.Fatalf("input answered %v", m)
	}
	req, _ := await("external_tool_call_request", typeIs("external_tool_call_request"))
	invoke("$default", conn, `{"type":"external_tool_call_response","request_id":"`+req["request_id"].(string)+`","result":{"content":[{"type":"text","text":"assigned to Support"}]}}`, nil)
	stop, frames := await("stop_reason", deltaIs("stop_reason"))
	if d := stop["delta"].(map[string]any); d["stop_reason"] != "end_turn" {
		t.Errorf("stop_reason %v", d)
	}
	var text strings.Builder
	for _, f := range frames {
		if d, _ := f["delta"].(map[string]any); d["message_type"] == "assistant_message" {
			text.WriteString(d["content"].(string))
		}
	}
	if !strings.Contains(text.String(), "assigned to Support") {
		t.Errorf("the answer %q does not carry the controller's result", text.String())
	}

	invoke("$disconnect", conn, "", nil)
	invoke("$default", conn, `{"type":"app_server_info","request_id":"after"}`, nil)
	if m, _ := await("an error after $disconnect", typeIs("error")); !strings.Contains(m["error"].(string), "not registered") {
		t.Errorf("a frame after $disconnect answered %v", m)
	}

	const passive = "cGFzc2l2ZTEy="
	fake.Connect(passive)
	if out := invoke("$connect", passive, "", map[string]string{"Authorization": "Bearer " + secret}, "channel", "stream"); out.StatusCode != http.StatusOK {
		t.Fatalf("$connect on the stream channel = %d %s", out.StatusCode, out.Body)
	}
	if res := call(t, srv, http.MethodPost, "/accounts/me/rotate-secret", secret, ""); res.status != http.StatusOK {
		t.Fatalf("rotating the secret = %d %s", res.status, res.body)
	}
	posted := fake.Messages(passive)
	if !fake.Deleted(passive) || len(posted) != 1 || !strings.Contains(string(posted[0]), "deleted or its secret rotated") {
		t.Errorf("after the rotation the stream connection was deleted: %v, and got %q; want it told and deleted", fake.Deleted(passive), posted)
	}
}

// On API Gateway, an end-user token comes in the Sec-WebSocket-Protocol header, the offered
// subprotocols in one value, and $connect returns the one the harness takes, which API Gateway
// answers the upgrade with; the token is never sent back. A token socket may not create
// agents; once its token expires, its next frame gets an error and the connection is deleted.
func TestWebSocketTokenOnAPIGateway(t *testing.T) {
	a := onAPIGateway(t)
	_, secret := createAccount(t, a.srv, "apigw-token")
	greeter := createAgent(t, a.srv, secret, greeterAgent)
	tok, exp := mintToken(t, a.srv, secret, "dana", []string{greeter}, 3)

	if out := a.invoke("$connect", "bare=", "", map[string]string{"Sec-WebSocket-Protocol": appserver.BearerPrefix + tok}); out.StatusCode != http.StatusBadRequest {
		t.Errorf("$connect offering the token alone = %d %s, want 400", out.StatusCode, out.Body)
	}
	const conn = "dG9rZW4xMjM0="
	a.fake.Connect(conn)
	out := a.invoke("$connect", conn, "", map[string]string{"Sec-WebSocket-Protocol": strings.Join(tokenProtocols(tok), ", ")})
	if out.StatusCode != http.StatusOK || out.Headers["Sec-WebSocket-Protocol"] != appserver.Subprotocol || strings.Contains(out.Body+fmt.Sprint(out.Headers), tok) {
		t.Fatalf("$connect with a token = %d %v %q, want 200 answering the subprotocol %s alone", out.StatusCode, out.Headers, out.Body, appserver.Subprotocol)
	}
	a.invoke("$default", conn, `{"type":"runtime_start","request_id":"mine","create_agent":{"body":{"name":"mine"}},"create_conversation":{"body":{}}}`, nil)
	if m, _ := a.await(conn, "runtime_start_response", typeIs("runtime_start_response")); m["success"] != false || !strings.Contains(m["error"].(string), "create_agent") {
		t.Errorf("create_agent with a token answered %v, want it refused", m)
	}
	a.invoke("$default", conn, `{"type":"runtime_start","request_id":"rs","agent_id":"`+greeter+`","create_conversation":{"body":{}}}`, nil)
	if m, _ := a.await(conn, "runtime_start_response", typeIs("runtime_start_response")); m["success"] != true {
		t.Fatalf("runtime_start with a token answered %v", m)
	}
	time.Sleep(time.Until(exp))
	a.invoke("$default", conn, `{"type":"app_server_info","request_id":"late"}`, nil)
	if m, _ := a.await(conn, "an error frame", typeIs("error")); !strings.Contains(m["error"].(string), "token expired") || m["request_id"] != nil {
		t.Errorf("a frame after the token expired answered %v, want the expiry's error", m)
	}
	if !a.fake.Deleted(conn) {
		t.Error("the connection of an expired token was not deleted")
	}
}
