package localrunner_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/mockopenai"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// deletionModel answers the agents of the deletion test by their model name and the latest user
// message: doomer makes, in one step, an outside job, a call held for approval and a call of
// its subagent kid (whose message says whether kid finishes or stalls); kid calls grandkid and
// then answers, or stalls until the test ends; the others answer at once.
func deletionModel(stalled chan<- struct{}, release <-chan struct{}) mockopenai.Script {
	return func(r *mockopenai.Request) mockopenai.Reply {
		last, results := "", 0
		for _, m := range r.Messages {
			switch m.Role {
			case "user":
				last, results = m.Text(), 0
			case "tool":
				results++
			}
		}
		switch {
		case r.Model == "doomer" && results == 0 && strings.HasPrefix(last, "dispatch "):
			return mockopenai.Reply{ToolCalls: []mockopenai.ToolCall{
				{Function: mockopenai.FunctionCall{Name: "test_external_async", Arguments: `{"echo":"job"}`}},
				{Function: mockopenai.FunctionCall{Name: "current_time", Arguments: `{}`}},
				{Function: mockopenai.FunctionCall{Name: "kid", Arguments: `{"message":"` + strings.TrimPrefix(last, "dispatch ") + `"}`}},
			}}
		case r.Model == "kid" && results == 0:
			return mockopenai.Reply{ToolCalls: []mockopenai.ToolCall{{Function: mockopenai.FunctionCall{Name: "grandkid", Arguments: `{"message":"deeper"}`}}}}
		case r.Model == "kid" && last == "stall":
			stalled <- struct{}{}
			<-release
			return mockopenai.Reply{Text: "too late"}
		}
		return mockopenai.Reply{Text: r.Model + " answers"}
	}
}

// DELETE /conversations/{id} leaves nothing of the conversation in any table or bucket: its
// messages and head, its turns' events and streams, its approvals (answered and pending), its
// async rows and groups (completed with a response kept in S3, and running), its variables, its
// file, its subagents' conversations and theirs, with what hangs from them, and the turn of a
// subagent still running, stopped by the deletion. The account's other conversation is left as
// it was. A second DELETE is 404, the deleted turn's /status is 404, and a late completion of
// its outside job is 404 and writes nothing, nor does the sweeper after it.
func TestDeletingAConversationLeavesNothingOfIt(t *testing.T) {
	stalled, release := make(chan struct{}, 4), make(chan struct{})
	mock := httptest.NewServer(mockopenai.New(&mockopenai.Options{Script: deletionModel(stalled, release)}))
	t.Cleanup(mock.Close)
	t.Cleanup(func() { close(release) })
	e := newAsyncEnvOn(t, testenv.Stack(t), func(o *localrunner.Options) {
		o.ScheduleEvery = 100 * time.Millisecond
		getenv := o.Getenv
		o.Getenv = func(k string) string {
			if k == "MODEL_PRIVATE_ENDPOINTS" {
				return "allow" // the model is on loopback
			}
			return getenv(k)
		}
	})
	block := func(name string) string {
		return `{"provider": "openai", "model": "` + name + `", "apiKey": "k", "baseURL": "` + mock.URL + `/v1"}`
	}
	grandkid := e.agent(t, `{"name": "grandkid", "model": `+block("grandkid")+`}`)
	kid := e.agent(t, `{"name": "kid", "model": `+block("kid")+`, "subagent": {"agents": [{"name": "grandkid", "agentId": "`+grandkid+`"}]}}`)
	doomer := e.agent(t, `{"name": "doomer", "model": `+block("doomer")+`,
		"tools": {"test_external_async": {"async": true, "execution": "external-dispatch"}, "current_time": {"needsApproval": true}},
		"subagent": {"agents": [{"name": "kid", "agentId": "`+kid+`", "blocking": false}]}}`)
	keeper := e.agent(t, `{"name": "keeper", "model": `+block("keeper")+`}`)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	doomed, kept := "conv-doomed-"+suffix, "conv-kept-"+suffix

	// The conversation that stays: a turn with a variable and a file.
	e.waitStatus(t, e.async(t, `{"agentId":"`+keeper+`","id":"`+kept+`","variables":{"COLOR":"blue"},"message":"hello"}`).EventID, store.EventCompleted)
	e.waitStatus(t, e.async(t, fileMessage(keeper, kept, "data:image/png;base64,"+base64.StdEncoding.EncodeToString(pixel))).EventID, store.EventCompleted)

	// Turn 1: the job completes with a response kept in S3, the held call is approved, kid and
	// grandkid answer.
	first := e.async(t, `{"agentId":"`+doomer+`","id":"`+doomed+`","variables":{"COLOR":"red"},"message":"dispatch finish"}`)
	held, _ := e.waitStatus(t, first.EventID, store.EventWaiting)
	if len(held.PendingApprovals) != 1 {
		t.Fatalf("turn 1 holds %+v, want one approval", held.PendingApprovals)
	}
	e.async(t, `{"agentId":"`+doomer+`","id":"`+doomed+`","eventId":"`+first.EventID+`","approvals":[{"approvalId":"`+held.PendingApprovals[0].ApprovalID+`","approved":true}]}`)
	e.waitStatus(t, first.EventID, store.EventWaitingAsync)
	j := e.jobs(t, 1)[0]
	big := `{"status":"completed","response":{"echo":"` + strings.Repeat("x", 40<<10) + `"}}`
	if res := call(t, e.srv, http.MethodPost, "/async-tools/"+j.ResultID+"/complete", j.Token, big); res.status/100 != 2 {
		t.Fatalf("completing turn 1's job = %d %s", res.status, res.body)
	}
	done, _ := e.waitStatus(t, first.EventID, store.EventCompleted)
	// Turn 2: a file.
	e.waitStatus(t, e.async(t, fileMessage(doomer, doomed, "data:image/png;base64,"+base64.StdEncoding.EncodeToString(pixel))).EventID, store.EventCompleted)
	// Turn 3: its job runs, its held call waits, and kid's turn is running (stalled) when the
	// conversation is deleted.
	third := e.async(t, `{"agentId":"`+doomer+`","id":"`+doomed+`","message":"dispatch stall"}`)
	waiting, _ := e.waitStatus(t, third.EventID, store.EventWaiting)
	pending := e.jobs(t, 1)[0]
	select {
	case <-stalled:
	case <-time.After(asyncWait):
		t.Fatal("kid's turn never reached its stalling model call")
	}

	// Everything the deletion must find: the conversations of the tree, its events, its calls.
	gone := []string{doomed, first.EventID, third.EventID, j.ResultID, pending.ResultID, held.PendingApprovals[0].ApprovalID, waiting.PendingApprovals[0].ApprovalID}
	for _, s := range []status{done, waiting} {
		for _, c := range s.Children {
			gone = append(gone, c.ThreadID, c.EventID)
			for _, gc := range e.status(t, c.EventID).Children {
				gone = append(gone, gc.ThreadID)
			}
		}
	}
	if n := len(gone); n != 7+2*3 {
		t.Fatalf("the tree names %d ids, want the conversation, 2 events, 2 calls, 2 approvals and 2 kids with their events and grandkids: %v", n, gone)
	}
	before := stored(t, e.stack)
	for _, id := range gone {
		if len(mentions(before, id)) == 0 {
			t.Fatalf("nothing stored mentions %s before the deletion", id)
		}
	}
	for _, want := range []string{"attachments/" + e.accountID + "/" + doomed + "/", "results/" + j.ResultID + "/"} {
		if len(mentions(before, want)) == 0 {
			t.Fatalf("the bucket holds nothing under %s before the deletion", want)
		}
	}
	keptBefore := mentions(before, kept)

	if res := call(t, e.srv, http.MethodDelete, "/conversations/"+doomed, e.secret, ""); res.status != http.StatusNoContent {
		t.Fatalf("DELETE /conversations/%s = %d %s, want 204", doomed, res.status, res.body)
	}
	if res := call(t, e.srv, http.MethodPost, "/async-tools/"+pending.ResultID+"/complete", pending.Token, `{"status":"completed","response":"late"}`); res.status != http.StatusNotFound {
		t.Errorf("a late completion of the deleted conversation's job = %d %s, want 404", res.status, res.body)
	}
	if res := call(t, e.srv, http.MethodGet, "/status/"+first.EventID, e.secret, ""); res.status != http.StatusNotFound {
		t.Errorf("GET /status of the deleted conversation's event = %d %s, want 404", res.status, res.body)
	}
	if res := call(t, e.srv, http.MethodDelete, "/conversations/"+doomed, e.secret, ""); res.status != http.StatusNotFound || !strings.Contains(string(res.body), "conversation "+doomed+" not found") {
		t.Errorf("a second DELETE = %d %s, want 404 naming the conversation", res.status, res.body)
	}
	time.Sleep(time.Second) // the sweeper runs every 100 ms meanwhile

	after := stored(t, e.stack)
	for _, id := range gone {
		if left := mentions(after, id); len(left) > 0 {
			t.Errorf("after the deletion %d stored things mention %s, want none: %v", len(left), id, left)
		}
	}
	if keptAfter := mentions(after, kept); strings.Join(keptAfter, "\n") != strings.Join(keptBefore, "\n") {
		t.Errorf("the other conversation's things changed:\nbefore %v\nafter  %v", keptBefore, keptAfter)
	}
	if len(keptBefore) == 0 {
		t.Error("nothing stored mentions the other conversation")
	}
	if res := call(t, e.srv, http.MethodGet, "/status/"+e.async(t, `{"agentId":"`+keeper+`","id":"`+kept+`","message":"still here"}`).EventID, e.secret, ""); res.status != http.StatusOK {
		t.Errorf("the other conversation's next turn: GET /status = %d %s", res.status, res.body)
	}
}

// stored is every item of every table of the template and every object of every bucket (its
// key and body), as text, each prefixed with where it is, sorted.
func stored(t *testing.T, stack *testenv.Resources) []string {
	t.Helper()
	ctx := context.Background()
	var all []string
	for _, tbl := range stack.Template.Tables() {
		name := stack.Name(tbl.LogicalID)
		for p := dynamodb.NewScanPaginator(stack.DB, &dynamodb.ScanInput{TableName: &name, ConsistentRead: new(true)}); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, item := range page.Items {
				all = append(all, tbl.LogicalID+": "+itemText(item))
			}
		}
	}
	for _, b := range stack.Template.Buckets() {
		bucket := stack.Name(b.LogicalID)
		for p := s3.NewListObjectsV2Paginator(stack.S3, &s3.ListObjectsV2Input{Bucket: &bucket}); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Contents {
				obj, err := stack.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: o.Key})
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(obj.Body)
				obj.Body.Close()
				all = append(all, b.LogicalID+": "+*o.Key+"\n"+string(body))
			}
		}
	}
	sort.Strings(all)
	return all
}

// mentions are the stored things whose text holds s, each cut to its first 300 bytes.
func mentions(all []string, s string) []string {
	var found []string
	for _, a := range all {
		if strings.Contains(a, s) {
			found = append(found, a[:min(len(a), 300)])
		}
	}
	return found
}
