package testenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// CheckUIStream runs the AI SDK stream checker (infra/node/check-ui-stream.mjs) on an SSE body
// and returns its stdout ({"chunkTypes":[…],"message":<the UIMessage the AI SDK builds>}), its
// stderr, and its error (non-nil when it rejects the stream).
func CheckUIStream(t testing.TB, body []byte) (stdout []byte, stderr string, err error) {
	t.Helper()
	return CheckUIStreamFrom(t, nil, body)
}

// CheckUIStreamFrom is CheckUIStream for a body that continues the UIMessage message (a
// previous check's "message"), as a chat client's next response to it does; nil for none.
func CheckUIStreamFrom(t testing.TB, message json.RawMessage, body []byte) (stdout []byte, stderr string, err error) {
	t.Helper()
	args := []string{filepath.Join(Root(t), "infra", "node", "check-ui-stream.mjs")}
	if message != nil {
		path := filepath.Join(t.TempDir(), "message.json")
		if err := os.WriteFile(path, message, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, path)
	}
	cmd := exec.Command(Node(t), args...)
	cmd.Stdin = bytes.NewReader(body)
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	stdout, err = cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running the stream checker: %v", err)
	}
	return stdout, errBuf.String(), err
}
