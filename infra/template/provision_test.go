package template

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/agentharness/harness/shared/awsclient"
)

// localDynamoDB returns a client for the emulator named by the endpoint variables.
func localDynamoDB(t *testing.T) *dynamodb.Client {
	t.Helper()
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("AWS_ENDPOINT_URL_DYNAMODB is not set: run the tests with `make test`, which starts DynamoDB Local " +
			"(or set AWS_ENDPOINT_URL to a running LocalStack)")
	}
	cfg, err := awsclient.Config(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return awsclient.DynamoDB(cfg)
}

// table is what the test checks of a provisioned table.
type table struct {
	Billing, TTL string
	Key          []string
	Indexes      map[string][]string
}

func TestProvision(t *testing.T) {
	db := localDynamoDB(t)
	tpl := load(t)
	prefix := fmt.Sprintf("provision-%d-", time.Now().UnixNano())
	name := func(id string) string { return prefix + id }
	t.Cleanup(func() {
		for _, tb := range tpl.Tables() {
			_, _ = db.DeleteTable(t.Context(), &dynamodb.DeleteTableInput{TableName: aws.String(name(tb.LogicalID))})
		}
	})

	// The second run finds the tables and their TTL in place.
	for range 2 {
		if err := Provision(t.Context(), db, tpl, name); err != nil {
			t.Fatal(err)
		}
	}

	got := map[string]table{}
	for _, tb := range tpl.Tables() {
		desc, err := db.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name(tb.LogicalID))})
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := db.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name(tb.LogicalID))})
		if err != nil {
			t.Fatal(err)
		}
		d := desc.Table
		if d.TableStatus != types.TableStatusActive {
			t.Errorf("%s is %s, want ACTIVE", tb.LogicalID, d.TableStatus)
		}
		g := table{Billing: string(d.BillingModeSummary.BillingMode), Key: keyNames(d.KeySchema)}
		if s := ttl.TimeToLiveDescription; s.TimeToLiveStatus == types.TimeToLiveStatusEnabled {
			g.TTL = aws.ToString(s.AttributeName)
		}
		for _, ix := range d.GlobalSecondaryIndexes {
			if g.Indexes == nil {
				g.Indexes = map[string][]string{}
			}
			g.Indexes[aws.ToString(ix.IndexName)] = keyNames(ix.KeySchema)
		}
		got[tb.LogicalID] = g
	}
	want := map[string]table{
		"AccountsTable":      {Billing: "PAY_PER_REQUEST", Key: []string{"accountId"}, Indexes: map[string][]string{"BySecretHash": {"secretHash"}}},
		"AgentsTable":        {Billing: "PAY_PER_REQUEST", Key: []string{"accountId", "agentId"}},
		"ConversationsTable": {Billing: "PAY_PER_REQUEST", Key: []string{"conversationKey", "seq"}},
		"EventsTable":        {Billing: "PAY_PER_REQUEST", Key: []string{"eventKey"}, TTL: "expiresAt"},
		"ApprovalsTable":     {Billing: "PAY_PER_REQUEST", Key: []string{"approvalKey"}, TTL: "expiresAt"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("provisioned tables (-want +got):\n%s", diff)
	}
}

func TestProvisionReportsErrors(t *testing.T) {
	db := localDynamoDB(t)
	tpl := parse(t, `
Resources:
  NoKey:
    Type: AWS::DynamoDB::Table
    Properties: {BillingMode: PAY_PER_REQUEST}
`)
	err := Provision(t.Context(), db, tpl, func(id string) string { return fmt.Sprintf("bad-%d-%s", time.Now().UnixNano(), id) })
	if err == nil {
		t.Fatal("Provision(table without a key) = nil, want an error")
	}
}

func keyNames(elems []types.KeySchemaElement) []string {
	var names []string
	for _, e := range elems {
		names = append(names, aws.ToString(e.AttributeName))
	}
	return names
}
