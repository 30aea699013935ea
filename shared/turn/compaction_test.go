package turn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/tiktoken-go/tokenizer"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/agentharness/harness/shared/model/provider"
	"github.com/agentharness/harness/shared/model/scriptedmodel"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
)

// readUnits counts what a DynamoDB client reads as DynamoDB bills it: per GetItem or Query
// page, one read unit for each 4 KB (strongly consistent) of the items it returned.
type readUnits struct {
	mu    sync.Mutex
	units int
}

func (r *readUnits) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("countReads", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleInitialize(ctx, in)
		var items []map[string]types.AttributeValue
		switch o := out.Result.(type) {
		case *dynamodb.QueryOutput:
			items = o.Items
		case *dynamodb.GetItemOutput:
			if o.Item != nil {
				items = append(items, o.Item)
			}
		default:
			return out, md, err
		}
		size := 0
		for _, it := range items {
			size += itemSize(it)
		}
		r.mu.Lock()
		r.units += max(1, (size+4095)/4096)
		r.mu.Unlock()
		return out, md, err
	}), middleware.After)
}

func (r *readUnits) take() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.units
	r.units = 0
	return n
}

// itemSize is an item's size as DynamoDB counts it, near enough: names and values.
func itemSize(it map[string]types.AttributeValue) int {
	n := 0
	for k, v := range it {
		n += len(k)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)
		case *types.AttributeValueMemberM:
			n += itemSize(v.Value)
		case *types.AttributeValueMemberL:
			for _, e := range v.Value {
				n += itemSize(map[string]types.AttributeValue{"": e})
			}
		case *types.AttributeValueMemberSS:
			for _, s := range v.Value {
				n += len(s)
			}
		default:
			n += 8
		}
	}
	return n
}

// requestTokens counts a request's input with OpenAI's o200k encoding: its system prompt, tool
// specs and messages' text, reasoning, tool inputs and outputs.
func requestTokens(t *testing.T, req *model.Request) int {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	count := func(s string) int { n, _ := enc.Count(s); return n }
	n := count(req.System)
	for _, s := range req.Tools {
		n += count(s.Name) + count(s.Description) + count(string(s.InputSchema))
	}
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			n += count(p.Text) + count(p.ToolName) + count(string(p.Input)) + count(string(p.Output))
		}
	}
	return n
}

// A 300-turn conversation under "context": {"maxInputTokens": 8000}: no request passes the
// budget, every message stays stored, no call is sent without its result, and what a turn
// reads, with no message cached, stops growing once the conversation compacts.
func TestLongConversationStaysWithinItsBudget(t *testing.T) {
	const budget, turnsN = 8000, 300
	reads := &readUnits{}
	turns := testenv.NewTurns(t, func(ts *testenv.Turns, o *turn.Options) {
		db := dynamodb.New(ts.Stack.DB.Options(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, reads.middleware) })
		// Cold: every turn reads as a function that never served the conversation would.
		o.Store = store.New(db, ts.Stack.Tables).NoCache()
		o.Logger = slog.New(slog.DiscardHandler)
	})
	answer := strings.TrimSpace(strings.Repeat("The harness keeps every message and sends the model a summary of the oldest turns. ", 14)) // about 200 words
	script, _ := json.Marshal([]scriptedmodel.Step{{ToolCalls: []scriptedmodel.ToolCall{{Name: "current_time"}}}, {Text: answer}})
	system := "You answer at length. " + t.Name()
	turns.Agent("long", `{"name":"long","system":"`+system+`","model":{"provider":"scripted","script":`+string(script)+`},
		"tools":{"current_time":{"enabled":true}},"context":{"maxInputTokens":`+fmt.Sprint(budget)+`}}`)

	var readsAt = map[int]int{}
	var compacted int
	for i := 1; i <= turnsN; i++ {
		msg := &model.Message{ID: fmt.Sprintf("msg_user_%03d", i), Role: model.RoleUser,
			Parts: []model.Part{{Type: model.PartText, Text: fmt.Sprintf("Question %d: what time is it now, and what did we say before?", i)}}}
		reads.take()
		o, events := turns.Run("conv_long", "long", turn.Input{Message: msg})
		readsAt[i] = reads.take()
		if o.Status != turn.StatusCompleted {
			t.Fatalf("turn %d: %+v", i, o)
		}
		for _, ev := range events {
			if ev.Kind == turn.Loop && ev.Loop.Type == agent.Compacted {
				compacted++
				if ev.Loop.Text != scriptedmodel.Summary || ev.Loop.Compaction == nil || ev.Loop.Compaction.TokensAfter > budget {
					t.Errorf("turn %d compacted to %+v %q", i, ev.Loop.Compaction, ev.Loop.Text)
				}
			}
		}
	}
	if compacted == 0 {
		t.Fatal("300 turns of 200-word answers under a budget of 8000 tokens never compacted")
	}

	reqs := turns.RequestsOf(system)
	if len(reqs) != 2*turnsN {
		t.Errorf("%d model requests, want %d", len(reqs), 2*turnsN)
	}
	largest := 0
	for i, req := range reqs {
		n := requestTokens(t, req)
		largest = max(largest, n)
		if n > budget {
			t.Errorf("request %d sent %d tokens, more than the budget of %d", i, n, budget)
		}
		if r := req.Messages[0]; r.Role != model.RoleUser {
			t.Errorf("request %d begins with a %s message", i, r.Role)
		}
		for j, m := range req.Messages {
			for _, p := range m.Parts {
				if p.Type != model.PartToolCall {
					continue
				}
				next := model.Message{}
				if j+1 < len(req.Messages) {
					next = req.Messages[j+1]
				}
				if !hasResult(next, p.ToolCallID) {
					t.Fatalf("request %d sends call %s without its result after it", i, p.ToolCallID)
				}
			}
		}
	}

	history := turns.History("conv_long")
	users, summaries := 0, 0
	for _, m := range history {
		switch {
		case m.IsSummary():
			summaries++
		case m.StartsTurn():
			users++
			if want := fmt.Sprintf("msg_user_%03d", users); m.ID != want {
				t.Fatalf("stored user message %d is %s, want %s", users, m.ID, want)
			}
		}
	}
	if users != turnsN || summaries != compacted || len(history) != 4*turnsN+compacted {
		t.Errorf("stored %d messages (%d user, %d summaries), want every one of the %d turns' four and the %d summaries", len(history), users, summaries, turnsN, compacted)
	}
	t.Logf("%d compactions; largest request %d tokens; read units at turn 10: %d, 100: %d, 200: %d, 300: %d",
		compacted, largest, readsAt[10], readsAt[100], readsAt[200], readsAt[300])
	// The budget bounds what a turn reads: the last 50 turns read, a turn, no more than 1.25
	// times what turns 51 to 100 did.
	sum := func(from, to int) (n int) {
		for i := from; i <= to; i++ {
			n += readsAt[i]
		}
		return n
	}
	if late, mid := sum(turnsN-49, turnsN), sum(51, 100); 4*late > 5*mid {
		t.Errorf("the last 50 turns read %d units, more than 1.25 times the %d of turns 51 to 100", late, mid)
	}
}

func hasResult(m model.Message, callID string) bool {
	for _, p := range m.Parts {
		if p.Type == model.PartToolResult && p.ToolCallID == callID {
			return true
		}
	}
	return false
}

// A provider's refusal of a request as longer than its model's context window (the recorded
// fixtures of OpenAI and Anthropic) compacts the conversation and sends the request once more;
// the turn goes on, and a second refusal would end it.
func TestContextLengthRefusalCompactsAndRetriesOnce(t *testing.T) {
	for _, p := range []struct{ provider, dir, model string }{
		{"openai", "openaimodel", "gpt-4o-mini"},
		{"anthropic", "anthropicmodel", "claude-haiku-4-5"},
	} {
		t.Run(p.provider, func(t *testing.T) {
			refusal := wirefixture.Load(t, "../../model/"+p.dir+"/testdata/context_length.json")[0].Response
			answer := wirefixture.Load(t, "../../model/"+p.dir+"/testdata/text.json")[0].Response
			var mu sync.Mutex
			var sent []string // "summary", or the question a request ends with
			refused := 0
			srv := modeltest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case bytes.Contains(body, []byte("You compact conversations")):
					sent = append(sent, "summary")
				case bytes.Contains(body, []byte("Question 4")):
					// Refused every time: the turn compacts once, then fails.
					sent = append(sent, "question 4")
					refusal.ServeHTTP(w, r)
					return
				case bytes.Contains(body, []byte("Question 3")):
					sent = append(sent, "question 3")
					if refused == 0 {
						refused++
						refusal.ServeHTTP(w, r)
						return
					}
				default:
					sent = append(sent, "question")
				}
				answer.ServeHTTP(w, r)
			}))
			turns := testenv.NewTurns(t, func(ts *testenv.Turns, o *turn.Options) {
				o.Logger = slog.New(slog.DiscardHandler)
				o.Model = func(_ context.Context, _ string, block json.RawMessage) (agent.Model, error) {
					return provider.New(block, provider.Config{PrivateEndpoints: "allow", OpenAIKey: "sk-test"})
				}
			})
			base := srv.URL
			if p.provider == "openai" {
				base += "/v1"
			}
			turns.Agent("a", fmt.Sprintf(`{"name":"a","model":{"provider":%q,"model":%q,"apiKey":"sk-test","baseURL":%q}}`, p.provider, p.model, base))
			for i := 1; i <= 3; i++ {
				msg := &model.Message{ID: fmt.Sprintf("msg_q%d", i), Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: fmt.Sprintf("Question %d?", i)}}}
				o, events := turns.Run("conv_refused", "a", turn.Input{Message: msg})
				if o.Status != turn.StatusCompleted {
					t.Fatalf("turn %d: %+v", i, o)
				}
				if i == 3 && !slices.ContainsFunc(events, func(ev turn.Event) bool { return ev.Kind == turn.Loop && ev.Loop.Type == agent.Compacted }) {
					t.Error("the refused turn streamed no compaction")
				}
			}
			msg := &model.Message{ID: "msg_q4", Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "Question 4?"}}}
			if o, _ := turns.Run("conv_refused", "a", turn.Input{Message: msg}); o.Status != turn.StatusFailed || !strings.Contains(o.Error, "context window") {
				t.Errorf("a request refused after its compaction: %+v, want the turn failed saying why", o)
			}
			mu.Lock()
			got := slices.Clone(sent)
			mu.Unlock()
			if want := []string{"question", "question", "question 3", "summary", "question 3", "question 4", "summary", "question 4"}; !slices.Equal(got, want) {
				t.Errorf("the model was sent %v, want %v", got, want)
			}
			history := turns.History("conv_refused")
			if n := len(history); n != 9 || !history[5].IsSummary() || history[5].Compaction.KeptFrom != "msg_q3" {
				t.Errorf("stored %d messages %+v, want the first three turns' six with the summary before the third's answer (keeping from msg_q3), the fourth's message and its summary", n, history)
			}
		})
	}
}

// A turn whose own message alone passes the budget fails, naming context.maxInputTokens, and
// sends the model nothing.
func TestTurnPastItsBudgetIsRefused(t *testing.T) {
	turns := testenv.NewTurns(t, func(_ *testenv.Turns, o *turn.Options) { o.Logger = slog.New(slog.DiscardHandler) })
	system := "Small budget. " + t.Name()
	turns.Agent("small", `{"name":"small","system":"`+system+`","model":{"provider":"scripted","script":[{"text":"ok"}]},"context":{"maxInputTokens":1000}}`)
	o, _ := turns.Say("conv_small", "small", strings.Repeat("many words here ", 800))
	if o.Status != turn.StatusFailed || !strings.Contains(o.Error, "context.maxInputTokens") {
		t.Errorf("outcome %+v, want failed naming context.maxInputTokens", o)
	}
	if n := len(turns.RequestsOf(system)); n != 0 {
		t.Errorf("the model was sent %d requests", n)
	}
}

// A conversation deleted and begun again under its id is new: a warm function's cache of its
// messages (by conversation and epoch) gives the new one none of the old.
func TestConversationBegunAgainSeesNoneOfTheOld(t *testing.T) {
	turns := testenv.NewTurns(t, func(_ *testenv.Turns, o *turn.Options) { o.Logger = slog.New(slog.DiscardHandler) })
	system := "Again. " + t.Name()
	turns.Agent("again", `{"name":"again","system":"`+system+`","model":{"provider":"scripted","script":[{"text":"ok"}]}}`)
	for i := 1; i <= 2; i++ {
		msg := &model.Message{ID: fmt.Sprintf("msg_old_%d", i), Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "old"}}}
		turns.Run("conv_again", "again", turn.Input{Message: msg})
	}
	if err := turns.Engine.DeleteConversation(turns.Ctx, turns.Account, "conv_again"); err != nil {
		t.Fatal(err)
	}
	msg := &model.Message{ID: "msg_new", Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "new"}}}
	if o, _ := turns.Run("conv_again", "again", turn.Input{Message: msg}); o.Status != turn.StatusCompleted {
		t.Fatalf("the new conversation's turn: %+v", o)
	}
	reqs := turns.RequestsOf(system)
	if last := reqs[len(reqs)-1]; len(last.Messages) != 1 || last.Messages[0].ID != "msg_new" {
		t.Errorf("the new conversation's request sent %+v, want its own message alone", last.Messages)
	}
}
