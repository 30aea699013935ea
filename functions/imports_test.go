package functions_test

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are the packages only a function that runs model turns or serves WebSockets needs: the
// model SDKs, the WebSocket libraries, and the harness's turn machinery that links them.
var heavy = []string{
	"github.com/openai/openai-go",
	"github.com/anthropics/anthropic-sdk-go",
	"google.golang.org/genai",
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime",
	"github.com/coder/websocket",
	"github.com/gorilla/websocket",
	"github.com/agentharness/harness/shared/api",
	"github.com/agentharness/harness/shared/provider",
}

// Each Lambda links what its main runs: the sweeper and async-tool-complete settle rows and
// queue messages, account-manage stores accounts and checks agent configs, so none may link a
// model SDK, a WebSocket library or the turn machinery (each would be a 50 MB binary again).
func TestFunctionsWithoutTurnsLinkNoModelOrWebSocket(t *testing.T) {
	for _, fn := range []string{"sweeper", "async-tool-complete", "account-manage"} {
		t.Run(fn, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", "./"+fn).Output()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v", fn, err)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 50 {
				t.Fatalf("go list listed %d packages for ./%s: %v", len(deps), fn, deps)
			}
			for _, dep := range deps {
				for _, h := range heavy {
					if dep == h || strings.HasPrefix(dep, h+"/") {
						t.Errorf("%s links %s", fn, dep)
					}
				}
			}
		})
	}
}
