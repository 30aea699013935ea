package template

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// LocalstackInit returns the LocalStack init hook (localstack/init/ready.d/resources.sh) that
// creates the template's tables, queues (dead-letter queues first, with their redrive policies)
// and buckets, each named by its logical id, buckets in lower case as S3 requires. It can run
// again on a persisted LocalStack: existing tables and buckets are skipped and SQS's create-queue
// is idempotent.
func LocalstackInit(tpl *Template) string {
	var b strings.Builder
	b.WriteString(`#!/usr/bin/env bash
# Generated from template.yaml by "go test ./infra/template -update"; do not edit.
# LocalStack runs it once its services are ready. Resources are named by their logical ids
# (buckets in lower case).
set -euo pipefail
`)
	for _, t := range tpl.Tables() {
		fmt.Fprintf(&b, "\nif ! awslocal dynamodb describe-table --table-name %s >/dev/null 2>&1; then\n", quote(t.LogicalID))
		fmt.Fprintf(&b, "  awslocal dynamodb create-table --table-name %s \\\n", quote(t.LogicalID))
		fmt.Fprintf(&b, "    --billing-mode %s \\\n", quote(t.BillingMode))
		fmt.Fprintf(&b, "    --attribute-definitions %s \\\n", jsonArg(t.AttributeDefinitions))
		fmt.Fprintf(&b, "    --key-schema %s", jsonArg(t.KeySchema))
		if len(t.GlobalSecondaryIndexes) > 0 {
			fmt.Fprintf(&b, " \\\n    --global-secondary-indexes %s", jsonArg(t.GlobalSecondaryIndexes))
		}
		fmt.Fprintf(&b, " >/dev/null\n  awslocal dynamodb wait table-exists --table-name %s\n", quote(t.LogicalID))
		if t.TTLAttribute != "" {
			fmt.Fprintf(&b, "  awslocal dynamodb update-time-to-live --table-name %s \\\n", quote(t.LogicalID))
			fmt.Fprintf(&b, "    --time-to-live-specification %s >/dev/null\n",
				jsonArg(map[string]any{"AttributeName": t.TTLAttribute, "Enabled": true}))
		}
		b.WriteString("fi\n")
	}
	// Dead-letter queues first: SQS refuses a RedrivePolicy whose target does not exist yet.
	queues := tpl.Queues()
	slices.SortStableFunc(queues, func(a, b Queue) int {
		return boolOrder(a.DeadLetter != nil) - boolOrder(b.DeadLetter != nil)
	})
	for _, q := range queues {
		attrs := maps.Clone(q.Attributes)
		if dl := q.DeadLetter; dl != nil {
			// LocalStack's default account and the region its init hooks run in.
			arn := "arn:aws:sqs:us-east-1:000000000000:" + dl.QueueID
			attrs["RedrivePolicy"] = string(mustJSON(map[string]any{"deadLetterTargetArn": arn, "maxReceiveCount": dl.MaxReceiveCount}))
		}
		fmt.Fprintf(&b, "\nawslocal sqs create-queue --queue-name %s", quote(q.LogicalID))
		if len(attrs) > 0 {
			fmt.Fprintf(&b, " \\\n  --attributes %s", jsonArg(attrs))
		}
		b.WriteString(" >/dev/null\n")
	}
	for _, bucket := range tpl.Buckets() {
		name := quote(LocalstackBucketName(bucket.LogicalID))
		fmt.Fprintf(&b, "\nif ! awslocal s3api head-bucket --bucket %s >/dev/null 2>&1; then\n", name)
		fmt.Fprintf(&b, "  awslocal s3api create-bucket --bucket %s >/dev/null\nfi\n", name)
	}
	return b.String()
}

// LocalstackBucketName is the name the init hook gives a bucket: its logical id in lower case.
func LocalstackBucketName(logicalID string) string { return strings.ToLower(logicalID) }

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// jsonArg is v as JSON, quoted for the shell; the AWS CLI takes JSON for any parameter.
func jsonArg(v any) string { return quote(string(mustJSON(v))) }

// mustJSON marshals values built from strings, numbers and bools, which cannot fail.
func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// quote single-quotes s for the shell.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
