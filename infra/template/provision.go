package template

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Provision creates the template's tables, each named name(logicalID), waits until they are ACTIVE
// and enables their TTL. Tables that already exist are kept as they are, so it can run at every
// start.
func Provision(ctx context.Context, db *dynamodb.Client, tpl *Template, name func(logicalID string) string) error {
	for _, t := range tpl.Tables() {
		if err := provisionTable(ctx, db, t, name(t.LogicalID)); err != nil {
			return fmt.Errorf("provisioning %s: %w", t.LogicalID, err)
		}
	}
	return nil
}

func provisionTable(ctx context.Context, db *dynamodb.Client, t Table, name string) error {
	if _, err := db.CreateTable(ctx, createTableInput(t, name)); err != nil {
		if _, exists := errors.AsType[*types.ResourceInUseException](err); !exists {
			return fmt.Errorf("creating table %s: %w", name, err)
		}
	}
	// The waiter's default first delay is 20s; emulators are ready at once and AWS within seconds.
	waiter := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = time.Second })
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, 5*time.Minute); err != nil {
		return fmt.Errorf("waiting for table %s: %w", name, err)
	}
	if t.TTLAttribute == "" {
		return nil
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name})
	if err != nil {
		return fmt.Errorf("reading ttl of %s: %w", name, err)
	}
	// Enabling TTL again is an error, so only a table that lacks it gets it.
	if d := ttl.TimeToLiveDescription; d != nil && d.TimeToLiveStatus != types.TimeToLiveStatusDisabled {
		return nil
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &name,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: &t.TTLAttribute, Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("enabling ttl on %s: %w", name, err)
	}
	return nil
}

func createTableInput(t Table, name string) *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingMode(t.BillingMode),
		KeySchema:   keySchema(t.KeySchema),
	}
	for _, a := range t.AttributeDefinitions {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{
			AttributeName: aws.String(a.AttributeName),
			AttributeType: types.ScalarAttributeType(a.AttributeType),
		})
	}
	for _, ix := range t.GlobalSecondaryIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName: aws.String(ix.IndexName),
			KeySchema: keySchema(ix.KeySchema),
			Projection: &types.Projection{
				ProjectionType:   types.ProjectionType(ix.Projection.ProjectionType),
				NonKeyAttributes: ix.Projection.NonKeyAttributes,
			},
		})
	}
	return in
}

func keySchema(elems []KeyElement) []types.KeySchemaElement {
	var out []types.KeySchemaElement
	for _, e := range elems {
		out = append(out, types.KeySchemaElement{AttributeName: aws.String(e.AttributeName), KeyType: types.KeyType(e.KeyType)})
	}
	return out
}

// ProvisionQueues creates the template's queues, each named name(logicalID) with the template's
// attributes, dead-letter queues before the queues that redrive to them, and returns their URLs
// by logical id. A queue that already exists keeps its URL and gets the template's attributes.
func ProvisionQueues(ctx context.Context, c *sqs.Client, tpl *Template, name func(logicalID string) string) (map[string]string, error) {
	urls := map[string]string{}
	arns := map[string]string{}
	declared := map[string]bool{}
	for _, q := range tpl.Queues() {
		declared[q.LogicalID] = true
	}
	pending := tpl.Queues()
	for len(pending) > 0 {
		var later []Queue
		for _, q := range pending {
			attrs := maps.Clone(q.Attributes)
			if dl := q.DeadLetter; dl != nil {
				if !declared[dl.QueueID] {
					return nil, fmt.Errorf("provisioning %s: its dead-letter queue %s is not a queue of the template", q.LogicalID, dl.QueueID)
				}
				arn, ok := arns[dl.QueueID]
				if !ok {
					later = append(later, q)
					continue
				}
				attrs["RedrivePolicy"] = string(mustJSON(map[string]any{"deadLetterTargetArn": arn, "maxReceiveCount": dl.MaxReceiveCount}))
			}
			url, arn, err := provisionQueue(ctx, c, name(q.LogicalID), attrs)
			if err != nil {
				return nil, fmt.Errorf("provisioning %s: %w", q.LogicalID, err)
			}
			urls[q.LogicalID], arns[q.LogicalID] = url, arn
		}
		if len(later) == len(pending) {
			return nil, fmt.Errorf("provisioning queues: the dead-letter queues of %s redrive in a cycle", later[0].LogicalID)
		}
		pending = later
	}
	return urls, nil
}

func provisionQueue(ctx context.Context, c *sqs.Client, name string, attrs map[string]string) (url, arn string, err error) {
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err == nil {
		url = aws.ToString(out.QueueUrl)
	} else {
		// CreateQueue is idempotent only while the attributes are equal.
		if _, exists := errors.AsType[*sqstypes.QueueNameExists](err); !exists {
			return "", "", fmt.Errorf("creating queue %s: %w", name, err)
		}
		got, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
		if err != nil {
			return "", "", fmt.Errorf("finding queue %s: %w", name, err)
		}
		url = aws.ToString(got.QueueUrl)
		if _, err := c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: attrs}); err != nil {
			return "", "", fmt.Errorf("updating queue %s: %w", name, err)
		}
	}
	arn, err = QueueARN(ctx, c, url)
	return url, arn, err
}

// QueueARN returns the ARN of the queue at url.
func QueueARN(ctx context.Context, c *sqs.Client, url string) (string, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("reading the arn of %s: %w", url, err)
	}
	arn := out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", fmt.Errorf("queue %s has no QueueArn", url)
	}
	return arn, nil
}

// ProvisionBuckets creates the template's buckets, each named name(logicalID); S3 wants names in
// lower case. Buckets that already exist are kept.
func ProvisionBuckets(ctx context.Context, c *s3.Client, tpl *Template, name func(logicalID string) string) error {
	for _, b := range tpl.Buckets() {
		bucket := name(b.LogicalID)
		in := &s3.CreateBucketInput{Bucket: &bucket}
		// us-east-1 is the one region that takes no location constraint.
		if region := c.Options().Region; region != "" && region != "us-east-1" {
			in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
		}
		if _, err := c.CreateBucket(ctx, in); err != nil {
			if _, mine := errors.AsType[*s3types.BucketAlreadyOwnedByYou](err); !mine {
				return fmt.Errorf("provisioning %s: creating bucket %s: %w", b.LogicalID, bucket, err)
			}
		}
	}
	return nil
}
