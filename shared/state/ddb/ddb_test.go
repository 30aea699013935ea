package ddb_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

func TestRead(t *testing.T) {
	item := map[string]types.AttributeValue{
		"s":     ddb.S("text"),
		"n":     ddb.N(-42),
		"big":   &types.AttributeValueMemberN{Value: "1e3"},
		"b":     &types.AttributeValueMemberBOOL{Value: true},
		"l":     ddb.L([]string{"a", "b"}),
		"mixed": &types.AttributeValueMemberL{Value: []types.AttributeValue{ddb.S("a"), ddb.N(1), ddb.S("c")}},
	}
	type got struct {
		String  string
		Int     int64
		IntErr  string
		Missing bool // the error is ErrNoNumber
		Bool    bool
		Strings []string
	}
	read := func(k string) got {
		n, err := ddb.Int(item, k)
		g := got{String: ddb.String(item, k), Int: n, Bool: ddb.Bool(item, k), Strings: ddb.Strings(item, k)}
		if err != nil {
			g.IntErr, g.Missing = err.Error(), errors.Is(err, ddb.ErrNoNumber)
		}
		return g
	}
	for _, tc := range []struct {
		key  string
		want got
	}{
		{"s", got{String: "text", IntErr: "no number attribute s", Missing: true}},
		{"n", got{Int: -42}},
		{"big", got{IntErr: `attribute big: strconv.ParseInt: parsing "1e3": invalid syntax`}},
		{"b", got{Bool: true, IntErr: "no number attribute b", Missing: true}},
		{"l", got{Strings: []string{"a", "b"}, IntErr: "no number attribute l", Missing: true}},
		{"mixed", got{Strings: []string{"a", "c"}, IntErr: "no number attribute mixed", Missing: true}},
		{"absent", got{IntErr: "no number attribute absent", Missing: true}},
	} {
		if diff := cmp.Diff(tc.want, read(tc.key)); diff != "" {
			t.Errorf("reading %q (-want +got):\n%s", tc.key, diff)
		}
	}
}

func TestConditionFailed(t *testing.T) {
	failed := fmt.Errorf("writing: %w", &types.ConditionalCheckFailedException{})
	if !ddb.ConditionFailed(failed) {
		t.Error("ConditionFailed(wrapped ConditionalCheckFailedException) = false, want true")
	}
	for _, err := range []error{nil, errors.New("other"), &types.TransactionCanceledException{}} {
		if ddb.ConditionFailed(err) {
			t.Errorf("ConditionFailed(%v) = true, want false", err)
		}
	}
}

func TestCancellations(t *testing.T) {
	canceled := fmt.Errorf("transaction: %w", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
		{Code: aws.String("None")}, {Code: aws.String("ConditionalCheckFailed")},
	}})
	var failed []int
	for i, r := range ddb.Cancellations(canceled) {
		if ddb.CheckFailed(r) {
			failed = append(failed, i)
		}
	}
	if diff := cmp.Diff([]int{1}, failed); diff != "" {
		t.Errorf("items cancelled by their condition (-want +got):\n%s", diff)
	}
	if r := ddb.Cancellations(&types.ConditionalCheckFailedException{}); r != nil {
		t.Errorf("Cancellations(not a transaction's) = %v, want nil", r)
	}
}
