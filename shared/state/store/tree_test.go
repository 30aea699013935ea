package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/state/store"
)

// A tree holds at most maxTurns turns, its root included; a member that joins again (a retried
// call) is not counted twice, even once the tree is full; a stopped tree takes no one and gives
// back its members, across accounts.
func TestTurnTreeCountsMembersAndStops(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	root := fmt.Sprintf("tree_%d", time.Now().UnixNano())
	member := func(i int) store.TreeMember {
		return store.TreeMember{AccountID: fmt.Sprintf("acc%d", i%2), ConversationID: fmt.Sprintf("conv_%d", i), Key: fmt.Sprintf("evt_%d", i)}
	}
	const maxTurns = 4
	for i := range maxTurns - 1 {
		if err := s.JoinTree(ctx, root, member(i), maxTurns, now, time.Hour); err != nil {
			t.Fatalf("joining as turn %d of %d: %v", i+2, maxTurns, err)
		}
	}
	if err := s.JoinTree(ctx, root, member(0), maxTurns, now, time.Hour); err != nil {
		t.Fatalf("joining again as the same member of a full tree: %v, want it counted once and allowed", err)
	}
	if err := s.JoinTree(ctx, root, member(9), maxTurns, now, time.Hour); !errors.Is(err, store.ErrTreeFull) {
		t.Fatalf("joining a full tree = %v, want ErrTreeFull", err)
	}
	if stopped, err := s.TreeStopped(ctx, root); err != nil || stopped {
		t.Fatalf("TreeStopped before the stop = %v, %v", stopped, err)
	}
	members, err := s.StopTree(ctx, root, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(members, func(a, b store.TreeMember) int { return strings.Compare(a.Key, b.Key) })
	want := []store.TreeMember{member(0), member(1), member(2)}
	if !slices.Equal(members, want) {
		t.Fatalf("StopTree gave members %v, want %v", members, want)
	}
	if stopped, err := s.TreeStopped(ctx, root); err != nil || !stopped {
		t.Fatalf("TreeStopped after the stop = %v, %v; want true", stopped, err)
	}
	if err := s.JoinTree(ctx, root, member(0), maxTurns, now, time.Hour); !errors.Is(err, store.ErrTreeStopped) {
		t.Fatalf("joining a stopped tree = %v, want ErrTreeStopped", err)
	}

	// A tree stopped before anything joined it refuses a join that comes after.
	empty := root + "_empty"
	if members, err := s.StopTree(ctx, empty, now, time.Hour); err != nil || len(members) != 0 {
		t.Fatalf("stopping a tree with no members = %v, %v", members, err)
	}
	if err := s.JoinTree(ctx, empty, member(1), maxTurns, now, time.Hour); !errors.Is(err, store.ErrTreeStopped) {
		t.Fatalf("joining a tree stopped before it had members = %v, want ErrTreeStopped", err)
	}
}
