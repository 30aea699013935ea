package template

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/agentharness/harness/shared/wire/awsclient"
)

// localConfig is the AWS configuration of the emulators named by the endpoint variables.
func localConfig(t *testing.T, variable string) aws.Config {
	t.Helper()
	if os.Getenv(variable) == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal(variable + " is not set: run the tests with `make test`, which starts DynamoDB Local and fauxqs " +
			"(or set AWS_ENDPOINT_URL to a running LocalStack)")
	}
	cfg, err := awsclient.Config(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// localDynamoDB returns a client for the emulator named by the endpoint variables.
func localDynamoDB(t *testing.T) *dynamodb.Client {
	t.Helper()
	return awsclient.DynamoDB(localConfig(t, "AWS_ENDPOINT_URL_DYNAMODB"))
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
		"AccountsTable": {Billing: "PAY_PER_REQUEST", Key: []string{"accountId"},
			Indexes: map[string][]string{"BySecretHash": {"secretHash"}, "PurgeDue": {"purgeShard", "purgeDue"}}},
		"AgentsTable": {Billing: "PAY_PER_REQUEST", Key: []string{"accountId", "agentId"}},
		"ConversationsTable": {Billing: "PAY_PER_REQUEST", Key: []string{"conversationKey", "seq"},
			Indexes: map[string][]string{"ByAccount": {"accountId"}, "ByOwner": {"ownerKey", "updatedAt"}, "ByAccountUpdated": {"listAccount", "updatedAt"}}},
		"EventsTable": {Billing: "PAY_PER_REQUEST", Key: []string{"eventKey"}, TTL: "expiresAt",
			Indexes: map[string][]string{"ByConversation": {"conversationKey"}}},
		"SkillsTable":     {Billing: "PAY_PER_REQUEST", Key: []string{"accountId", "name"}},
		"WorkspacesTable": {Billing: "PAY_PER_REQUEST", Key: []string{"accountId", "sk"}},
		"StreamsTable": {Billing: "PAY_PER_REQUEST", Key: []string{"streamKey", "seq"}, TTL: "expiresAt",
			Indexes: map[string][]string{"ByGroup": {"groupKey"}}},
		"ApprovalsTable": {Billing: "PAY_PER_REQUEST", Key: []string{"approvalKey"}, TTL: "expiresAt",
			Indexes: map[string][]string{"ByConversation": {"conversationKey"}}},
		"ConnectionsTable": {Billing: "PAY_PER_REQUEST", Key: []string{"pk", "sk"}, TTL: "expiresAt"},
		"ChannelsTable":    {Billing: "PAY_PER_REQUEST", Key: []string{"pk", "sk"}},
		"AsyncToolResultsTable": {Billing: "PAY_PER_REQUEST", Key: []string{"pk", "sk"}, TTL: "expiresAt",
			Indexes: map[string][]string{"Due": {"dueShard", "dueAt"}, "ByConversation": {"conversationKey"}}},
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

func TestProvisionQueuesAndBuckets(t *testing.T) {
	sqsc := awsclient.SQS(localConfig(t, "AWS_ENDPOINT_URL_SQS"))
	s3c := awsclient.S3(localConfig(t, "AWS_ENDPOINT_URL_S3"))
	tpl := load(t)
	prefix := fmt.Sprintf("provision-%d-", time.Now().UnixNano())
	name := func(id string) string { return strings.ToLower(prefix + id) }

	// The second run finds the queues and the bucket in place, with the same URLs.
	var urls map[string]string
	for i := range 2 {
		got, err := ProvisionQueues(t.Context(), sqsc, tpl, name)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && !cmp.Equal(urls, got) {
			t.Errorf("the second ProvisionQueues = %v, want the first's %v", got, urls)
		}
		urls = got
		if err := ProvisionBuckets(t.Context(), s3c, tpl, name); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, url := range urls {
			_, _ = sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		}
		_, _ = s3c.DeleteBucket(context.Background(), &s3.DeleteBucketInput{Bucket: aws.String(name("AsyncResultsBucket"))})
	})

	got := map[string]map[string]string{}
	for id, url := range urls {
		if !strings.HasSuffix(url, "/"+name(id)) {
			t.Errorf("%s's URL is %s, want it to end with its name %s", id, url, name(id))
		}
		attrs, err := sqsc.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{"VisibilityTimeout", "MessageRetentionPeriod", "RedrivePolicy"}})
		if err != nil {
			t.Fatal(err)
		}
		got[id] = attrs.Attributes
	}
	dlqARN, err := QueueARN(t.Context(), sqsc, urls["AsyncWorkDeadLetterQueue"])
	if err != nil {
		t.Fatal(err)
	}
	var redrive struct {
		Target   string `json:"deadLetterTargetArn"`
		MaxCount any    `json:"maxReceiveCount"` // a number or a string, as SQS likes
	}
	if err := json.Unmarshal([]byte(got["AsyncWorkQueue"]["RedrivePolicy"]), &redrive); err != nil {
		t.Fatalf("AsyncWorkQueue's RedrivePolicy %q: %v", got["AsyncWorkQueue"]["RedrivePolicy"], err)
	}
	if redrive.Target != dlqARN || fmt.Sprint(redrive.MaxCount) != "5" {
		t.Errorf("AsyncWorkQueue redrives to %s after %v receives, want %s after 5", redrive.Target, redrive.MaxCount, dlqARN)
	}
	for id, want := range map[string]map[string]string{
		"AsyncWorkQueue":           {"VisibilityTimeout": "960"},
		"AsyncWorkDeadLetterQueue": {"MessageRetentionPeriod": "1209600"},
		"ExternalJobsQueue":        {"VisibilityTimeout": "60"},
	} {
		for k, v := range want {
			if got[id][k] != v {
				t.Errorf("%s's %s = %q, want %q", id, k, got[id][k], v)
			}
		}
	}
	if _, err := s3c.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(name("AsyncResultsBucket"))}); err != nil {
		t.Errorf("the bucket was not created: %v", err)
	}
}

func TestProvisionQueuesRefusesUnknownDeadLetter(t *testing.T) {
	sqsc := awsclient.SQS(localConfig(t, "AWS_ENDPOINT_URL_SQS"))
	tpl := parse(t, `
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      RedrivePolicy: {deadLetterTargetArn: !GetAtt Gone.Arn, maxReceiveCount: 3}
`)
	_, err := ProvisionQueues(t.Context(), sqsc, tpl, func(id string) string { return fmt.Sprintf("bad-%d-%s", time.Now().UnixNano(), id) })
	if err == nil || !strings.Contains(err.Error(), "Gone is not a queue of the template") {
		t.Errorf("ProvisionQueues(redrive to an undeclared queue) = %v, want an error naming Gone", err)
	}
}

func keyNames(elems []types.KeySchemaElement) []string {
	var names []string
	for _, e := range elems {
		names = append(names, aws.ToString(e.AttributeName))
	}
	return names
}
