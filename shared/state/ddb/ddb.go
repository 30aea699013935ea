// Package ddb is the DynamoDB attribute helpers the stores share: building string, number and
// string-list attributes, reading them back out of an item, and telling a write its condition
// refused; deleting items by key and reading them off an index. Each store keeps its own
// keys and item shapes.
package ddb

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// S is a string attribute.
func S(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// N is a number attribute.
func N(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// L is a list of string attributes.
func L(ss []string) types.AttributeValue {
	l := make([]types.AttributeValue, 0, len(ss))
	for _, s := range ss {
		l = append(l, S(s))
	}
	return &types.AttributeValueMemberL{Value: l}
}

// String is item's string attribute k; "" when it has none.
func String(item map[string]types.AttributeValue, k string) string {
	if v, ok := item[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// ErrNoNumber is Int's error for an item without the number attribute, which a reader of an
// optional attribute tells from a malformed one.
var ErrNoNumber = errors.New("no number attribute")

// Int is item's number attribute k, or an error when it has none or it is not an int64.
func Int(item map[string]types.AttributeValue, k string) (int64, error) {
	v, ok := item[k].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("%w %s", ErrNoNumber, k)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", k, err)
	}
	return n, nil
}

// Bool is item's boolean attribute k; false when it has none.
func Bool(item map[string]types.AttributeValue, k string) bool {
	v, ok := item[k].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}

// Strings is the strings of item's list attribute k, skipping elements of other types; nil
// when it has none.
func Strings(item map[string]types.AttributeValue, k string) []string {
	l, ok := item[k].(*types.AttributeValueMemberL)
	if !ok {
		return nil
	}
	var out []string
	for _, v := range l.Value {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			out = append(out, s.Value)
		}
	}
	return out
}

// ConditionFailed reports whether err is a write its condition expression refused.
func ConditionFailed(err error) bool {
	var failed *types.ConditionalCheckFailedException
	return errors.As(err, &failed)
}

// Cancellations are the reasons a transaction was cancelled, one per item in the transaction's
// order; nil when err is no cancellation.
func Cancellations(err error) []types.CancellationReason {
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) {
		return canceled.CancellationReasons
	}
	return nil
}

// CheckFailed reports whether a transaction's item was cancelled by its own condition.
func CheckFailed(r types.CancellationReason) bool {
	return aws.ToString(r.Code) == "ConditionalCheckFailed"
}
