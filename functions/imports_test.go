package functions_test

import (
	"os/exec"
	"strings"
	"testing"
)

const shared = "github.com/agentharness/harness/shared/"

// heavy are the packages only a function that runs model turns needs: the model SDKs, the
// WebSocket libraries, and the harness's turn engine and its edges, which link them.
var heavy = []string{
	"github.com/openai/openai-go",
	"github.com/anthropics/anthropic-sdk-go",
	"google.golang.org/genai",
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime",
	"github.com/coder/websocket",
	"github.com/gorilla/websocket",
	shared + "model/provider",
	shared + "turn",
	shared + "edge/chathttp",
	shared + "edge/appserver",
	shared + "edge/worker",
}

// Each Lambda links what its main runs and no other edge. The sweeper and async-tool-complete
// settle rows and queue messages, account-manage stores accounts and checks agent configs, so
// none may link a model SDK, a WebSocket library or the turn engine (each would be a 50 MB
// binary again). The three that run turns link the engine and their own edge only:
// harness-processing serves HTTP and knows nothing of WebSocket connections; ws-gateway and
// async-worker serve no HTTP turns.
var forbidden = map[string][]string{
	"sweeper":             heavy,
	"async-tool-complete": heavy,
	"account-manage":      heavy,
	"harness-processing":  {shared + "edge/appserver", shared + "edge/worker", shared + "state/connections", shared + "edge/completion"},
	"ws-gateway":          {shared + "edge/chathttp", shared + "edge/worker", shared + "edge/accounts", shared + "edge/completion"},
	"async-worker":        {shared + "edge/chathttp"},
}

func TestEachFunctionLinksOnlyItsEdge(t *testing.T) {
	for fn, banned := range forbidden {
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
				for _, b := range banned {
					// turn/subagent (a child's ids and settle, which the sweeper reads) is not the engine.
					if dep == b || (strings.HasPrefix(dep, b+"/") && b != shared+"turn") {
						t.Errorf("%s links %s", fn, dep)
					}
				}
			}
		})
	}
}

// The tree's layers, as rules on what the packages under shared/ import (tests aside):
// lambdadeps (a function's dependencies) is read only under functions/, where each function's
// wire builds its edge; state, tool, model and wire sit below the engine and the edges and
// import neither; and no edge imports another, so a transport is one package. aisdk is the AI
// SDK's UI message stream, a protocol two edges speak (SSE and NATS): the one exception.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../shared/...").Output()
	if err != nil {
		t.Fatalf("go list ../shared/...: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 40 {
		t.Fatalf("go list listed %d packages under shared/", len(lines))
	}
	protocol := map[string]bool{shared + "edge/aisdk": true}
	for _, line := range lines {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		layer, _, _ := strings.Cut(strings.TrimPrefix(pkg, shared), "/")
		for _, imp := range imports {
			rel, ok := strings.CutPrefix(imp, shared)
			if !ok {
				continue
			}
			to, _, _ := strings.Cut(rel, "/")
			switch {
			case rel == "lambda/lambdadeps" && layer != "lambda":
				t.Errorf("%s imports lambdadeps: a function's dependencies are read only under functions/", pkg)
			case (layer == "state" || layer == "tool" || layer == "model" || layer == "wire") && (to == "turn" || to == "edge"):
				t.Errorf("%s imports %s: %s sits below the engine and the edges", pkg, imp, layer)
			case layer == "edge" && to == "edge" && !protocol[imp]:
				t.Errorf("%s imports %s: an edge never imports another edge", pkg, imp)
			}
		}
	}
}
