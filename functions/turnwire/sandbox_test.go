package turnwire

import (
	"testing"

	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/sandbox"
	"github.com/aws/aws-sdk-go-v2/aws"
)

// On Lambda the sandbox function runs agents' bash only when the deployment chose it; off
// Lambda, bubblewrap does.
func TestSandboxRunner(t *testing.T) {
	onLambda := func(function, backend string) lambdadeps.Config {
		var c lambdadeps.Config
		c.Runtime.MemoryMB = "1024"
		c.Sandbox.Function, c.Sandbox.Backend = function, backend
		return c
	}
	if r := sandboxRunner(onLambda("harness-SandboxFunction", "none"), aws.Config{}); r != nil {
		t.Errorf("SANDBOX_BACKEND=none on Lambda gave %T, want no runner", r)
	}
	if r := sandboxRunner(onLambda("", "lambda"), aws.Config{}); r != nil {
		t.Errorf("no SANDBOX_FUNCTION on Lambda gave %T, want no runner", r)
	}
	if r, ok := sandboxRunner(onLambda("harness-SandboxFunction", "lambda"), aws.Config{}).(*sandbox.Lambda); !ok || r.Function != "harness-SandboxFunction" {
		t.Errorf("SANDBOX_BACKEND=lambda gave %#v, want the sandbox function's runner", r)
	}
	if _, ok := sandboxRunner(lambdadeps.Config{}, aws.Config{}).(*sandbox.Local); !ok {
		t.Error("off Lambda the runner is not bubblewrap")
	}
}
