package template

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/xeipuuv/gojsonschema"
)

// lookahead is the one pattern of SAM's schema that Go's regexp cannot compile.
const lookahead = "^(?!AWS::Serverless::).+$"

// samSchema compiles SAM's JSON schema from shared/ beside the checkout.
func samSchema(t *testing.T) *gojsonschema.Schema {
	t.Helper()
	templatePath, err := Find(".")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(templatePath), "..", "shared", "schemas", "sam.schema.json"))
	if err != nil {
		t.Fatalf("reading SAM's schema, expected in shared/schemas beside the checkout: %v", err)
	}
	if n := bytes.Count(raw, mustJSON(lookahead)); n != 1 {
		t.Fatalf("SAM's schema has %d patterns %s, want 1 to rewrite", n, lookahead)
	}
	raw = bytes.Replace(raw, mustJSON(lookahead), mustJSON(notPrefixPattern("AWS::Serverless::")), 1)
	schema, err := gojsonschema.NewSchema(gojsonschema.NewBytesLoader(raw))
	if err != nil {
		t.Fatalf("compiling SAM's schema: %v", err)
	}
	return schema
}

// notPrefixPattern is an RE2 pattern for the non-empty strings that do not start with prefix:
// what ECMAScript writes ^(?!prefix).+$. A string qualifies if it differs from the prefix at
// some character, or ends before the prefix does.
func notPrefixPattern(prefix string) string {
	runes := []rune(prefix)
	alt := ""
	for i := len(runes) - 1; i >= 0; i-- {
		c := regexp.QuoteMeta(string(runes[i]))
		next := ""
		if alt != "" {
			next = "|" + c + "(?:$|" + alt + ")"
		}
		alt = "[^" + c + "]" + next
	}
	return "^(?:" + alt + ").*$"
}

func TestNotPrefixPattern(t *testing.T) {
	re := regexp.MustCompile(notPrefixPattern("AWS::Serverless::"))
	tests := []struct {
		in   string
		want bool
	}{
		{"AWS::DynamoDB::Table", true},
		{"AWS::SQS::Queue", true},
		{"Custom::Thing", true},
		{"AWS::Serverless", true},
		{"AWS::Serverless::Function", false},
		{"AWS::Serverless::", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := re.MatchString(tt.in); got != tt.want {
			t.Errorf("match(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// schemaErrors validates a template's YAML, intrinsics in their JSON form, against SAM's schema.
func schemaErrors(t *testing.T, schema *gojsonschema.Schema, src []byte) []string {
	t.Helper()
	root, err := parseDocument(src)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := root.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("converting the template to JSON: %v", err)
	}
	result, err := schema.Validate(gojsonschema.NewBytesLoader(data))
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, e := range result.Errors() {
		errs = append(errs, e.String())
	}
	return errs
}

func TestTemplateMatchesSAMSchema(t *testing.T) {
	schema := samSchema(t)
	path, err := Find(".")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if errs := schemaErrors(t, schema, src); len(errs) > 0 {
		t.Errorf("template.yaml does not match SAM's schema:\n%s", strings.Join(errs, "\n"))
	}

	// The rewritten pattern must still keep SAM types out of the catch-all for other resources,
	// or a misspelt function property would pass.
	bad := []byte("Resources:\n  F:\n    Type: AWS::Serverless::Function\n    Properties: {CodeUrl: functions/f/}\n")
	if errs := schemaErrors(t, schema, bad); len(errs) == 0 {
		t.Error("a function with the property CodeUrl matches SAM's schema, want errors")
	}
}

// problems lists what the schema cannot see in a template whose CodeUri folders are under root.
func problems(tpl *Template, root string) []string {
	var out []string
	for _, fn := range tpl.Functions() {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(fn.CodeURI), "main.go")); err != nil {
			out = append(out, fmt.Sprintf("%s: CodeUri %q has no main.go", fn.LogicalID, fn.CodeURI))
		}
		if _, err := tpl.FunctionEnv(fn, func(id string) string { return id }); err != nil {
			out = append(out, err.Error())
		}
		granted := map[string]bool{}
		for _, p := range fn.Policies {
			out = append(out, policyProblems(tpl, fn.LogicalID, p)...)
			for _, id := range policyResources(p) {
				granted[id] = true
			}
		}
		out = append(out, eventProblems(tpl, fn)...)
		// Least privilege both ways: what the function is told about it may use, and it may
		// use nothing it is not told about (a queue it reads through an event SAM grants).
		named := map[string]bool{}
		for _, id := range envResources(tpl, fn) {
			named[id] = true
			if !granted[id] {
				out = append(out, fmt.Sprintf("%s: its environment refers to %s, which none of its policies grants", fn.LogicalID, id))
			}
		}
		for _, e := range fn.Events {
			if e.Queue != "" {
				named[e.Queue] = true
			}
		}
		for _, id := range slices.Sorted(maps.Keys(granted)) {
			if !named[id] && tpl.resources[id] != "" {
				out = append(out, fmt.Sprintf("%s: a policy grants %s, which neither its environment nor its events name", fn.LogicalID, id))
			}
		}
	}
	for _, table := range tpl.Tables() {
		if table.BillingMode != "PAY_PER_REQUEST" {
			out = append(out, fmt.Sprintf("%s: BillingMode is %q, want PAY_PER_REQUEST", table.LogicalID, table.BillingMode))
		}
	}
	for _, q := range tpl.Queues() {
		if dl := q.DeadLetter; dl != nil && tpl.resources[dl.QueueID] != "AWS::SQS::Queue" {
			out = append(out, fmt.Sprintf("%s: its dead-letter queue %s is not a declared queue", q.LogicalID, dl.QueueID))
		}
	}
	if i := slices.IndexFunc(tpl.Tables(), func(t Table) bool { return t.LogicalID == "EventsTable" }); i < 0 {
		out = append(out, "EventsTable is not declared")
	} else if tpl.Tables()[i].TTLAttribute == "" {
		out = append(out, "EventsTable has no TTL")
	}
	return out
}

// eventProblems checks a function's SQS events: the queue is declared, and its visibility
// timeout is no shorter than the function's timeout, which CloudFormation refuses (a message
// would come back while the function still works on it).
func eventProblems(tpl *Template, fn Function) []string {
	var out []string
	for _, e := range fn.Events {
		if e.Type != "SQS" {
			continue
		}
		i := slices.IndexFunc(tpl.Queues(), func(q Queue) bool { return q.LogicalID == e.Queue })
		if i < 0 {
			out = append(out, fmt.Sprintf("%s: SQS event %s reads %s, which is not a declared queue", fn.LogicalID, e.Name, e.Queue))
			continue
		}
		visibility, timeout := 30, fn.Timeout // SQS's and Lambda's defaults
		if v, ok := tpl.Queues()[i].Attributes["VisibilityTimeout"]; ok {
			visibility, _ = strconv.Atoi(v)
		}
		if timeout == 0 {
			timeout = 3
		}
		if visibility < timeout {
			out = append(out, fmt.Sprintf("%s: SQS event %s reads %s, whose VisibilityTimeout %d s is shorter than the function's Timeout %d s",
				fn.LogicalID, e.Name, e.Queue, visibility, timeout))
		}
	}
	return out
}

// envResources returns the resources a function's environment refers to with !Ref.
func envResources(tpl *Template, fn Function) []string {
	var ids []string
	for _, key := range slices.Sorted(maps.Keys(fn.env)) {
		n := fn.env[key]
		if name, arg, ok := intrinsic(&n); ok && name == "Ref" && tpl.resources[arg.Value] != "" {
			ids = append(ids, arg.Value)
		}
	}
	return ids
}

// policyResources returns the resources a SAM policy template is scoped to.
func policyResources(policy any) []string {
	m, _ := policy.(map[string]any)
	var ids []string
	for _, params := range m {
		args, _ := params.(map[string]any)
		for _, v := range args {
			if id, ok := reference(v); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// policyParams says, for the parameters of SAM's policy templates that name a resource, which
// type of resource it must be and how to refer to it: Ref, or the attribute of a !GetAtt.
var policyParams = map[string]struct{ Type, Attribute string }{
	"TableName":    {"AWS::DynamoDB::Table", "Ref"},
	"QueueName":    {"AWS::SQS::Queue", "QueueName"},
	"BucketName":   {"AWS::S3::Bucket", "Ref"},
	"KeyId":        {"AWS::KMS::Key", "Ref"},
	"FunctionName": {"AWS::Serverless::Function", "Ref"},
}

// policyProblems allows only SAM policy templates whose every parameter is a !Ref or !GetAtt of a
// declared resource of the right type, referred to as the policy template expects (a queue by
// !GetAtt Q.QueueName, not by its URL): least privilege by construction.
func policyProblems(tpl *Template, fnID string, policy any) []string {
	m, ok := policy.(map[string]any)
	if !ok || len(m) != 1 {
		if name, ok := policy.(string); ok {
			return []string{fmt.Sprintf("%s: managed policy %s: use a SAM policy template scoped to a declared resource", fnID, name)}
		}
		return []string{fmt.Sprintf("%s: policy %v is not a SAM policy template", fnID, policy)}
	}
	var out []string
	if alt, ok := m["Fn::If"].([]any); ok {
		if !secretPolicy(tpl, alt) {
			out = append(out, fmt.Sprintf("%s: policy %v: the only conditional policy allowed is AWSSecretsManagerGetSecretValuePolicy on the ARN a parameter gives, or none", fnID, alt))
		}
		return out
	}
	if stmts, ok := m["Statement"].([]any); ok {
		for _, st := range stmts {
			if !manageConnections(tpl, st) {
				out = append(out, fmt.Sprintf("%s: policy statement %v: the only inline statement allowed is execute-api:ManageConnections on POST or DELETE @connections of a declared WebSocket API", fnID, st))
			}
		}
		return out
	}
	for name, params := range m {
		args, ok := params.(map[string]any)
		if !ok || len(args) == 0 {
			return []string{fmt.Sprintf("%s: policy %s is not a SAM policy template scoped to a resource", fnID, name)}
		}
		for _, param := range slices.Sorted(maps.Keys(args)) {
			id, ok := reference(args[param])
			if !ok || tpl.resources[id] == "" {
				out = append(out, fmt.Sprintf("%s: %s %s is %v, want a !Ref or !GetAtt of a declared resource", fnID, name, param, args[param]))
				continue
			}
			want, known := policyParams[param]
			if !known {
				continue
			}
			if tpl.resources[id] != want.Type {
				out = append(out, fmt.Sprintf("%s: %s %s refers to %s, which is not a declared %s", fnID, name, param, id, want.Type))
			} else if got := attribute(args[param]); got != want.Attribute {
				out = append(out, fmt.Sprintf("%s: %s %s takes %s of %s, want %s", fnID, name, param, got, id, want.Attribute))
			}
		}
	}
	return out
}

// secretPolicy reports whether a !If's arguments grant reading one secret whose ARN a
// parameter gives (a secret the operator made, such as NATS credentials), or nothing: [a
// condition, {AWSSecretsManagerGetSecretValuePolicy: {SecretArn: !Ref P}}, !Ref AWS::NoValue].
func secretPolicy(tpl *Template, alt []any) bool {
	if len(alt) != 3 {
		return false
	}
	cond, _ := alt[0].(string)
	then, _ := alt[1].(map[string]any)
	args, _ := then["AWSSecretsManagerGetSecretValuePolicy"].(map[string]any)
	param, _ := args["SecretArn"].(map[string]any)
	name, _ := param["Ref"].(string)
	_, isParam := tpl.parameters[name]
	none, _ := alt[2].(map[string]any)
	return cond != "" && len(then) == 1 && len(args) == 1 && len(param) == 1 && isParam && len(none) == 1 && none["Ref"] == "AWS::NoValue"
}

// manageConnections reports whether an inline statement grants exactly what posting to
// WebSocket clients, or closing their connections, needs (SAM has no policy template for it):
// execute-api:ManageConnections on POST or DELETE @connections of one declared
// AWS::ApiGatewayV2::Api.
func manageConnections(tpl *Template, st any) bool {
	m, _ := st.(map[string]any)
	if len(m) != 3 || m["Effect"] != "Allow" || m["Action"] != "execute-api:ManageConnections" {
		return false
	}
	res, _ := m["Resource"].(map[string]any)
	sub, _ := res["Fn::Sub"].(string)
	rest, ok := strings.CutPrefix(sub, "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${")
	if !ok {
		return false
	}
	api, rest, ok := strings.Cut(rest, "}/")
	if !ok || tpl.resources[api] != "AWS::ApiGatewayV2::Api" {
		return false
	}
	for _, method := range []string{"POST", "DELETE"} {
		if stage, ok := strings.CutSuffix(rest, "/"+method+"/@connections/*"); ok {
			return !strings.Contains(stage, "*")
		}
	}
	return false
}

// attribute is "Ref" for a {"Ref": id} and the attribute of a {"Fn::GetAtt": [id, attribute]}.
func attribute(v any) string {
	m, _ := v.(map[string]any)
	if args, ok := m["Fn::GetAtt"].([]any); ok && len(args) == 2 {
		a, _ := args[1].(string)
		return a
	}
	return "Ref"
}

// reference returns the logical id a {"Ref": id} or {"Fn::GetAtt": [id, attribute]} points to.
func reference(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", false
	}
	if id, ok := m["Ref"].(string); ok {
		return id, true
	}
	if args, ok := m["Fn::GetAtt"].([]any); ok && len(args) == 2 {
		id, ok := args[0].(string)
		return id, ok
	}
	return "", false
}

func TestTemplateProblems(t *testing.T) {
	path, err := Find(".")
	if err != nil {
		t.Fatal(err)
	}
	if got := problems(load(t), filepath.Dir(path)); len(got) > 0 {
		t.Errorf("template.yaml has problems:\n%s", strings.Join(got, "\n"))
	}
}

func TestProblemsFound(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "functions", "fn"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "functions", "fn", "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const (
		goodFunction = `
      CodeUri: functions/fn/
      Environment: {Variables: {EVENTS_TABLE: !Ref EventsTable}}
      Policies:
        - DynamoDBCrudPolicy: {TableName: !Ref EventsTable}`
		goodTable = `
      BillingMode: PAY_PER_REQUEST
      TimeToLiveSpecification: {AttributeName: expiresAt, Enabled: true}`
		// A function that sends to Jobs, keeps results in Results and is the consumer of Work.
		asyncFunction = `
      CodeUri: functions/fn/
      Timeout: 60
      Environment: {Variables: {JOBS_QUEUE_URL: !Ref Jobs, RESULTS_BUCKET: !Ref Results}}
      Events:
        Work:
          Type: SQS
          Properties: {Queue: !GetAtt Work.Arn, FunctionResponseTypes: [ReportBatchItemFailures]}
      Policies:
        - SQSSendMessagePolicy: {QueueName: !GetAtt Jobs.QueueName}
        - S3CrudPolicy: {BucketName: !Ref Results}`
		// A statement granting ManageConnections on one method (%s) of the API Ws's @connections.
		manage     = "\n        - Statement: [{Effect: Allow, Action: execute-api:ManageConnections, Resource: !Sub 'arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${Ws}/live/%s/@connections/*'}]"
		goodQueues = `
      VisibilityTimeout: 120
      RedrivePolicy: {deadLetterTargetArn: !GetAtt Jobs.Arn, maxReceiveCount: 5}`
	)
	tests := []struct {
		name, function, table string
		work                  string // the properties of the queue Work
		want                  []string
	}{
		{name: "good", function: goodFunction, table: goodTable},
		{name: "good with queues and a bucket", function: asyncFunction, table: goodTable, work: goodQueues},
		{
			name:     "CodeUri without main.go",
			function: strings.Replace(goodFunction, "functions/fn/", "functions/gone/", 1),
			table:    goodTable,
			want:     []string{`Fn: CodeUri "functions/gone/" has no main.go`},
		},
		{
			name:     "environment refers to an undeclared table",
			function: strings.Replace(goodFunction, "!Ref EventsTable}}", "!Ref GhostTable}}", 1),
			table:    goodTable,
			want: []string{
				"environment of Fn: EVENTS_TABLE: unknown reference GhostTable",
				"Fn: a policy grants EventsTable, which neither its environment nor its events name",
			},
		},
		{
			name:     "policy on an undeclared table",
			function: strings.Replace(goodFunction, "{TableName: !Ref EventsTable}", "{TableName: !Ref GhostTable}", 1),
			table:    goodTable,
			want: []string{
				"Fn: DynamoDBCrudPolicy TableName is map[Ref:GhostTable], want a !Ref or !GetAtt of a declared resource",
				"Fn: its environment refers to EventsTable, which none of its policies grants",
			},
		},
		{
			name:     "policy on every table",
			function: goodFunction + "\n        - DynamoDBReadPolicy: {TableName: \"*\"}",
			table:    goodTable,
			want:     []string{"Fn: DynamoDBReadPolicy TableName is *, want a !Ref or !GetAtt of a declared resource"},
		},
		{
			name:     "TableName of something that is not a table",
			function: goodFunction + "\n        - DynamoDBReadPolicy: {TableName: !Ref Fn}",
			table:    goodTable,
			want: []string{
				"Fn: DynamoDBReadPolicy TableName refers to Fn, which is not a declared AWS::DynamoDB::Table",
				"Fn: a policy grants Fn, which neither its environment nor its events name",
			},
		},
		{
			name:     "managed policy",
			function: goodFunction + "\n        - AmazonDynamoDBFullAccess",
			table:    goodTable,
			want:     []string{"Fn: managed policy AmazonDynamoDBFullAccess: use a SAM policy template scoped to a declared resource"},
		},
		{
			name:     "inline statement",
			function: goodFunction + "\n        - Statement: [{Effect: Allow, Action: 'dynamodb:*', Resource: '*'}]",
			table:    goodTable,
			want:     []string{"Fn: policy statement map[Action:dynamodb:* Effect:Allow Resource:*]: the only inline statement allowed is execute-api:ManageConnections on POST or DELETE @connections of a declared WebSocket API"},
		},
		{
			name:     "posting to and closing WebSocket connections",
			function: goodFunction + fmt.Sprintf(manage, "POST") + fmt.Sprintf(manage, "DELETE"),
			table:    goodTable,
		},
		{
			name:     "managing WebSocket connections with any method",
			function: goodFunction + fmt.Sprintf(manage, "*"),
			table:    goodTable,
			want:     []string{"Fn: policy statement map[Action:execute-api:ManageConnections Effect:Allow Resource:map[Fn::Sub:arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${Ws}/live/*/@connections/*]]: the only inline statement allowed is execute-api:ManageConnections on POST or DELETE @connections of a declared WebSocket API"},
		},
		{
			name:     "queue policy given the queue's URL",
			function: strings.Replace(asyncFunction, "!GetAtt Jobs.QueueName", "!Ref Jobs", 1),
			table:    goodTable, work: goodQueues,
			want: []string{"Fn: SQSSendMessagePolicy QueueName takes Ref of Jobs, want QueueName"},
		},
		{
			name:     "queue policy on an undeclared queue",
			function: strings.Replace(asyncFunction, "!GetAtt Jobs.QueueName", "!GetAtt Ghost.QueueName", 1),
			table:    goodTable, work: goodQueues,
			want: []string{
				"Fn: SQSSendMessagePolicy QueueName is map[Fn::GetAtt:[Ghost QueueName]], want a !Ref or !GetAtt of a declared resource",
				"Fn: its environment refers to Jobs, which none of its policies grants",
			},
		},
		{
			name:     "bucket policy on a table",
			function: asyncFunction + "\n        - S3ReadPolicy: {BucketName: !Ref EventsTable}",
			table:    goodTable, work: goodQueues,
			want: []string{
				"Fn: S3ReadPolicy BucketName refers to EventsTable, which is not a declared AWS::S3::Bucket",
				"Fn: a policy grants EventsTable, which neither its environment nor its events name",
			},
		},
		{
			name:     "environment names a bucket no policy grants",
			function: strings.Replace(asyncFunction, "\n        - S3CrudPolicy: {BucketName: !Ref Results}", "", 1),
			table:    goodTable, work: goodQueues,
			want: []string{"Fn: its environment refers to Results, which none of its policies grants"},
		},
		{
			name:     "SQS event on an undeclared queue",
			function: strings.Replace(asyncFunction, "!GetAtt Work.Arn", "!GetAtt Ghost.Arn", 1),
			table:    goodTable, work: goodQueues,
			want: []string{"Fn: SQS event Work reads Ghost, which is not a declared queue"},
		},
		{
			name:     "visibility timeout shorter than the consumer's timeout",
			function: asyncFunction,
			table:    goodTable, work: "\n      VisibilityTimeout: 30",
			want: []string{"Fn: SQS event Work reads Work, whose VisibilityTimeout 30 s is shorter than the function's Timeout 60 s"},
		},
		{
			name:     "default visibility timeout shorter than the consumer's timeout",
			function: asyncFunction,
			table:    goodTable,
			want:     []string{"Fn: SQS event Work reads Work, whose VisibilityTimeout 30 s is shorter than the function's Timeout 60 s"},
		},
		{
			name:     "dead-letter queue undeclared",
			function: asyncFunction,
			table:    goodTable, work: strings.Replace(goodQueues, "Jobs.Arn", "Ghost.Arn", 1),
			want: []string{"Work: its dead-letter queue Ghost is not a declared queue"},
		},
		{
			name:     "provisioned table",
			function: goodFunction,
			table:    strings.Replace(goodTable, "PAY_PER_REQUEST", "PROVISIONED", 1),
			want:     []string{`EventsTable: BillingMode is "PROVISIONED", want PAY_PER_REQUEST`},
		},
		{
			name:     "EventsTable without TTL",
			function: goodFunction,
			table:    "\n      BillingMode: PAY_PER_REQUEST",
			want:     []string{"EventsTable has no TTL"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work := tt.work
			if work == "" {
				work = " {}"
			}
			src := fmt.Sprintf(`
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:%s
  EventsTable:
    Type: AWS::DynamoDB::Table
    Properties:%s
      AttributeDefinitions: [{AttributeName: eventKey, AttributeType: S}]
      KeySchema: [{AttributeName: eventKey, KeyType: HASH}]
  Jobs:
    Type: AWS::SQS::Queue
  Work:
    Type: AWS::SQS::Queue
    Properties:%s
  Results:
    Type: AWS::S3::Bucket
  Ws:
    Type: AWS::ApiGatewayV2::Api
`, tt.function, tt.table, work)
			got := problems(parse(t, src), root)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("EventsTable missing", func(t *testing.T) {
		got := problems(parse(t, "Resources: {}"), root)
		if diff := cmp.Diff([]string{"EventsTable is not declared"}, got); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
	})
}
