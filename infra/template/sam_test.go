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
		for _, p := range fn.Policies {
			out = append(out, policyProblems(tpl, fn.LogicalID, p)...)
		}
	}
	for _, table := range tpl.Tables() {
		if table.BillingMode != "PAY_PER_REQUEST" {
			out = append(out, fmt.Sprintf("%s: BillingMode is %q, want PAY_PER_REQUEST", table.LogicalID, table.BillingMode))
		}
	}
	if i := slices.IndexFunc(tpl.Tables(), func(t Table) bool { return t.LogicalID == "EventsTable" }); i < 0 {
		out = append(out, "EventsTable is not declared")
	} else if tpl.Tables()[i].TTLAttribute == "" {
		out = append(out, "EventsTable has no TTL")
	}
	return out
}

// policyProblems allows only SAM policy templates whose every parameter is a !Ref or !GetAtt of a
// declared resource, and whose TableName is a declared table: least privilege by construction.
func policyProblems(tpl *Template, fnID string, policy any) []string {
	m, ok := policy.(map[string]any)
	if !ok || len(m) != 1 {
		if name, ok := policy.(string); ok {
			return []string{fmt.Sprintf("%s: managed policy %s: use a SAM policy template scoped to a declared resource", fnID, name)}
		}
		return []string{fmt.Sprintf("%s: policy %v is not a SAM policy template", fnID, policy)}
	}
	var out []string
	for name, params := range m {
		args, ok := params.(map[string]any)
		if !ok || len(args) == 0 {
			return []string{fmt.Sprintf("%s: policy %s is not a SAM policy template scoped to a resource", fnID, name)}
		}
		for _, param := range slices.Sorted(maps.Keys(args)) {
			id, ok := reference(args[param])
			switch {
			case !ok || tpl.resources[id] == "":
				out = append(out, fmt.Sprintf("%s: %s %s is %v, want a !Ref or !GetAtt of a declared resource", fnID, name, param, args[param]))
			case param == "TableName" && tpl.resources[id] != "AWS::DynamoDB::Table":
				out = append(out, fmt.Sprintf("%s: %s TableName refers to %s, which is not a declared table", fnID, name, id))
			}
		}
	}
	return out
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
	)
	tests := []struct {
		name, function, table string
		want                  []string
	}{
		{name: "good", function: goodFunction, table: goodTable},
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
			want:     []string{"environment of Fn: EVENTS_TABLE: unknown reference GhostTable"},
		},
		{
			name:     "policy on an undeclared table",
			function: strings.Replace(goodFunction, "{TableName: !Ref EventsTable}", "{TableName: !Ref GhostTable}", 1),
			table:    goodTable,
			want:     []string{"Fn: DynamoDBCrudPolicy TableName is map[Ref:GhostTable], want a !Ref or !GetAtt of a declared resource"},
		},
		{
			name:     "policy on every table",
			function: strings.Replace(goodFunction, "{TableName: !Ref EventsTable}", `{TableName: "*"}`, 1),
			table:    goodTable,
			want:     []string{"Fn: DynamoDBCrudPolicy TableName is *, want a !Ref or !GetAtt of a declared resource"},
		},
		{
			name:     "TableName of something that is not a table",
			function: strings.Replace(goodFunction, "{TableName: !Ref EventsTable}", "{TableName: !Ref Fn}", 1),
			table:    goodTable,
			want:     []string{"Fn: DynamoDBCrudPolicy TableName refers to Fn, which is not a declared table"},
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
			want:     []string{"Fn: policy Statement is not a SAM policy template scoped to a resource"},
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
`, tt.function, tt.table)
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
