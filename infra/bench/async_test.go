package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The benchmark reads the worker's records through Logger.With attributes, as the worker logs
// them, and only those that carry a groupId.
func TestEventLogRecordsContinuations(t *testing.T) {
	l := newEventLog()
	log := slog.New(l.handler(slog.DiscardHandler)).With("function", "AsyncWorkerFunction")
	log.With("eventId", "evt_1").Info("turn waits for async tools", "groupId", "ag_1")
	log.With("groupId", "ag_1").Info("continuation started", "results", 3)
	log.With("eventId", "evt_1").Info("pass finished") // the first turn's pass: no group
	log.With("groupId", "ag_1").Info("pass finished")
	log.With("groupId", "ag_1").Info("continuation started") // a second record keeps the first time
	log.With("groupId", "ag_1").Debug("continuation started")

	groups, err := l.waitGroups(context.Background(), []string{"evt_1"}, time.Second)
	if err != nil || groups["evt_1"] != "ag_1" {
		t.Fatalf("waitGroups = %v, %v; want evt_1 → ag_1", groups, err)
	}
	answered, err := l.waitAnswers(context.Background(), []string{"ag_1"}, time.Second)
	if err != nil || answered["ag_1"].IsZero() {
		t.Fatalf("waitAnswers = %v, %v; want ag_1's pass", answered, err)
	}
	started, ok := l.at("continuation started", "ag_1")
	if !ok || !started.Before(answered["ag_1"]) || l.count("continuation started") != 2 || l.count("pass finished") != 1 {
		t.Errorf("continuation started at %v (%v), answered %v, counts %d and %d; want the first start before the answer, 2 starts and 1 pass",
			started, ok, answered["ag_1"], l.count("continuation started"), l.count("pass finished"))
	}
	if _, err := l.waitAnswers(context.Background(), []string{"ag_2"}, 50*time.Millisecond); err == nil {
		t.Error("waitAnswers for a group that never continued returned no error")
	}
}

func TestParallel(t *testing.T) {
	var ran atomic.Int64
	if err := parallel(context.Background(), 100, 7, func(context.Context, int) error { ran.Add(1); return nil }); err != nil || ran.Load() != 100 {
		t.Errorf("parallel ran %d of 100, err %v", ran.Load(), err)
	}
	boom := errors.New("boom")
	err := parallel(context.Background(), 1000, 4, func(ctx context.Context, i int) error {
		if i == 3 {
			return boom
		}
		<-ctx.Done()
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("parallel = %v, want the first error", err)
	}
}

func TestWriteMeter(t *testing.T) {
	m := &writeMeter{tables: map[string]*units{}}
	m.add(&types.ConsumedCapacity{TableName: aws.String("a"), CapacityUnits: aws.Float64(3),
		GlobalSecondaryIndexes: map[string]types.Capacity{"Due": {CapacityUnits: aws.Float64(2)}}})
	before := m.snapshot()
	m.add(&types.ConsumedCapacity{TableName: aws.String("a"), CapacityUnits: aws.Float64(1), Table: &types.Capacity{CapacityUnits: aws.Float64(1)}})
	m.add(&types.ConsumedCapacity{TableName: aws.String("b"), CapacityUnits: aws.Float64(2)})
	m.add(nil)
	got := m.since(before)
	if len(got) != 2 || got["a"] != (units{1, 0}) || got["b"] != (units{2, 0}) || before["a"] != (units{1, 2}) {
		t.Errorf("before %v, since %v; want a: 1 table + 2 index, then a: 1 and b: 2", before, got)
	}
}
