package main

// The long conversation: one conversation of longTurns turns on an agent whose context
// budget makes it compact, measured turn by turn, on a warm function (its store keeps the
// messages it read and wrote) and on a cold one (every turn reads its conversation from the
// table). What a turn costs should not grow with the conversation: the turns at its end are
// compared with its first ones.

import (
	"context"
	"fmt"
	"io"
	"log"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentharness/harness/functions/turnwire"
	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/shared/edge/chathttp"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

const (
	longTurns = 300
	// longWindow is how many turns are reported at each end of the conversation.
	longWindow = 10
	// longBudget is the agent's context.maxInputTokens.
	longBudget = 8000
)

// longAgent calls current_time through the scripted model, then answers in about 200 words,
// within a budget of longBudget input tokens; the scripted model answers a summary request
// with a fixed line (scriptedmodel.Summary).
func longAgent() map[string]any {
	answer := strings.TrimSpace(strings.Repeat("The harness keeps every message and sends the model a summary of the oldest turns. ", 14))
	return map[string]any{
		"name":   "long conversation",
		"system": "You answer at length.",
		"model": map[string]any{"provider": "scripted", "script": []any{
			map[string]any{"toolCalls": []any{map[string]any{"name": "current_time"}}},
			map[string]any{"text": answer},
		}},
		"tools":   map[string]any{"current_time": map[string]bool{"enabled": true}},
		"context": map[string]int{"maxInputTokens": longBudget},
	}
}

// turnCost is what one turn of the long conversation cost.
type turnCost struct {
	cpu, latency time.Duration
	reads        int // DynamoDB read units (readMeter)
	compactions  int
}

// longRun is the long conversation on one kind of function.
type longRun struct {
	name  string
	turns []turnCost
}

// runLongConversation runs the long conversation warm, then cold, each on tables of its own.
func runLongConversation(ctx context.Context, root string) ([]longRun, error) {
	kinds := []struct {
		name    string
		handler localrunner.Constructor // nil: as the function builds it
	}{
		{"warm (messages cached)", nil},
		{"cold (every message read)", coldHandler},
	}
	var runs []longRun
	for _, k := range kinds {
		log.Printf("measuring a %d-turn conversation, %s", longTurns, k.name)
		meter := &readMeter{}
		s, err := startHarness(ctx, root, harnessOptions{agent: longAgent(), handler: k.handler, apiOptions: []func(*middleware.Stack) error{meter.middleware}})
		if err != nil {
			return nil, err
		}
		turns, err := converse(ctx, s, meter)
		s.srv.Close()
		if err != nil {
			return nil, fmt.Errorf("the long conversation, %s: %w", k.name, err)
		}
		runs = append(runs, longRun{name: k.name, turns: turns})
	}
	return runs, nil
}

// longWarmup is how many turns of another conversation warm the process and DynamoDB Local up
// before the measured one begins: its first turns would otherwise pay for both starting.
const longWarmup = 20

// converse runs longTurns turns of one conversation on s, one at a time, and measures each: the
// process's CPU, the read units of every DynamoDB read made while it ran, and its latency.
func converse(ctx context.Context, s *harnessServer, meter *readMeter) ([]turnCost, error) {
	run := fmt.Sprintf("long-%d", time.Now().UnixNano())
	for i := range longWarmup {
		if _, err := s.post(ctx, run+"-warmup", question(i+1)); err != nil {
			return nil, fmt.Errorf("warm-up turn %d: %w", i+1, err)
		}
	}
	runtime.GC() // so the rows before are not collected on this one's time
	turns := make([]turnCost, longTurns)
	for i := range turns {
		msg := question(i + 1)
		readsBefore := meter.units.Load()
		cpuBefore, err := cpuTime()
		if err != nil {
			return nil, err
		}
		start := time.Now()
		compactions, err := s.post(ctx, run, msg)
		if err != nil {
			return nil, fmt.Errorf("turn %d: %w", i+1, err)
		}
		latency := time.Since(start)
		cpuAfter, err := cpuTime()
		if err != nil {
			return nil, err
		}
		turns[i] = turnCost{cpu: cpuAfter - cpuBefore, latency: latency, reads: int(meter.units.Load() - readsBefore), compactions: compactions}
	}
	return turns, nil
}

func question(n int) string {
	return fmt.Sprintf("Question %d: what time is it now, and what did we say before?", n)
}

// coldHandler builds harness-processing as its wire.Handler does, on a store that keeps no
// message (store.NoCache), so every turn reads its conversation as a function that never
// served it would. The bench deploys no channels, whose webhook wire.Handler would add.
func coldHandler(d agentdeps.Deps) (localrunner.Handlers, error) {
	opts, err := turnwire.Options(d)
	if err != nil {
		return localrunner.Handlers{}, err
	}
	opts.Store = opts.Store.NoCache()
	who, err := turnwire.Callers(d, opts.Store)
	if err != nil {
		return localrunner.Handlers{}, err
	}
	h := chathttp.New(chathttp.Options{Options: opts, Callers: who, Deployment: turnwire.Deployment(d), AccountKeys: turnwire.AccountKeys(d, opts.Store)})
	return localrunner.Handlers{HTTP: h}, nil
}

// readMeter counts a DynamoDB client's reads in read units as DynamoDB bills strongly
// consistent reads: per GetItem, Query page or BatchGetItem page, one unit for each 4 KB of the
// items it returned, at least one (as shared/turn's compaction test counts them).
type readMeter struct {
	units atomic.Int64
}

// middleware is an APIOptions entry for a DynamoDB client.
func (m *readMeter) middleware(s *middleware.Stack) error {
	return s.Initialize.Add(middleware.InitializeMiddlewareFunc("benchReadMeter", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		var items []map[string]types.AttributeValue
		switch r := out.Result.(type) {
		case *dynamodb.GetItemOutput:
			if r.Item != nil {
				items = append(items, r.Item)
			}
		case *dynamodb.QueryOutput:
			items = r.Items
		case *dynamodb.BatchGetItemOutput:
			for _, table := range r.Responses {
				items = append(items, table...)
			}
		default:
			return out, md, err
		}
		m.units.Add(int64(readUnits(items)))
		return out, md, err
	}), middleware.After)
}

// readUnits is what one read returning items costs: a unit per 4 KB begun, at least one.
func readUnits(items []map[string]types.AttributeValue) int {
	size := 0
	for _, it := range items {
		size += itemSize(it)
	}
	return max(1, (size+4095)/4096)
}

// itemSize is an item's size as DynamoDB counts it, near enough: its attributes' names and
// values.
func itemSize(it map[string]types.AttributeValue) int {
	n := 0
	for k, v := range it {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + itemSize(v.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	}
	return 1 // BOOL, NULL; other sets are not stored by the harness
}

// longWindowStats is a span of the long conversation's turns: their mean CPU and read units, the
// p50 of their latencies and their compactions.
type longWindowStats struct {
	from, to     int // turn numbers, from 1
	cpuMs, reads float64
	p50Ms        float64
	compactions  int
}

// window sums up turns from to to (numbered from 1, both included).
func window(turns []turnCost, from, to int) longWindowStats {
	w := longWindowStats{from: from, to: to}
	span := turns[from-1 : to]
	lat := make([]float64, len(span))
	for i, t := range span {
		w.cpuMs += ms(t.cpu)
		w.reads += float64(t.reads)
		w.compactions += t.compactions
		lat[i] = ms(t.latency)
	}
	n := float64(len(span))
	w.cpuMs, w.reads = w.cpuMs/n, w.reads/n
	slices.Sort(lat)
	w.p50Ms = percentile(lat, 50)
	return w
}

// printLongConversation prints, for each run, its first and last longWindow turns, their ratio
// (the measure: within 1.25×) and the whole conversation.
func printLongConversation(w io.Writer, runs []longRun) {
	fmt.Fprintln(w, "| function | turns | CPU ms/turn | DynamoDB read units/turn | p50 ms | compactions |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: |")
	for _, r := range runs {
		n := len(r.turns)
		first, last, all := window(r.turns, 1, longWindow), window(r.turns, n-longWindow+1, n), window(r.turns, 1, n)
		for _, s := range []longWindowStats{first, last} {
			fmt.Fprintf(w, "| %s | %d–%d | %.3f | %.1f | %.3f | %d |\n", r.name, s.from, s.to, s.cpuMs, s.reads, s.p50Ms, s.compactions)
		}
		fmt.Fprintf(w, "| %s | %d–%d / %d–%d | %.2f× | %.2f× | %.2f× | |\n", r.name, last.from, last.to, first.from, first.to,
			last.cpuMs/first.cpuMs, last.reads/first.reads, last.p50Ms/first.p50Ms)
		fmt.Fprintf(w, "| %s | all %d | %.3f | %.1f | %.3f | %d |\n", r.name, n, all.cpuMs, all.reads, all.p50Ms, all.compactions)
	}
	for _, r := range runs {
		n := len(r.turns)
		fmt.Fprintf(w, "\n%s: read units at turn %d, %d: %d, %d.", r.name, longWindow, n, r.turns[longWindow-1].reads, r.turns[n-1].reads)
	}
	fmt.Fprintln(w)
}
