package localrunner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// bigResultBytes is what the MCP tool of bigAgent returns: far more than a stored message holds.
const bigResultBytes = 1 << 20

// maxShownBytes is the documented bound of a tool result as the model and clients get it.
const maxShownBytes = 48 << 10

// bigAgent calls the tool dump of the MCP server at url for bigResultBytes of text, then
// answers.
func bigAgent(url string) string {
	return `{"name":"big","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"big__dump","input":{"bytes":` + strconv.Itoa(bigResultBytes) + `}}]},
		{"text":"Read it."}]},
		"mcpServers":{"big":{"url":"` + url + `"}}}`
}

// cutWithNote checks that text, a tool result as a client got it, is the beginning of whole
// followed by the note of how much was left out.
func cutWithNote(t *testing.T, what, text, whole string) {
	t.Helper()
	i := strings.LastIndex(text, "\n\n[truncated: this result is "+strconv.Itoa(len(whole))+" bytes; only its first ")
	if i < 0 || !strings.HasPrefix(whole, text[:i]) || i < maxShownBytes/2 {
		t.Errorf("%s: %d bytes ending %q, want the result's beginning and the note", what, len(text), text[max(0, len(text)-200):])
	}
}

// An /async turn whose MCP tool returns a megabyte completes: /status shows the result as the
// model got it (cut to 48 KiB, with the note) and where the whole is kept, the object there holds
// the whole, and the turn's stream, replayed, shows the same cut result.
func TestLargeToolResultReachesClientsCut(t *testing.T) {
	url := testenv.BigMCPServer(t)
	e := newAsyncEnvOn(t, testenv.Stack(t), func(o *localrunner.Options) {
		getenv := o.Getenv
		o.Getenv = func(k string) string {
			if k == "MCP_PRIVATE_ENDPOINTS" {
				return "allow"
			}
			return getenv(k)
		}
	})
	agentID := e.agent(t, bigAgent(url))
	s := e.async(t, `{"agentId":"`+agentID+`","message":"go"}`)
	done, _ := e.waitStatus(t, s.EventID, "completed")
	if done.Text == nil || *done.Text != "Read it." {
		t.Errorf("the answer is %v, want Read it.", done.Text)
	}
	whole := testenv.BigText(bigResultBytes)
	wholeJSON, _ := json.Marshal(whole)
	// The result as /status shows it, its pointer to the whole included.
	var shows struct {
		Messages []struct {
			Parts []struct {
				ToolName    string          `json:"toolName"`
				Output      json.RawMessage `json:"output"`
				OutputBytes int             `json:"outputBytes"`
				OutputKey   string          `json:"outputKey"`
			} `json:"parts"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(done.raw), &shows); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range shows.Messages {
		for _, p := range m.Parts {
			if p.ToolName != "big__dump" || p.Output == nil {
				continue
			}
			found = true
			var shown string
			if err := json.Unmarshal(p.Output, &shown); err != nil || len(p.Output) > maxShownBytes {
				t.Fatalf("/status shows the result as %d bytes (%v), want a JSON string within %d", len(p.Output), err, maxShownBytes)
			}
			cutWithNote(t, "/status's result", shown, whole)
			if p.OutputBytes != len(wholeJSON) || !strings.HasPrefix(p.OutputKey, "tool-results/"+e.accountID+"/"+s.ConversationID+"/") {
				t.Fatalf("/status shows outputBytes %d and outputKey %q, want %d and a key of the account's conversation", p.OutputBytes, p.OutputKey, len(wholeJSON))
			}
			obj, err := e.stack.S3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(e.stack.Bucket), Key: aws.String(p.OutputKey)})
			if err != nil {
				t.Fatalf("reading the kept result: %v", err)
			}
			var kept bytes.Buffer
			_, _ = kept.ReadFrom(obj.Body)
			obj.Body.Close()
			if !bytes.Equal(kept.Bytes(), wholeJSON) {
				t.Errorf("the kept result is %d bytes, want the tool's whole result of %d", kept.Len(), len(wholeJSON))
			}
		}
	}
	if !found {
		t.Fatalf("/status shows no result of big__dump: %.2000s", done.raw)
	}

	res := call(t, e.srv, http.MethodGet, "/chat/"+s.ConversationID+"/stream", e.secret, "")
	if res.status != http.StatusOK {
		t.Fatalf("replaying the turn = %d %s", res.status, res.body)
	}
	var replayed string
	for _, c := range testenv.Chunks(t, bytes.NewReader(res.body)) {
		if c["type"] == "tool-output-available" {
			replayed, _ = c["output"].(string)
		}
	}
	cutWithNote(t, "the replayed tool-output-available", replayed, whole)
}

// toolResultObjects counts the account's kept tool results in the results bucket.
func toolResultObjects(t *testing.T, stack *testenv.Resources, accountID string) int {
	t.Helper()
	out, err := stack.S3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(stack.Bucket), Prefix: aws.String("tool-results/" + accountID + "/")})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}
