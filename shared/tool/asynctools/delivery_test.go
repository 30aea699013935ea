package asynctools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// oldDeliveries are deliveries as the release before stored them, by the edge they name now.
var oldDeliveries = []struct {
	file, edge string
	want       asynctools.Delivery
}{
	{"ws-v1.json", "ws", asynctools.Delivery{Edge: "ws", EventID: "evt_ws_1", GroupSeed: "seed_1", TurnKey: "evt_ws_1"}},
	{"channel-v1.json", "channel", asynctools.Delivery{Edge: "channel", EventID: "evt_ch_1", GroupSeed: "seed_2", TurnKey: "evt_ch_1",
		Route: `{"binding":"chb_1","type":"slack","chat":"C1","thread":"1700000000.000100","user":"U1"}`}},
	{"async-v1.json", "", asynctools.Delivery{EventID: "evt_1", GroupSeed: "seed_3", TurnKey: "evt_1", Tree: "evt_root", TreeDepth: 1}},
	{"stream-v1.json", "", asynctools.Delivery{TurnKey: "trn_1"}},
}

func TestDeliveryReadsTheShapeStoredBefore(t *testing.T) {
	for _, tt := range oldDeliveries {
		t.Run(tt.file, func(t *testing.T) {
			var d asynctools.Delivery
			if err := json.Unmarshal(oldDelivery(t, tt.file), &d); err != nil {
				t.Fatal(err)
			}
			if d != tt.want {
				t.Errorf("read %+v, want %+v", d, tt.want)
			}
		})
	}
}

// A group sealed before a deploy continues on the edge its old row names, read from the table.
func TestGroupSealedBeforeKeepsItsEdge(t *testing.T) {
	ctx := context.Background()
	db, table := newTable(t)
	s := asynctools.NewStore(db, table, nil)
	for i, tt := range oldDeliveries {
		t.Run(tt.file, func(t *testing.T) {
			g := asynctools.NewGroupID("seed", i)
			if _, _, err := s.Seal(ctx, asynctools.Group{ID: g, AccountID: "acc_1", Expected: []string{asynctools.ResultID(g, "call_1")}, SealedBy: "parent"}, t0, t0.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			// The row as the release before wrote it: its delivery in the old shape.
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: &table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: g}, "sk": &types.AttributeValueMemberS{Value: "#group"}},
				UpdateExpression:          aws.String("SET delivery = :d"),
				ConditionExpression:       aws.String("attribute_exists(pk)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":d": &types.AttributeValueMemberS{Value: string(oldDelivery(t, tt.file))}},
			})
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.Load(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			if st.Group == nil || st.Group.Delivery != tt.want {
				t.Errorf("group's delivery %+v, want %+v", st.Group, tt.want)
			}
		})
	}
}

func oldDelivery(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "delivery", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
