package builtintools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/tool"
)

// probe declares one variable of each kind: a required secret that falls back to the harness
// environment, a required scoped text only the agent's config may supply, and an optional one.
var probe = Spec{Variables: []Variable{
	{Name: "PROBE_KEY", Option: "apiKey", Type: Secret, Required: true, Description: "the probe's key"},
	{Name: "PROBE_TENANT", Option: "tenant", Type: Text, Required: true, Scoped: true, Description: "the agent's tenant"},
	{Name: "PROBE_REGION", Option: "region", Type: Text, Description: "optional region"},
}}

func TestVariablesResolve(t *testing.T) {
	env := map[string]string{"PROBE_KEY": "env-key", "PROBE_TENANT": "env-tenant", "PROBE_REGION": "env-region"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name     string
		options  string
		getenv   func(string) string
		want     map[string]string
		missing  string // name of the variable the error must be about
		wantText string // part of the error text
	}{
		{
			name:    "config values win over the environment",
			options: `{"apiKey":"cfg-key","tenant":"acme","region":"eu","maxResults":3}`,
			getenv:  getenv,
			want:    map[string]string{"PROBE_KEY": "cfg-key", "PROBE_TENANT": "acme", "PROBE_REGION": "eu"},
		},
		{
			name:    "unscoped variables fall back to the environment",
			options: `{"tenant":"acme"}`,
			getenv:  getenv,
			want:    map[string]string{"PROBE_KEY": "env-key", "PROBE_TENANT": "acme", "PROBE_REGION": "env-region"},
		},
		{
			name:     "a scoped variable never comes from the environment",
			options:  `{"apiKey":"cfg-key"}`,
			getenv:   getenv,
			missing:  "PROBE_TENANT",
			wantText: "set config.tools.probe.tenant, the conversation's variable PROBE_TENANT (it is scoped: the harness environment variable PROBE_TENANT is not used)",
		},
		{
			name:     "a required unscoped variable names both places",
			options:  `{"tenant":"acme"}`,
			getenv:   func(string) string { return "" },
			missing:  "PROBE_KEY",
			wantText: "tool probe needs the secret variable PROBE_KEY (the probe's key): set config.tools.probe.apiKey, the conversation's variable PROBE_KEY or the harness environment variable PROBE_KEY",
		},
		{
			name:    "an optional variable may stay unset",
			options: `{"apiKey":"k","tenant":"acme"}`,
			getenv:  func(string) string { return "" },
			want:    map[string]string{"PROBE_KEY": "k", "PROBE_TENANT": "acme"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts Options
			if err := json.Unmarshal([]byte(tt.options), &opts); err != nil {
				t.Fatal(err)
			}
			c, err := probe.context("probe", opts, tt.getenv, tool.Vars{})
			if tt.missing != "" {
				var me *MissingVariableError
				if !errors.As(err, &me) || me.Variable.Name != tt.missing || !strings.Contains(err.Error(), tt.wantText) {
					t.Fatalf("err = %v, want a missing %s saying %q", err, tt.missing, tt.wantText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Vars) != len(tt.want) {
				t.Errorf("vars = %v, want %v", c.Vars, tt.want)
			}
			for k, v := range tt.want {
				if c.Vars[k] != v {
					t.Errorf("vars[%s] = %q, want %q", k, c.Vars[k], v)
				}
			}
			// The factory sees its own options only, never the variables' options.
			for _, k := range []string{"apiKey", "tenant", "region"} {
				if _, ok := c.Options[k]; ok {
					t.Errorf("options still hold %s: %v", k, c.Options)
				}
			}
		})
	}
}

// A variable that says where the harness sends (test_external_async's queue) comes from the
// deployment alone: a conversation's variable of its name is not taken.
func TestDeploymentVariableIgnoresTheThread(t *testing.T) {
	thread := tool.Vars{Get: func(name string) string { return "https://sqs.example/attacker-chosen" }}
	c, err := testExternalAsyncSpec.context("test_external_async", Options{}, func(k string) string {
		return map[string]string{"EXTERNAL_JOBS_QUEUE_URL": "https://sqs.example/operators-queue"}[k]
	}, thread)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Vars["EXTERNAL_JOBS_QUEUE_URL"]; got != "https://sqs.example/operators-queue" {
		t.Errorf("EXTERNAL_JOBS_QUEUE_URL resolved to %q, want the deployment's queue", got)
	}
	_, err = testExternalAsyncSpec.context("test_external_async", Options{}, func(string) string { return "" }, thread)
	var me *MissingVariableError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "only the deployment sets") {
		t.Errorf("without the deployment's queue: err = %v, want it missing, saying only the deployment sets it", err)
	}
}

func TestCheckSpec(t *testing.T) {
	for name, spec := range specs {
		if err := checkSpec(name, spec); err != nil {
			t.Errorf("shipped spec: %v", err)
		}
	}
	if err := checkSpec("probe", probe); err != nil {
		t.Errorf("probe: %v", err)
	}
	bad := []struct {
		v    Variable
		want string
	}{
		{Variable{Name: "X", Type: Text, Scoped: true}, "is scoped but has no config option"},
		{Variable{Option: "x", Type: Text}, "without a name"},
		{Variable{Name: "X", Option: "x", Type: "password"}, `has type "password"`},
	}
	for _, b := range bad {
		err := checkSpec("probe", Spec{Variables: []Variable{b.v}})
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("checkSpec(%+v) = %v, want an error saying %q", b.v, err, b.want)
		}
	}
}
