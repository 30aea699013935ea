package asynctools_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestZZProbeTTL(t *testing.T) {
	db, table := newTable(t)
	ctx := context.Background()
	k := func(i int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberS{Value: strconv.Itoa(i)}}
	}
	start := time.Now()
	gone := map[int]bool{}
	for i := 0; time.Since(start) < 100*time.Second; i++ {
		it := k(i)
		it["expiresAt"] = &types.AttributeValueMemberN{Value: "1769860800"}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it}); err != nil {
			t.Fatal(err)
		}
		for j := 0; j <= i; j++ {
			if gone[j] {
				continue
			}
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true), Key: k(j)})
			if err != nil {
				t.Fatal(err)
			}
			if out.Item == nil {
				gone[j] = true
				t.Logf("%6.2fs: item %d (written at ~%d00ms) gone", time.Since(start).Seconds(), j, j)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d of the items gone", len(gone))
}
