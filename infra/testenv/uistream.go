package testenv

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
)

// CheckUIStream runs the AI SDK stream checker (infra/node/check-ui-stream.mjs) on an SSE body
// and returns its stdout ({"chunkTypes":[…],"message":<the UIMessage the AI SDK builds>}), its
// stderr, and its error (non-nil when it rejects the stream).
func CheckUIStream(t testing.TB, body []byte) (stdout []byte, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(Node(t), filepath.Join(Root(t), "infra", "node", "check-ui-stream.mjs"))
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
