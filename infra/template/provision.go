package template

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
