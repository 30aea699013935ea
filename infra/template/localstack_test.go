package template

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the LocalStack init hook from template.yaml")

// hookPath is the committed hook, relative to the repository root.
const hookPath = "localstack/init/ready.d/resources.sh"

func TestLocalstackHookIsCurrent(t *testing.T) {
	tpl := load(t)
	templatePath, err := Find(".")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(filepath.Dir(templatePath), filepath.FromSlash(hookPath))
	want := LocalstackInit(tpl)
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o755); err != nil {
			t.Fatal(err)
		}
		// WriteFile keeps the mode of a file that exists; LocalStack runs only executable hooks.
		if err := os.Chmod(path, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the hook: %v; generate it with: go test ./infra/template -update", err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("%s differs from what template.yaml generates; regenerate it with: go test ./infra/template -update\n(-want +got):\n%s", hookPath, diff)
	}
	if info, err := os.Stat(path); err != nil || info.Mode()&0o111 == 0 {
		t.Errorf("%s is not executable; regenerate it with: go test ./infra/template -update", hookPath)
	}
}

func TestLocalstackInit(t *testing.T) {
	tpl := parse(t, `
Resources:
  Events:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: id, AttributeType: S}, {AttributeName: owner, AttributeType: S}]
      KeySchema: [{AttributeName: id, KeyType: HASH}]
      GlobalSecondaryIndexes:
        - IndexName: ByOwner
          KeySchema: [{AttributeName: owner, KeyType: HASH}]
          Projection: {ProjectionType: INCLUDE, NonKeyAttributes: [status]}
      TimeToLiveSpecification: {AttributeName: expiresAt, Enabled: true}
  A:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 60
      RedrivePolicy: {deadLetterTargetArn: !GetAtt B.Arn, maxReceiveCount: 3}
  B:
    Type: AWS::SQS::Queue
  ResultsBucket:
    Type: AWS::S3::Bucket
    Properties:
      LifecycleConfiguration: {Rules: [{Id: Expire, Status: Enabled, ExpirationInDays: 30}]}
`)
	want := `#!/usr/bin/env bash
# Generated from template.yaml by "go test ./infra/template -update"; do not edit.
# LocalStack runs it once its services are ready. Resources are named by their logical ids
# (buckets in lower case).
set -euo pipefail

if ! awslocal dynamodb describe-table --table-name 'Events' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'Events' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"id","AttributeType":"S"},{"AttributeName":"owner","AttributeType":"S"}]' \
    --key-schema '[{"AttributeName":"id","KeyType":"HASH"}]' \
    --global-secondary-indexes '[{"IndexName":"ByOwner","KeySchema":[{"AttributeName":"owner","KeyType":"HASH"}],"Projection":{"ProjectionType":"INCLUDE","NonKeyAttributes":["status"]}}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'Events'
  awslocal dynamodb update-time-to-live --table-name 'Events' \
    --time-to-live-specification '{"AttributeName":"expiresAt","Enabled":true}' >/dev/null
fi

awslocal sqs create-queue --queue-name 'B' >/dev/null

awslocal sqs create-queue --queue-name 'A' \
  --attributes '{"RedrivePolicy":"{\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:B\",\"maxReceiveCount\":3}","VisibilityTimeout":"60"}' >/dev/null

if ! awslocal s3api head-bucket --bucket 'resultsbucket' >/dev/null 2>&1; then
  awslocal s3api create-bucket --bucket 'resultsbucket' >/dev/null
fi
`
	if diff := cmp.Diff(want, LocalstackInit(tpl)); diff != "" {
		t.Errorf("LocalstackInit (-want +got):\n%s", diff)
	}
}

func TestQuote(t *testing.T) {
	if got, want := quote(`it's`), `'it'\''s'`; got != want {
		t.Errorf("quote(it's) = %s, want %s", got, want)
	}
}
