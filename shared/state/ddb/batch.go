package ddb

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// maxBatchWrite is BatchWriteItem's limit on requests in one call.
const maxBatchWrite = 25

// Delete deletes the items of table by key, retrying what DynamoDB leaves unprocessed (under
// throttling) with backoff until ctx ends. A key with no item is no error.
func Delete(ctx context.Context, db *dynamodb.Client, table string, keys []map[string]types.AttributeValue) error {
	for start := 0; start < len(keys); start += maxBatchWrite {
		reqs := make([]types.WriteRequest, 0, maxBatchWrite)
		for _, k := range keys[start:min(start+maxBatchWrite, len(keys))] {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
		}
		pending := map[string][]types.WriteRequest{table: reqs}
		for wait := 50 * time.Millisecond; len(pending) > 0; wait = min(2*wait, 2*time.Second) {
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return fmt.Errorf("deleting items of %s: %w", table, err)
			}
			if pending = out.UnprocessedItems; len(pending) == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("deleting items of %s: %w", table, ctx.Err())
			case <-time.After(wait):
			}
		}
	}
	return nil
}

// Indexed returns the items of table's index whose attribute attr (the index's hash key) is
// value, as the index projects them.
func Indexed(ctx context.Context, db *dynamodb.Client, table, index, attr, value string) ([]map[string]types.AttributeValue, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &table,
		IndexName:                 aws.String(index),
		KeyConditionExpression:    aws.String("#a = :v"),
		ExpressionAttributeNames:  map[string]string{"#a": attr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": S(value)},
	}
	var items []map[string]types.AttributeValue
	for p := dynamodb.NewQueryPaginator(db, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing %s %s of %s: %w", table, index, value, err)
		}
		items = append(items, page.Items...)
	}
	return items, nil
}

// Keys keeps the attributes names of each item: a table's keys out of an index's projection.
func Keys(items []map[string]types.AttributeValue, names ...string) []map[string]types.AttributeValue {
	keys := make([]map[string]types.AttributeValue, 0, len(items))
	for _, it := range items {
		k := make(map[string]types.AttributeValue, len(names))
		for _, n := range names {
			k[n] = it[n]
		}
		keys = append(keys, k)
	}
	return keys
}
