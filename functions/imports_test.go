package functions_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
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

// agents are the packages only a function that reads agents needs: their configs, their store,
// the sealer of their secrets and the WebSocket poster (agentdeps.Deps).
var agents = []string{
	shared + "agentconfig",
	shared + "state/agentstore",
	shared + "state/secrets",
	shared + "wire/wsconn",
}

// Each Lambda links what its main runs and no other edge. The sweeper and async-tool-complete
// settle rows and queue messages, account-manage stores accounts and checks agent configs, so
// none may link a model SDK, a WebSocket library or the turn engine (each would be a 50 MB
// binary again); the sweeper and async-tool-complete read no agent either, and the sandbox
// function, which runs commands, reads and links nothing of the deployment's (no state, tool or
// edge). The three that run turns link the engine and their own edge only: harness-processing
// serves HTTP and knows nothing of WebSocket connections; ws-gateway and async-worker serve no
// HTTP turns.
var forbidden = map[string][]string{
	"sandbox":             slices.Concat(heavy, agents, []string{shared + "state", shared + "edge", shared + "tool"}),
	"sweeper":             slices.Concat(heavy, agents),
	"async-tool-complete": slices.Concat(heavy, agents),
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
// lambdadeps and agentdeps (a function's dependencies) are read only under functions/, where
// each function's wire builds its edge; state, tool, model and wire sit below the engine and the
// edges and import neither; and no edge imports another, so a transport is one package. aisdk is
// the AI SDK's UI message stream, a protocol two edges speak (SSE and NATS): the one exception.
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
			case (rel == "lambda/lambdadeps" || rel == "lambda/agentdeps") && layer != "lambda":
				t.Errorf("%s imports %s: a function's dependencies are read only under functions/", pkg, imp)
			case (layer == "state" || layer == "tool" || layer == "model" || layer == "wire") && (to == "turn" || to == "edge"):
				t.Errorf("%s imports %s: %s sits below the engine and the edges", pkg, imp, layer)
			case layer == "edge" && to == "edge" && !protocol[imp]:
				t.Errorf("%s imports %s: an edge never imports another edge", pkg, imp)
			}
		}
	}
}

// readers are the functions of the standard library that read the process environment.
var readers = map[string]bool{"os.Getenv": true, "os.LookupEnv": true, "os.Environ": true, "os.ExpandEnv": true, "syscall.Getenv": true}

// envReaders may read the environment: lambdadeps, which reads it once into each function's
// Config; awsclient, which loads the AWS SDK's own configuration (AWS_ENDPOINT_URL*...) where
// the SDK reads it; and modeltest, the provider tests' helpers, which no function links, for a
// provider's real key when fixtures are recorded.
var envReaders = []string{"../shared/lambda/lambdadeps", "../shared/wire/awsclient", "../shared/model/modeltest"}

// No package under shared/ or functions/ but envReaders reads the environment (tests aside, and
// whatever their build tags): each function's wire hands the packages their part of its config.
func TestOnlyLambdadepsReadsTheEnvironment(t *testing.T) {
	var found []string
	for _, root := range []string{"../shared", "."} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && readers[x.Name+"."+sel.Sel.Name] {
					found = append(found, path)
					if !slices.Contains(envReaders, filepath.Dir(path)) {
						t.Errorf("%s reads the environment (%s.%s): read it into lambdadeps.Config, and have the function's wire pass the value down", path, x.Name, sel.Sel.Name)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(found, "../shared/lambda/lambdadeps/lambdadeps.go") {
		t.Fatalf("found the environment read in %v, not in lambdadeps.go: the scan looked in the wrong place", found)
	}
}
