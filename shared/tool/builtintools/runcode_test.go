package builtintools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/sandbox"
	"github.com/agentharness/harness/shared/tool"
)

// evalSpec is a tool that evaluates its input's code as a tool of the kind 001 names would:
// through Context.RunCode, and never without it.
var evalSpec = Spec{New: func(c Context) ([]tool.Tool, error) {
	if c.RunCode == nil {
		return nil, errors.New("this deployment has no sandbox to evaluate code in")
	}
	return []tool.Tool{{
		Name:        "eval_probe",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`),
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			var in struct{ Code string }
			json.Unmarshal(input, &in)
			res, err := c.RunCode(ctx, sandbox.Request{Command: in.Code})
			if err != nil {
				return nil, err
			}
			return res.Stdout, nil
		},
	}}, nil
}}

// Build hands a tool the deployment's sandbox (tool.Env.RunCode) as Context.RunCode: the code
// runs there, in a process of its own, with none of the harness's environment.
func TestRunCodeReachesTheTools(t *testing.T) {
	specs["eval_probe"], optionSchemas["eval_probe"] = evalSpec, optionSchemas["current_time"] // no options
	t.Cleanup(func() { delete(specs, "eval_probe"); delete(optionSchemas, "eval_probe") })
	config := map[string]json.RawMessage{"eval_probe": json.RawMessage(`{"enabled":true}`)}

	if _, err := Build(config, tool.Env{}); err == nil || !strings.Contains(err.Error(), "no sandbox") {
		t.Errorf("Build without a sandbox: %v, want the tool's refusal", err)
	}
	bwrap := os.Getenv("HARNESS_BWRAP")
	if bwrap == "" {
		t.Fatal("HARNESS_BWRAP is not set: run the tests with `make test`, whose stack finds or installs bubblewrap")
	}
	t.Setenv("RUNCODE_CANARY", "canary-9912")
	set, err := Build(config, tool.Env{RunCode: (&sandbox.Local{Bwrap: bwrap}).Run})
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.Prepare("eval_probe", json.RawMessage(`{"code":"echo $$ \"[$RUNCODE_CANARY]\""}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out string
	json.Unmarshal(raw, &out)
	// PID 2: the command's shell, under bwrap, in a PID namespace of its own.
	if out != "2 []\n" {
		t.Errorf("the code printed %q, want its own PID namespace and no canary", out)
	}
}
