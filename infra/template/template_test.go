package template

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// load parses the project's template.yaml.
func load(t *testing.T) *Template {
	t.Helper()
	path, err := Find(".")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func parse(t *testing.T, src string) *Template {
	t.Helper()
	tpl, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func prefixed(id string) string { return "test-" + id }

func TestFind(t *testing.T) {
	path, err := Find(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "go.mod")); err != nil || filepath.Base(path) != "template.yaml" {
		t.Errorf("Find(.) = %q, want the template.yaml beside go.mod", path)
	}
	if path, err := Find(t.TempDir()); err == nil {
		t.Errorf("Find(empty dir) = %q, want an error", path)
	}
}

func TestProjectTables(t *testing.T) {
	got := load(t).Tables()
	want := []Table{
		{
			LogicalID: "AccountsTable", BillingMode: "PAY_PER_REQUEST",
			AttributeDefinitions: []AttributeDefinition{{"accountId", "S"}, {"secretHash", "S"}, {"purgeShard", "S"}, {"purgeDue", "N"}},
			KeySchema:            []KeyElement{{"accountId", "HASH"}},
			GlobalSecondaryIndexes: []Index{{
				IndexName:  "BySecretHash",
				KeySchema:  []KeyElement{{"secretHash", "HASH"}},
				Projection: Projection{ProjectionType: "ALL"},
			}, {
				IndexName:  "PurgeDue",
				KeySchema:  []KeyElement{{"purgeShard", "HASH"}, {"purgeDue", "RANGE"}},
				Projection: Projection{ProjectionType: "KEYS_ONLY"},
			}},
		},
		{
			LogicalID: "AgentsTable", BillingMode: "PAY_PER_REQUEST",
			AttributeDefinitions: []AttributeDefinition{{"accountId", "S"}, {"agentId", "S"}},
			KeySchema:            []KeyElement{{"accountId", "HASH"}, {"agentId", "RANGE"}},
		},
		{
			LogicalID: "ApprovalsTable", BillingMode: "PAY_PER_REQUEST",
			AttributeDefinitions: []AttributeDefinition{{"approvalKey", "S"}, {"conversationKey", "S"}},
			KeySchema:            []KeyElement{{"approvalKey", "HASH"}},
			GlobalSecondaryIndexes: []Index{{
				IndexName:  "ByConversation",
				KeySchema:  []KeyElement{{"conversationKey", "HASH"}},
				Projection: Projection{ProjectionType: "KEYS_ONLY"},
			}},
			TTLAttribute: "expiresAt",
		},
		{
			LogicalID: "AsyncToolResultsTable", BillingMode: "PAY_PER_REQUEST",
			AttributeDefinitions: []AttributeDefinition{{"pk", "S"}, {"sk", "S"}, {"dueShard", "S"}, {"dueAt", "N"}, {"conversationKey", "S"}},
			KeySchema:            []KeyElement{{"pk", "HASH"}, {"sk", "RANGE"}},
			GlobalSecondaryIndexes: []Index{{
				IndexName:  "Due",
				KeySchema:  []KeyElement{{"dueShard", "HASH"}, {"dueAt", "RANGE"}},
				Projection: Projection{ProjectionType: "KEYS_ONLY"},
			}, {
				IndexName:  "ByConversation",
				KeySchema:  []KeyElement{{"conversationKey", "HASH"}},
				Projection: Projection{ProjectionType: "INCLUDE", NonKeyAttributes: []string{"responseKey"}},
			}},
			TTLAttribute: "expiresAt",
		},
		{
			LogicalID: "ChannelsTable", BillingMode: "PAY_PER_REQUEST",
			AttributeDefinitions: []AttributeDefinition{{"pk", "S"}, {"sk", "S"}},
			KeySchema:            []KeyElement{{"pk", "HASH"}, {"sk", "RANGE"}},
		},
		{
			LogicalID: "ConnectionsTable", BillingMode: "PAY_PER_REQUEST",
			AttributeDefinitions: []AttributeDefinition{{"pk", "S"}, {"sk", "S"}},
			KeySchema:            []KeyElement{{"pk", "HASH"}, {"sk", "RANGE"}},
			TTLAttribute:         "expiresAt",
		},
		{
			LogicalID: "ConversationsTable", BillingMode: "PAY_PER_REQUEST",
			AttributeDefinitions: []AttributeDefinition{{"conversationKey", "S"}, {"seq", "N"}, {"accountId", "S"}, {"ownerKey", "S"}, {"updatedAt", "N"}, {"listAccount", "S"}},
			KeySchema:            []KeyElement{{"conversationKey", "HASH"}, {"seq", "RANGE"}},
			GlobalSecondaryIndexes: []Index{{
				IndexName:  "ByAccount",
				KeySchema:  []KeyElement{{"accountId", "HASH"}},
				Projection: Projection{ProjectionType: "KEYS_ONLY"},
			}, {
				IndexName:  "ByOwner",
				KeySchema:  []KeyElement{{"ownerKey", "HASH"}, {"updatedAt", "RANGE"}},
				Projection: Projection{ProjectionType: "INCLUDE", NonKeyAttributes: []string{"agentId", "endUser", "title", "createdAt", "preview"}},
			}, {
				IndexName:  "ByAccountUpdated",
				KeySchema:  []KeyElement{{"listAccount", "HASH"}, {"updatedAt", "RANGE"}},
				Projection: Projection{ProjectionType: "INCLUDE", NonKeyAttributes: []string{"agentId", "endUser", "title", "createdAt", "preview"}},
			}},
		},
		{
			LogicalID: "EventsTable", BillingMode: "PAY_PER_REQUEST",
			AttributeDefinitions: []AttributeDefinition{{"eventKey", "S"}, {"conversationKey", "S"}},
			KeySchema:            []KeyElement{{"eventKey", "HASH"}},
			GlobalSecondaryIndexes: []Index{{
				IndexName:  "ByConversation",
				KeySchema:  []KeyElement{{"conversationKey", "HASH"}},
				Projection: Projection{ProjectionType: "KEYS_ONLY"},
			}},
			TTLAttribute: "expiresAt",
		},
		{
			LogicalID: "SkillsTable", BillingMode: "PAY_PER_REQUEST",
			AttributeDefinitions: []AttributeDefinition{{"accountId", "S"}, {"name", "S"}},
			KeySchema:            []KeyElement{{"accountId", "HASH"}, {"name", "RANGE"}},
		},
		{
			LogicalID: "StreamsTable", BillingMode: "PAY_PER_REQUEST",
			AttributeDefinitions: []AttributeDefinition{{"streamKey", "S"}, {"seq", "N"}, {"groupKey", "S"}},
			KeySchema:            []KeyElement{{"streamKey", "HASH"}, {"seq", "RANGE"}},
			GlobalSecondaryIndexes: []Index{{
				IndexName:  "ByGroup",
				KeySchema:  []KeyElement{{"groupKey", "HASH"}},
				Projection: Projection{ProjectionType: "KEYS_ONLY"},
			}},
			TTLAttribute: "expiresAt",
		},
		{
			LogicalID: "WorkspacesTable", BillingMode: "PAY_PER_REQUEST",
			AttributeDefinitions: []AttributeDefinition{{"accountId", "S"}, {"sk", "S"}},
			KeySchema:            []KeyElement{{"accountId", "HASH"}, {"sk", "RANGE"}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tables() (-want +got):\n%s", diff)
	}
}

func TestProjectFunctions(t *testing.T) {
	tpl := load(t)
	got := map[string][]string{}
	for _, fn := range tpl.Functions() {
		got[fn.LogicalID] = []string{fn.CodeURI, fn.Handler, fn.Runtime, strings.Join(fn.Architectures, ",")}
		for _, e := range fn.Events {
			switch e.Type {
			case "HttpApi":
				got[fn.LogicalID] = append(got[fn.LogicalID], e.Type+" "+e.Method+" "+e.Path)
			case "SQS":
				got[fn.LogicalID] = append(got[fn.LogicalID], fmt.Sprintf("SQS %s batch %d %v", e.Queue, e.BatchSize, e.FunctionResponseTypes))
			case "Schedule":
				got[fn.LogicalID] = append(got[fn.LogicalID], fmt.Sprintf("Schedule %s every %s", e.Schedule, e.Rate))
			default:
				got[fn.LogicalID] = append(got[fn.LogicalID], e.Type)
			}
		}
	}
	want := map[string][]string{
		"AccountManageFunction": {"functions/account-manage/", "bootstrap", "provided.al2023", "arm64",
			"HttpApi ANY /accounts/{accountId}", "HttpApi ANY /accounts/me/agents/{agentId}", "HttpApi ANY /accounts/me/agents",
			"HttpApi ANY /accounts/me/channels/{bindingId}", "HttpApi POST /accounts/me/channels/{bindingId}/set-webhook", "HttpApi ANY /accounts/me/channels",
			"HttpApi GET /accounts/me/providers", "HttpApi ANY /accounts/me/providers/{provider}",
			"HttpApi POST /accounts", "HttpApi GET /accounts", "HttpApi POST /accounts/me/nats-credentials", "HttpApi POST /accounts/{accountId}/rotate-secret",
			"HttpApi POST /accounts/me/tokens", "HttpApi ANY /accounts/me/token-issuer",
			"HttpApi ANY /accounts/me/skills/{name}", "HttpApi ANY /accounts/me/skills",
			"HttpApi ANY /accounts/me/workspaces", "HttpApi ANY /accounts/me/workspaces/{workspace}", "HttpApi GET /accounts/me/workspaces/{workspace}/files",
			"HttpApi ANY /accounts/me/workspaces/{workspace}/files/{path+}", "HttpApi GET /accounts/me/workspaces/{workspace}/history", "HttpApi GET /accounts/me/workspaces/{workspace}/diff"},
		"AsyncToolCompleteFunction": {"functions/async-tool-complete/", "bootstrap", "provided.al2023", "arm64",
			"HttpApi POST /async-tools/{resultId}/complete"},
		"AsyncWorkerFunction": {"functions/async-worker/", "bootstrap", "provided.al2023", "arm64",
			"SQS AsyncWorkQueue batch 10 [ReportBatchItemFailures]"},
		"HarnessProcessingFunction": {"functions/harness-processing/", "bootstrap", "provided.al2023", "arm64",
			"HttpApi POST /async", "HttpApi POST /channels/{bindingId}", "HttpApi POST /chat/{conversationId}/stop", "HttpApi GET /chat/{conversationId}/stream", "HttpApi GET /chat/{conversationId}/subagents", "HttpApi POST /chat", "HttpApi GET /", "HttpApi GET /healthz", "HttpApi POST /mcp", "HttpApi DELETE /mcp", "HttpApi GET /mcp", "HttpApi GET /readyz", "HttpApi GET /status/{eventId}",
			"HttpApi GET /threads/{parentThreadId}/variables/{requestId}", "HttpApi POST /threads/{parentThreadId}/variables/{requestId}", "HttpApi POST /",
			"HttpApi GET /agents", "HttpApi GET /models", "HttpApi DELETE /conversations/{conversationId}", "HttpApi GET /conversations/{conversationId}/messages", "HttpApi GET /conversations", "HttpApi PATCH /conversations/{conversationId}",
			"HttpApi OPTIONS /", "HttpApi OPTIONS /chat", "HttpApi OPTIONS /chat/{conversationId}/stream", "HttpApi OPTIONS /chat/{conversationId}/stop",
			"HttpApi OPTIONS /chat/{conversationId}/subagents", "HttpApi OPTIONS /async", "HttpApi OPTIONS /status/{eventId}",
			"HttpApi OPTIONS /threads/{parentThreadId}/variables/{requestId}", "HttpApi OPTIONS /agents", "HttpApi OPTIONS /models", "HttpApi OPTIONS /conversations",
			"HttpApi OPTIONS /conversations/{conversationId}", "HttpApi OPTIONS /conversations/{conversationId}/messages"},
		"SandboxFunction": {"functions/sandbox/", "bootstrap", "provided.al2023", "arm64"},
		"SweeperFunction": {"functions/sweeper/", "bootstrap", "provided.al2023", "arm64",
			"Schedule rate(1 minute) every 1m0s"},
		"WsGatewayFunction": {"functions/ws-gateway/", "bootstrap", "provided.al2023", "arm64"},
	}
	// Events in any order: the order of a function's events in the template says nothing.
	for _, m := range []map[string][]string{want, got} {
		for _, fn := range m {
			slices.Sort(fn[4:])
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Functions() (-want +got):\n%s", diff)
	}

	i := slices.IndexFunc(tpl.Functions(), func(fn Function) bool { return fn.LogicalID == "HarnessProcessingFunction" })
	fn := tpl.Functions()[i]
	if want := (&FunctionURL{AuthType: "NONE", InvokeMode: "RESPONSE_STREAM"}); !cmp.Equal(want, fn.URL) {
		t.Errorf("HarnessProcessingFunction URL = %+v, want %+v", fn.URL, want)
	}
	// Ref gives a queue's URL, which the caller's naming looks up.
	ref := func(id string) string {
		if id == "AsyncWorkQueue" || id == "ExternalJobsQueue" {
			return "http://sqs.local/000000000000/test-" + id
		}
		return prefixed(id)
	}
	env, err := tpl.FunctionEnv(fn, ref)
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := map[string]string{
		"LOG_LEVEL":                "INFO",
		"GOGC":                     "400",
		"MODEL_PRIVATE_ENDPOINTS":  "",
		"MCP_PRIVATE_ENDPOINTS":    "",
		"ACCOUNTS_TABLE":           "test-AccountsTable",
		"AGENTS_TABLE":             "test-AgentsTable",
		"CONVERSATIONS_TABLE":      "test-ConversationsTable",
		"EVENTS_TABLE":             "test-EventsTable",
		"APPROVALS_TABLE":          "test-ApprovalsTable",
		"APPROVAL_TIMEOUT":         "24h",
		"ASYNC_RESULTS_TABLE":      "test-AsyncToolResultsTable",
		"ASYNC_RESULTS_BUCKET":     "test-AsyncResultsBucket",
		"ASYNC_TOOL_TIMEOUT":       "1h",
		"ASYNC_WORK_QUEUE_URL":     "http://sqs.local/000000000000/test-AsyncWorkQueue",
		"EXTERNAL_JOBS_QUEUE_URL":  "http://sqs.local/000000000000/test-ExternalJobsQueue",
		"AGENT_SERVICE_URL":        "",
		"SECRETS_KMS_KEY_ID":       "test-AgentSecretsKey",
		"SKILLS_TABLE":             "test-SkillsTable",
		"SKILLS_BUCKET":            "test-SkillsBucket",
		"WORKSPACES_TABLE":         "test-WorkspacesTable",
		"WORKSPACES_BUCKET":        "test-WorkspacesBucket",
		"CHANNELS_TABLE":           "test-ChannelsTable",
		"STREAMS_TABLE":            "test-StreamsTable",
		"OPENAI_API_KEY_SECRET":    "",
		"ANTHROPIC_API_KEY_SECRET": "",
		"GOOGLE_API_KEY_SECRET":    "",
		"TAVILY_API_KEY_SECRET":    "",
		"NATS_URL":                 "",
		"NATS_CREDS_SECRET":        "",
		"NATS_REPLICAS":            "",
		"TURN_TREE_MAX_DEPTH":      "10",
		"TURN_TREE_MAX_TURNS":      "32",
		"SANDBOX_FUNCTION":         "test-SandboxFunction",
		"SANDBOX_BACKEND":          "lambda",
	}
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("FunctionEnv (-want +got):\n%s", diff)
	}
}

func TestProjectQueuesAndBuckets(t *testing.T) {
	tpl := load(t)
	wantQueues := []Queue{
		{LogicalID: "AsyncWorkDeadLetterQueue", Attributes: map[string]string{"MessageRetentionPeriod": "1209600"}},
		{LogicalID: "AsyncWorkQueue", Attributes: map[string]string{"VisibilityTimeout": "960"}, DeadLetter: &DeadLetter{QueueID: "AsyncWorkDeadLetterQueue", MaxReceiveCount: 5}},
		{LogicalID: "ExternalJobsQueue", Attributes: map[string]string{"VisibilityTimeout": "60"}},
	}
	if diff := cmp.Diff(wantQueues, tpl.Queues()); diff != "" {
		t.Errorf("Queues() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Bucket{{LogicalID: "AsyncResultsBucket"}, {LogicalID: "SkillsBucket"}, {LogicalID: "WorkspacesBucket"}}, tpl.Buckets()); diff != "" {
		t.Errorf("Buckets() (-want +got):\n%s", diff)
	}
}

func TestParseDocumentExpandsTags(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want any
	}{
		{"Ref", `!Ref Table`, map[string]any{"Ref": "Table"}},
		{"Condition", `!Condition IsProd`, map[string]any{"Condition": "IsProd"}},
		{"GetAtt short", `!GetAtt Fn.Url.FunctionUrl`, map[string]any{"Fn::GetAtt": []any{"Fn", "Url.FunctionUrl"}}},
		{"GetAtt list", `!GetAtt [Queue, Arn]`, map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}},
		{"Sub", `!Sub "https://${Api}.example"`, map[string]any{"Fn::Sub": "https://${Api}.example"}},
		{
			"nested",
			`!If [IsProd, !Join [",", [a, !Ref B]], !Ref "AWS::NoValue"]`,
			map[string]any{"Fn::If": []any{
				"IsProd",
				map[string]any{"Fn::Join": []any{",", []any{"a", map[string]any{"Ref": "B"}}}},
				map[string]any{"Ref": "AWS::NoValue"},
			}},
		},
		{"mapping argument", `!Sub {a: 1}`, map[string]any{"Fn::Sub": map[string]any{"a": 1}}},
		{"long form kept", `{"Fn::GetAtt": "A.B"}`, map[string]any{"Fn::GetAtt": "A.B"}},
		{"yaml's own tags kept", `!!str 12`, "12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := parseDocument([]byte("v: " + tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := root.Decode(&got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got["v"]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tt.yaml, diff)
			}
		})
	}
}

const functionsTemplate = `
Parameters:
  Stage: {Type: String, Default: dev}
  Secret: {Type: String}
Globals:
  Function:
    Runtime: provided.al2023
    Handler: bootstrap
    Timeout: 30
    Environment:
      Variables:
        STAGE: !Ref Stage
        SHARED: global
Resources:
  Jobs:
    Type: AWS::SQS::Queue
  Table:
    Type: AWS::DynamoDB::Table
  Worker:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/worker/
      Timeout: 900
      Environment:
        Variables:
          SHARED: own
          TABLE: !Ref Table
          QUEUE_URL: !Ref Jobs
          RETRIES: 3
      Events:
        Jobs:
          Type: SQS
          Properties:
            Queue: !GetAtt Jobs.Arn
            BatchSize: 5
        Status:
          Type: HttpApi
          Properties: {Path: "/status/{id}", Method: GET}
  Broken:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/broken/
      Environment:
        Variables:
          MISSING: !Ref NoSuchTable
          SECRET: !Ref Secret
          ARN: !GetAtt Table.Arn
`

func TestFunctions(t *testing.T) {
	tpl := parse(t, functionsTemplate)
	fns := tpl.Functions()
	if len(fns) != 2 {
		t.Fatalf("Functions() = %+v, want Broken and Worker", fns)
	}
	got := fns[1]
	got.env = nil // compared through FunctionEnv below
	want := Function{
		LogicalID: "Worker", CodeURI: "functions/worker/", Handler: "bootstrap", Runtime: "provided.al2023", Timeout: 900,
		Events: []Event{
			{
				Name: "Jobs", Type: "SQS", Queue: "Jobs", BatchSize: 5,
				Properties: map[string]any{"Queue": map[string]any{"Fn::GetAtt": []any{"Jobs", "Arn"}}, "BatchSize": 5},
			},
			{Name: "Status", Type: "HttpApi", Path: "/status/{id}", Method: "GET", Properties: map[string]any{"Path": "/status/{id}", "Method": "GET"}},
		},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Function{})); diff != "" {
		t.Errorf("Worker (-want +got):\n%s", diff)
	}

	env, err := tpl.FunctionEnv(fns[1], prefixed)
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := map[string]string{"STAGE": "dev", "SHARED": "own", "TABLE": "test-Table", "QUEUE_URL": "test-Jobs", "RETRIES": "3"}
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("FunctionEnv(Worker) (-want +got):\n%s", diff)
	}

	_, err = tpl.FunctionEnv(fns[0], prefixed)
	for _, want := range []string{"MISSING: unknown reference NoSuchTable", "SECRET: parameter Secret has no scalar Default", "ARN: unsupported intrinsic Fn::GetAtt"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("FunctionEnv(Broken) error = %v, want it to say %q", err, want)
		}
	}
}

func TestQueues(t *testing.T) {
	tpl := parse(t, `
Resources:
  Turns:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: ignored
      VisibilityTimeout: 960
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt TurnsDLQ.Arn
        maxReceiveCount: 5
  TurnsDLQ:
    Type: AWS::SQS::Queue
    Properties:
      MessageRetentionPeriod: 1209600
`)
	want := []Queue{
		{LogicalID: "Turns", Attributes: map[string]string{"VisibilityTimeout": "960"}, DeadLetter: &DeadLetter{QueueID: "TurnsDLQ", MaxReceiveCount: 5}},
		{LogicalID: "TurnsDLQ", Attributes: map[string]string{"MessageRetentionPeriod": "1209600"}},
	}
	if diff := cmp.Diff(want, tpl.Queues()); diff != "" {
		t.Errorf("Queues() (-want +got):\n%s", diff)
	}
}

func TestEvents(t *testing.T) {
	tpl := parse(t, `
Resources:
  Jobs:
    Type: AWS::SQS::Queue
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/fn/
      Events:
        Defaults:
          Type: SQS
          Properties: {Queue: !GetAtt Jobs.Arn}
        Reporting:
          Type: SQS
          Properties:
            Queue: !GetAtt [Jobs, Arn]
            BatchSize: 3
            FunctionResponseTypes: [ReportBatchItemFailures]
        Minutes:
          Type: Schedule
          Properties: {Schedule: rate(5 minutes)}
        Hour:
          Type: Schedule
          Properties: {Schedule: rate(1 hour)}
        Days:
          Type: Schedule
          Properties: {Schedule: rate(2 days)}
        Cron:
          Type: Schedule
          Properties: {Schedule: "cron(0 12 * * ? *)"}
`)
	type event struct {
		Type, Queue string
		BatchSize   int
		Reports     bool
		Schedule    string
		Rate        time.Duration
	}
	got := map[string]event{}
	for _, e := range tpl.Functions()[0].Events {
		got[e.Name] = event{e.Type, e.Queue, e.BatchSize, e.ReportsBatchItemFailures(), e.Schedule, e.Rate}
	}
	want := map[string]event{
		"Defaults":  {Type: "SQS", Queue: "Jobs", BatchSize: 10},
		"Reporting": {Type: "SQS", Queue: "Jobs", BatchSize: 3, Reports: true},
		"Minutes":   {Type: "Schedule", Schedule: "rate(5 minutes)", Rate: 5 * time.Minute},
		"Hour":      {Type: "Schedule", Schedule: "rate(1 hour)", Rate: time.Hour},
		"Days":      {Type: "Schedule", Schedule: "rate(2 days)", Rate: 48 * time.Hour},
		"Cron":      {Type: "Schedule", Schedule: "cron(0 12 * * ? *)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestBuckets(t *testing.T) {
	tpl := parse(t, `
Resources:
  Results:
    Type: AWS::S3::Bucket
    Properties:
      BucketName: ignored
      LifecycleConfiguration: {Rules: [{Id: Expire, Status: Enabled, ExpirationInDays: 30}]}
  Plain:
    Type: AWS::S3::Bucket
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Environment: {Variables: {BUCKET: !Ref Results}}
`)
	if diff := cmp.Diff([]Bucket{{LogicalID: "Plain"}, {LogicalID: "Results"}}, tpl.Buckets()); diff != "" {
		t.Errorf("Buckets() (-want +got):\n%s", diff)
	}
	env, err := tpl.FunctionEnv(tpl.Functions()[0], strings.ToLower)
	if err != nil || env["BUCKET"] != "results" {
		t.Errorf("FunctionEnv = %v, %v, want BUCKET=results", env, err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"not a mapping", `[a, b]`, "the template is not a mapping"},
		{"bad yaml", "a: [", "parsing yaml"},
		{
			"table property of the wrong shape",
			"Resources:\n  T:\n    Type: AWS::DynamoDB::Table\n    Properties: {KeySchema: nope}\n",
			"table T",
		},
		{
			"literal dead-letter arn",
			"Resources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties:\n      RedrivePolicy: {deadLetterTargetArn: 'arn:aws:sqs:us-east-1:1:dlq', maxReceiveCount: 3}\n",
			"queue Q: RedrivePolicy: deadLetterTargetArn is not !GetAtt <queue>.Arn",
		},
		{
			"unsupported queue property",
			"Resources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties:\n      RedriveAllowPolicy: {redrivePermission: denyAll}\n",
			"queue Q: unsupported property RedriveAllowPolicy",
		},
		{
			"SQS event queue given by name",
			"Resources:\n  F:\n    Type: AWS::Serverless::Function\n    Properties:\n      Events:\n        Jobs: {Type: SQS, Properties: {Queue: !GetAtt Q.QueueName}}\n",
			"function F: event Jobs: Queue is not !GetAtt <queue>.Arn",
		},
		{
			"schedule in seconds",
			"Resources:\n  F:\n    Type: AWS::Serverless::Function\n    Properties:\n      Events:\n        Tick: {Type: Schedule, Properties: {Schedule: rate(30 seconds)}}\n",
			`function F: event Tick: Schedule "rate(30 seconds)" is neither`,
		},
		{
			"schedule rate of zero",
			"Resources:\n  F:\n    Type: AWS::Serverless::Function\n    Properties:\n      Events:\n        Tick: {Type: Schedule, Properties: {Schedule: rate(0 minutes)}}\n",
			"the rate must be a positive number",
		},
		{
			"function property of the wrong shape",
			"Resources:\n  F:\n    Type: AWS::Serverless::Function\n    Properties: {Policies: AWSLambdaExecute}\n",
			"function F",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() error = %v, want it to say %q", err, tt.want)
			}
		})
	}
}
