// Package template reads the project's AWS SAM template (template.yaml), so that the local runner,
// the tests and the LocalStack hook build tables, queues, buckets, event sources and function
// environments from the same definition that deploys them.
package template

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Template is a parsed SAM template.
type Template struct {
	parameters map[string]yaml.Node // logical id → Default (a zero Node without one)
	resources  map[string]string    // logical id → resource type
	tables     []Table
	queues     []Queue
	buckets    []Bucket
	functions  []Function
}

// Table is an AWS::DynamoDB::Table. Its fields keep CloudFormation's names, which are also those of
// the DynamoDB API and its JSON.
type Table struct {
	LogicalID              string
	BillingMode            string                `yaml:"BillingMode"`
	AttributeDefinitions   []AttributeDefinition `yaml:"AttributeDefinitions"`
	KeySchema              []KeyElement          `yaml:"KeySchema"`
	GlobalSecondaryIndexes []Index               `yaml:"GlobalSecondaryIndexes"`
	// TTLAttribute names the expiry attribute when TimeToLiveSpecification enables TTL.
	TTLAttribute string `yaml:"-"`
}

// AttributeDefinition declares the type (S, N or B) of a key attribute.
type AttributeDefinition struct {
	AttributeName string `yaml:"AttributeName"`
	AttributeType string `yaml:"AttributeType"`
}

// KeyElement is one part of a key: HASH or RANGE.
type KeyElement struct {
	AttributeName string `yaml:"AttributeName"`
	KeyType       string `yaml:"KeyType"`
}

// Index is a global secondary index.
type Index struct {
	IndexName  string       `yaml:"IndexName"`
	KeySchema  []KeyElement `yaml:"KeySchema"`
	Projection Projection   `yaml:"Projection"`
}

// Projection says which attributes an index copies.
type Projection struct {
	ProjectionType   string   `yaml:"ProjectionType"`
	NonKeyAttributes []string `yaml:"NonKeyAttributes" json:",omitempty"`
}

// Queue is an AWS::SQS::Queue.
type Queue struct {
	LogicalID string
	// Attributes are the queue's scalar properties, which CloudFormation names as SQS's
	// CreateQueue names its attributes: {"VisibilityTimeout": "60", "FifoQueue": "true"}.
	Attributes map[string]string
	// DeadLetter is its RedrivePolicy, nil without one.
	DeadLetter *DeadLetter
}

// DeadLetter sends a message to another queue of the template once it has been received
// MaxReceiveCount times.
type DeadLetter struct {
	QueueID         string // the dead-letter queue's logical id
	MaxReceiveCount int
}

// Bucket is an AWS::S3::Bucket. Its properties (lifecycle rules, encryption) mean nothing locally;
// the caller names buckets, so BucketName is ignored like a queue's QueueName.
type Bucket struct {
	LogicalID string
}

// Function is an AWS::Serverless::Function with the template's Globals applied.
type Function struct {
	LogicalID string
	CodeURI   string // the folder that holds its main package, relative to the template
	Handler   string
	Runtime   string
	// Architectures is the instruction set the bootstrap is built for (arm64 here).
	Architectures []string
	Timeout       int          // seconds; 0 leaves Lambda's default
	URL           *FunctionURL // nil without a FunctionUrlConfig
	Events        []Event      // by name
	// Policies are as written, intrinsics as maps: "SomeManagedPolicy" or
	// {"DynamoDBCrudPolicy": {"TableName": {"Ref": "EventsTable"}}}.
	Policies []any

	env map[string]yaml.Node // read through Template.FunctionEnv
}

// FunctionURL is a function's FunctionUrlConfig.
type FunctionURL struct {
	AuthType   string `yaml:"AuthType"`
	InvokeMode string `yaml:"InvokeMode"` // BUFFERED (the default) or RESPONSE_STREAM
}

// Event is one of a function's event sources.
type Event struct {
	Name string
	Type string // HttpApi, Api, SQS, Schedule, ...
	// Path and Method are set for HttpApi and Api events.
	Path   string
	Method string
	// Queue, BatchSize and FunctionResponseTypes are set for SQS events: Queue is the logical
	// id of the queue that `Queue: !GetAtt <queue>.Arn` names, BatchSize the most messages one
	// invocation gets (Lambda's default, 10, when the template sets none).
	Queue                 string
	BatchSize             int
	FunctionResponseTypes []string
	// Schedule is a Schedule event's expression as written; Rate is its period when it is a
	// rate() expression, 0 for cron().
	Schedule string
	Rate     time.Duration
	// Properties are as written, intrinsics as maps ({"Queue": {"Fn::GetAtt": ["Q", "Arn"]}}).
	Properties map[string]any
}

// ReportsBatchItemFailures tells whether an SQS event lists ReportBatchItemFailures, so that
// Lambda deletes only the messages its handler did not report as failed; without it a batch is
// deleted whole or not at all.
func (e Event) ReportsBatchItemFailures() bool {
	return slices.Contains(e.FunctionResponseTypes, "ReportBatchItemFailures")
}

// Load reads and parses the template at path.
func Load(path string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading template: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", filepath.Base(path), err)
	}
	return t, nil
}

// Find returns the path of the template.yaml beside the go.mod found by walking up from dir.
func Find(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("finding template: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			path := filepath.Join(dir, "template.yaml")
			if _, err := os.Stat(path); err != nil {
				return "", fmt.Errorf("finding template: %w", err)
			}
			return path, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding template: no go.mod above the directory")
		}
		dir = parent
	}
}

// Parse parses a template.
func Parse(data []byte) (*Template, error) {
	root, err := parseDocument(data)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Parameters map[string]struct {
			Default yaml.Node `yaml:"Default"`
		} `yaml:"Parameters"`
		Globals struct {
			Function yaml.Node `yaml:"Function"`
		} `yaml:"Globals"`
		Resources map[string]struct {
			Type       string    `yaml:"Type"`
			Properties yaml.Node `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := root.Decode(&doc); err != nil {
		return nil, fmt.Errorf("reading template: %w", err)
	}
	t := &Template{parameters: map[string]yaml.Node{}, resources: map[string]string{}}
	for id, p := range doc.Parameters {
		t.parameters[id] = p.Default
	}
	for _, id := range slices.Sorted(maps.Keys(doc.Resources)) {
		r := doc.Resources[id]
		t.resources[id] = r.Type
		props := &r.Properties
		if props.Kind == 0 { // no Properties
			props = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		switch r.Type {
		case "AWS::DynamoDB::Table":
			table, err := parseTable(id, props)
			if err != nil {
				return nil, fmt.Errorf("table %s: %w", id, err)
			}
			t.tables = append(t.tables, table)
		case "AWS::SQS::Queue":
			queue, err := parseQueue(id, props)
			if err != nil {
				return nil, fmt.Errorf("queue %s: %w", id, err)
			}
			t.queues = append(t.queues, queue)
		case "AWS::S3::Bucket":
			t.buckets = append(t.buckets, Bucket{LogicalID: id})
		case "AWS::Serverless::Function":
			fn, err := parseFunction(id, merge(&doc.Globals.Function, props))
			if err != nil {
				return nil, fmt.Errorf("function %s: %w", id, err)
			}
			t.functions = append(t.functions, fn)
		}
	}
	return t, nil
}

func parseTable(id string, props *yaml.Node) (Table, error) {
	var t struct {
		Table `yaml:",inline"`
		TTL   struct {
			AttributeName string `yaml:"AttributeName"`
			Enabled       bool   `yaml:"Enabled"`
		} `yaml:"TimeToLiveSpecification"`
	}
	if err := props.Decode(&t); err != nil {
		return Table{}, err
	}
	t.Table.LogicalID = id
	if t.TTL.Enabled {
		t.Table.TTLAttribute = t.TTL.AttributeName
	}
	return t.Table, nil
}

func parseQueue(id string, props *yaml.Node) (Queue, error) {
	q := Queue{LogicalID: id, Attributes: map[string]string{}}
	for i := 0; i < len(props.Content); i += 2 {
		key, value := props.Content[i].Value, props.Content[i+1]
		switch {
		case key == "QueueName" || key == "Tags":
			// The caller names queues; tags mean nothing locally.
		case key == "RedrivePolicy":
			dl, err := parseRedrive(value)
			if err != nil {
				return Queue{}, fmt.Errorf("RedrivePolicy: %w", err)
			}
			q.DeadLetter = dl
		case value.Kind == yaml.ScalarNode:
			q.Attributes[key] = value.Value
		default:
			return Queue{}, fmt.Errorf("unsupported property %s", key)
		}
	}
	return q, nil
}

func parseRedrive(n *yaml.Node) (*DeadLetter, error) {
	var p struct {
		Target          yaml.Node `yaml:"deadLetterTargetArn"`
		MaxReceiveCount int       `yaml:"maxReceiveCount"`
	}
	if err := n.Decode(&p); err != nil {
		return nil, err
	}
	queue, ok := getAtt(&p.Target, "Arn")
	if !ok {
		return nil, errors.New("deadLetterTargetArn is not !GetAtt <queue>.Arn")
	}
	return &DeadLetter{QueueID: queue, MaxReceiveCount: p.MaxReceiveCount}, nil
}

func parseFunction(id string, props *yaml.Node) (Function, error) {
	var p struct {
		CodeURI     string       `yaml:"CodeUri"`
		Handler     string       `yaml:"Handler"`
		Runtime     string       `yaml:"Runtime"`
		Arch        []string     `yaml:"Architectures"`
		Timeout     int          `yaml:"Timeout"`
		URL         *FunctionURL `yaml:"FunctionUrlConfig"`
		Policies    []any        `yaml:"Policies"`
		Environment struct {
			Variables map[string]yaml.Node `yaml:"Variables"`
		} `yaml:"Environment"`
		Events map[string]struct {
			Type       string    `yaml:"Type"`
			Properties yaml.Node `yaml:"Properties"`
		} `yaml:"Events"`
	}
	if err := props.Decode(&p); err != nil {
		return Function{}, err
	}
	fn := Function{
		LogicalID: id, CodeURI: p.CodeURI, Handler: p.Handler, Runtime: p.Runtime, Architectures: p.Arch,
		Timeout: p.Timeout, URL: p.URL, Policies: p.Policies, env: p.Environment.Variables,
	}
	for _, name := range slices.Sorted(maps.Keys(p.Events)) {
		e := p.Events[name]
		ev, err := parseEvent(name, e.Type, &e.Properties)
		if err != nil {
			return Function{}, fmt.Errorf("event %s: %w", name, err)
		}
		fn.Events = append(fn.Events, ev)
	}
	return fn, nil
}

func parseEvent(name, typ string, props *yaml.Node) (Event, error) {
	ev := Event{Name: name, Type: typ}
	if props.Kind != 0 {
		if err := props.Decode(&ev.Properties); err != nil {
			return Event{}, err
		}
	}
	ev.Path, _ = ev.Properties["Path"].(string)
	ev.Method, _ = ev.Properties["Method"].(string)
	switch typ {
	case "SQS":
		var p struct {
			Queue                 yaml.Node `yaml:"Queue"`
			BatchSize             int       `yaml:"BatchSize"`
			FunctionResponseTypes []string  `yaml:"FunctionResponseTypes"`
		}
		if err := props.Decode(&p); err != nil {
			return Event{}, err
		}
		queue, ok := getAtt(&p.Queue, "Arn")
		if !ok {
			return Event{}, errors.New("Queue is not !GetAtt <queue>.Arn")
		}
		ev.Queue, ev.BatchSize, ev.FunctionResponseTypes = queue, p.BatchSize, p.FunctionResponseTypes
		if ev.BatchSize == 0 {
			ev.BatchSize = 10
		}
	case "Schedule":
		var p struct {
			Schedule string `yaml:"Schedule"`
		}
		if err := props.Decode(&p); err != nil {
			return Event{}, err
		}
		rate, err := parseSchedule(p.Schedule)
		if err != nil {
			return Event{}, err
		}
		ev.Schedule, ev.Rate = p.Schedule, rate
	}
	return ev, nil
}

// getAtt returns the logical id of a node that is !GetAtt <id>.<attribute>.
func getAtt(n *yaml.Node, attribute string) (string, bool) {
	var target []string
	if name, arg, ok := intrinsic(n); ok && name == "Fn::GetAtt" {
		_ = arg.Decode(&target) // a malformed argument fails the check below
	}
	if len(target) != 2 || target[0] == "" || target[1] != attribute {
		return "", false
	}
	return target[0], true
}

var rateExpr = regexp.MustCompile(`^rate\((\d+) (minutes?|hours?|days?)\)$`)

// parseSchedule reads an EventBridge schedule expression: rate(N unit) gives its period,
// cron(...) 0.
func parseSchedule(expr string) (time.Duration, error) {
	if len(expr) > 5 && expr[:5] == "cron(" && expr[len(expr)-1] == ')' {
		return 0, nil
	}
	m := rateExpr.FindStringSubmatch(expr)
	if m == nil {
		return 0, fmt.Errorf("Schedule %q is neither rate(N minutes|hours|days) nor cron(...)", expr)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("Schedule %q: the rate must be a positive number", expr)
	}
	unit := map[byte]time.Duration{'m': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[m[2][0]]
	return time.Duration(n) * unit, nil
}

// Tables returns the template's tables, by logical id.
func (t *Template) Tables() []Table { return slices.Clone(t.tables) }

// Queues returns the template's queues, by logical id.
func (t *Template) Queues() []Queue { return slices.Clone(t.queues) }

// Buckets returns the template's S3 buckets, by logical id.
func (t *Template) Buckets() []Bucket { return slices.Clone(t.buckets) }

// Functions returns the template's functions, by logical id.
func (t *Template) Functions() []Function { return slices.Clone(t.functions) }

// FunctionEnv returns fn's environment variables (Globals merged with its own). A `!Ref` to a
// parameter becomes the parameter's Default; a `!Ref` to a resource becomes ref(logicalID), which
// must give the value Ref has in AWS: a table's or a bucket's name, but a queue's URL (the local
// runner's naming looks queues up among the URLs it provisioned). Unknown references and other
// intrinsics are an error that names them.
func (t *Template) FunctionEnv(fn Function, ref func(logicalID string) string) (map[string]string, error) {
	env := map[string]string{}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(fn.env)) {
		value, err := t.resolve(fn.env[key], ref)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		env[key] = value
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("environment of %s: %w", fn.LogicalID, err)
	}
	return env, nil
}

func (t *Template) resolve(n yaml.Node, ref func(string) string) (string, error) {
	if n.Kind == yaml.ScalarNode {
		return n.Value, nil
	}
	fn, arg, ok := intrinsic(&n)
	if !ok {
		return "", errors.New("not a string")
	}
	if fn == "Fn::Sub" && arg.Kind == yaml.ScalarNode {
		return t.sub(arg.Value, ref)
	}
	if fn != "Ref" {
		return "", fmt.Errorf("unsupported intrinsic %s", fn)
	}
	return t.ref(arg.Value, ref)
}

// localPseudo are the values pseudo parameters take locally.
var localPseudo = map[string]string{
	"AWS::Region": "us-east-1", "AWS::Partition": "aws", "AWS::AccountId": "000000000000",
	"AWS::StackName": "harness", "AWS::URLSuffix": "amazonaws.com",
}

// sub resolves a !Sub string whose ${…} are parameters, resources or pseudo parameters.
func (t *Template) sub(s string, ref func(string) string) (string, error) {
	var b strings.Builder
	for {
		start := strings.Index(s, "${")
		if start < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		end := strings.Index(s[start:], "}")
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ in !Sub %q", s)
		}
		b.WriteString(s[:start])
		name := s[start+2 : start+end]
		if v, ok := localPseudo[name]; ok {
			b.WriteString(v)
		} else {
			v, err := t.ref(name, ref)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
		}
		s = s[start+end+1:]
	}
}

// ref resolves a Ref: a parameter's Default, or ref(logicalID) for a resource.
func (t *Template) ref(id string, ref func(string) string) (string, error) {
	if def, ok := t.parameters[id]; ok {
		if def.Kind != yaml.ScalarNode {
			return "", fmt.Errorf("parameter %s has no scalar Default", id)
		}
		return def.Value, nil
	}
	if _, ok := t.resources[id]; ok {
		return ref(id), nil
	}
	return "", fmt.Errorf("unknown reference %s", id)
}
