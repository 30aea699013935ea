package localrunner

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Clients are the AWS clients a template's resources are created with. Without an SQS or an S3
// client the queues or the buckets are left out.
type Clients struct {
	DB  *dynamodb.Client
	SQS *sqs.Client
	S3  *s3.Client
}

// Resources are a template's resources created under one prefix.
type Resources struct {
	Prefix string
	// Tables are the table names harness-processing gets, zero when the template has no
	// HarnessProcessingFunction.
	Tables store.Tables
	// TableNames, QueueURLs and BucketNames are by logical id.
	TableNames  map[string]string
	QueueURLs   map[string]string
	BucketNames map[string]string
}

// Name returns the value Ref has for a logical id: a queue's URL, a table's or a bucket's name
// (prefix + logical id, in lower case for buckets). It is the naming Options.Name wants.
func (r *Resources) Name(logicalID string) string {
	if url, ok := r.QueueURLs[logicalID]; ok {
		return url
	}
	if name, ok := r.BucketNames[logicalID]; ok {
		return name
	}
	return r.Prefix + logicalID
}

// Provision creates the template's tables, queues (dead-letter queues first, with their redrive
// policies) and buckets, named prefix + logical id (buckets in lower case, as S3 wants), and
// returns them. Resources that already exist are kept, so it can run at every start.
func Provision(ctx context.Context, c Clients, tpl *template.Template, prefix string) (*Resources, error) {
	physical := func(logicalID string) string { return prefix + logicalID }
	r := &Resources{Prefix: prefix, TableNames: map[string]string{}, QueueURLs: map[string]string{}, BucketNames: map[string]string{}}
	if err := template.Provision(ctx, c.DB, tpl, physical); err != nil {
		return nil, fmt.Errorf("creating the tables: %w", err)
	}
	for _, t := range tpl.Tables() {
		r.TableNames[t.LogicalID] = physical(t.LogicalID)
	}
	if c.SQS != nil {
		urls, err := template.ProvisionQueues(ctx, c.SQS, tpl, physical)
		if err != nil {
			return nil, fmt.Errorf("creating the queues: %w", err)
		}
		r.QueueURLs = urls
	}
	if c.S3 != nil {
		bucketName := func(logicalID string) string { return strings.ToLower(physical(logicalID)) }
		if err := template.ProvisionBuckets(ctx, c.S3, tpl, bucketName); err != nil {
			return nil, fmt.Errorf("creating the buckets: %w", err)
		}
		for _, b := range tpl.Buckets() {
			r.BucketNames[b.LogicalID] = bucketName(b.LogicalID)
		}
	}
	tables, err := StoreTables(tpl, r.Name)
	if err != nil && !errors.Is(err, errNoHarness) {
		return nil, err
	}
	r.Tables = tables
	return r, nil
}

var errNoHarness = errors.New("template has no HarnessProcessingFunction")

// StoreTables returns the table names harness-processing gets from the template.
func StoreTables(tpl *template.Template, name func(logicalID string) string) (store.Tables, error) {
	for _, fn := range tpl.Functions() {
		if fn.LogicalID != "HarnessProcessingFunction" {
			continue
		}
		env, err := tpl.FunctionEnv(fn, name)
		if err != nil {
			return store.Tables{}, err
		}
		config := lambdadeps.ConfigFrom(func(k string) string { return env[k] })
		return store.Tables(config.Tables), config.Require("ACCOUNTS_TABLE", "AGENTS_TABLE", "CONVERSATIONS_TABLE", "EVENTS_TABLE", "APPROVALS_TABLE")
	}
	return store.Tables{}, errNoHarness
}
