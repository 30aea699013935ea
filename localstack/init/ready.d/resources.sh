#!/usr/bin/env bash
# Generated from template.yaml by "go test ./infra/template -update"; do not edit.
# LocalStack runs it once its services are ready. Resources are named by their logical ids
# (buckets in lower case).
set -euo pipefail

if ! awslocal dynamodb describe-table --table-name 'AccountsTable' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'AccountsTable' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"accountId","AttributeType":"S"},{"AttributeName":"secretHash","AttributeType":"S"},{"AttributeName":"purgeShard","AttributeType":"S"},{"AttributeName":"purgeDue","AttributeType":"N"}]' \
    --key-schema '[{"AttributeName":"accountId","KeyType":"HASH"}]' \
    --global-secondary-indexes '[{"IndexName":"BySecretHash","KeySchema":[{"AttributeName":"secretHash","KeyType":"HASH"}],"Projection":{"ProjectionType":"ALL"}},{"IndexName":"PurgeDue","KeySchema":[{"AttributeName":"purgeShard","KeyType":"HASH"},{"AttributeName":"purgeDue","KeyType":"RANGE"}],"Projection":{"ProjectionType":"KEYS_ONLY"}}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'AccountsTable'
fi

if ! awslocal dynamodb describe-table --table-name 'AgentsTable' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'AgentsTable' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"accountId","AttributeType":"S"},{"AttributeName":"agentId","AttributeType":"S"}]' \
    --key-schema '[{"AttributeName":"accountId","KeyType":"HASH"},{"AttributeName":"agentId","KeyType":"RANGE"}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'AgentsTable'
fi

if ! awslocal dynamodb describe-table --table-name 'ApprovalsTable' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'ApprovalsTable' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"approvalKey","AttributeType":"S"},{"AttributeName":"conversationKey","AttributeType":"S"}]' \
    --key-schema '[{"AttributeName":"approvalKey","KeyType":"HASH"}]' \
    --global-secondary-indexes '[{"IndexName":"ByConversation","KeySchema":[{"AttributeName":"conversationKey","KeyType":"HASH"}],"Projection":{"ProjectionType":"KEYS_ONLY"}}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'ApprovalsTable'
  awslocal dynamodb update-time-to-live --table-name 'ApprovalsTable' \
    --time-to-live-specification '{"AttributeName":"expiresAt","Enabled":true}' >/dev/null
fi

if ! awslocal dynamodb describe-table --table-name 'AsyncToolResultsTable' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'AsyncToolResultsTable' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"},{"AttributeName":"dueShard","AttributeType":"S"},{"AttributeName":"dueAt","AttributeType":"N"},{"AttributeName":"conversationKey","AttributeType":"S"}]' \
    --key-schema '[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}]' \
    --global-secondary-indexes '[{"IndexName":"Due","KeySchema":[{"AttributeName":"dueShard","KeyType":"HASH"},{"AttributeName":"dueAt","KeyType":"RANGE"}],"Projection":{"ProjectionType":"KEYS_ONLY"}},{"IndexName":"ByConversation","KeySchema":[{"AttributeName":"conversationKey","KeyType":"HASH"}],"Projection":{"ProjectionType":"INCLUDE","NonKeyAttributes":["responseKey"]}}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'AsyncToolResultsTable'
  awslocal dynamodb update-time-to-live --table-name 'AsyncToolResultsTable' \
    --time-to-live-specification '{"AttributeName":"expiresAt","Enabled":true}' >/dev/null
fi

if ! awslocal dynamodb describe-table --table-name 'ChannelsTable' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'ChannelsTable' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"}]' \
    --key-schema '[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'ChannelsTable'
fi

if ! awslocal dynamodb describe-table --table-name 'ConnectionsTable' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'ConnectionsTable' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"}]' \
    --key-schema '[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'ConnectionsTable'
  awslocal dynamodb update-time-to-live --table-name 'ConnectionsTable' \
    --time-to-live-specification '{"AttributeName":"expiresAt","Enabled":true}' >/dev/null
fi

if ! awslocal dynamodb describe-table --table-name 'ConversationsTable' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'ConversationsTable' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"conversationKey","AttributeType":"S"},{"AttributeName":"seq","AttributeType":"N"},{"AttributeName":"accountId","AttributeType":"S"},{"AttributeName":"ownerKey","AttributeType":"S"},{"AttributeName":"updatedAt","AttributeType":"N"},{"AttributeName":"listAccount","AttributeType":"S"}]' \
    --key-schema '[{"AttributeName":"conversationKey","KeyType":"HASH"},{"AttributeName":"seq","KeyType":"RANGE"}]' \
    --global-secondary-indexes '[{"IndexName":"ByAccount","KeySchema":[{"AttributeName":"accountId","KeyType":"HASH"}],"Projection":{"ProjectionType":"KEYS_ONLY"}},{"IndexName":"ByOwner","KeySchema":[{"AttributeName":"ownerKey","KeyType":"HASH"},{"AttributeName":"updatedAt","KeyType":"RANGE"}],"Projection":{"ProjectionType":"INCLUDE","NonKeyAttributes":["agentId","endUser","title","createdAt","preview"]}},{"IndexName":"ByAccountUpdated","KeySchema":[{"AttributeName":"listAccount","KeyType":"HASH"},{"AttributeName":"updatedAt","KeyType":"RANGE"}],"Projection":{"ProjectionType":"INCLUDE","NonKeyAttributes":["agentId","endUser","title","createdAt","preview"]}}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'ConversationsTable'
fi

if ! awslocal dynamodb describe-table --table-name 'EventsTable' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'EventsTable' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"eventKey","AttributeType":"S"},{"AttributeName":"conversationKey","AttributeType":"S"}]' \
    --key-schema '[{"AttributeName":"eventKey","KeyType":"HASH"}]' \
    --global-secondary-indexes '[{"IndexName":"ByConversation","KeySchema":[{"AttributeName":"conversationKey","KeyType":"HASH"}],"Projection":{"ProjectionType":"KEYS_ONLY"}}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'EventsTable'
  awslocal dynamodb update-time-to-live --table-name 'EventsTable' \
    --time-to-live-specification '{"AttributeName":"expiresAt","Enabled":true}' >/dev/null
fi

if ! awslocal dynamodb describe-table --table-name 'SkillsTable' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'SkillsTable' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"accountId","AttributeType":"S"},{"AttributeName":"name","AttributeType":"S"}]' \
    --key-schema '[{"AttributeName":"accountId","KeyType":"HASH"},{"AttributeName":"name","KeyType":"RANGE"}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'SkillsTable'
fi

if ! awslocal dynamodb describe-table --table-name 'StreamsTable' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'StreamsTable' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"streamKey","AttributeType":"S"},{"AttributeName":"seq","AttributeType":"N"},{"AttributeName":"groupKey","AttributeType":"S"}]' \
    --key-schema '[{"AttributeName":"streamKey","KeyType":"HASH"},{"AttributeName":"seq","KeyType":"RANGE"}]' \
    --global-secondary-indexes '[{"IndexName":"ByGroup","KeySchema":[{"AttributeName":"groupKey","KeyType":"HASH"}],"Projection":{"ProjectionType":"KEYS_ONLY"}}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'StreamsTable'
  awslocal dynamodb update-time-to-live --table-name 'StreamsTable' \
    --time-to-live-specification '{"AttributeName":"expiresAt","Enabled":true}' >/dev/null
fi

if ! awslocal dynamodb describe-table --table-name 'WorkspacesTable' >/dev/null 2>&1; then
  awslocal dynamodb create-table --table-name 'WorkspacesTable' \
    --billing-mode 'PAY_PER_REQUEST' \
    --attribute-definitions '[{"AttributeName":"accountId","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"}]' \
    --key-schema '[{"AttributeName":"accountId","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}]' >/dev/null
  awslocal dynamodb wait table-exists --table-name 'WorkspacesTable'
fi

awslocal sqs create-queue --queue-name 'AsyncWorkDeadLetterQueue' \
  --attributes '{"MessageRetentionPeriod":"1209600"}' >/dev/null

awslocal sqs create-queue --queue-name 'ExternalJobsQueue' \
  --attributes '{"VisibilityTimeout":"60"}' >/dev/null

awslocal sqs create-queue --queue-name 'AsyncWorkQueue' \
  --attributes '{"RedrivePolicy":"{\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:AsyncWorkDeadLetterQueue\",\"maxReceiveCount\":5}","VisibilityTimeout":"960"}' >/dev/null

if ! awslocal s3api head-bucket --bucket 'asyncresultsbucket' >/dev/null 2>&1; then
  awslocal s3api create-bucket --bucket 'asyncresultsbucket' >/dev/null
fi

if ! awslocal s3api head-bucket --bucket 'skillsbucket' >/dev/null 2>&1; then
  awslocal s3api create-bucket --bucket 'skillsbucket' >/dev/null
fi

if ! awslocal s3api head-bucket --bucket 'workspacesbucket' >/dev/null 2>&1; then
  awslocal s3api create-bucket --bucket 'workspacesbucket' >/dev/null
fi
