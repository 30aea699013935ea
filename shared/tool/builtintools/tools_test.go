package builtintools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/google/go-cmp/cmp"
)

func noEnv(string) string { return "" }

func config(t *testing.T, raw string) map[string]json.RawMessage {
	t.Helper()
	var c map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return c
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   []string // the tool names offered to the model
	}{
		{name: "no tools", config: `{}`, want: nil},
		{name: "enabled by its presence", config: `{"current_time":{}}`, want: []string{"current_time"}},
		{name: "enabled explicitly", config: `{"current_time":{"enabled":true}}`, want: []string{"current_time"}},
		{name: "null entry", config: `{"current_time":null}`, want: []string{"current_time"}},
		{name: "disabled", config: `{"current_time":{"enabled":false}}`, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := builtintools.Build(config(t, tt.config), tool.Env{Getenv: noEnv})
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			var got []string
			for _, s := range set.Specs() {
				got = append(got, s.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			if set.Len() != len(tt.want) {
				t.Errorf("Len() = %d, want %d", set.Len(), len(tt.want))
			}
		})
	}
}

func TestBuildNil(t *testing.T) {
	set, err := builtintools.Build(nil, tool.Env{Getenv: noEnv})
	if err != nil {
		t.Fatalf("Build(nil): %v", err)
	}
	if set.Len() != 0 {
		t.Errorf("Len() = %d, want 0", set.Len())
	}
}

func TestBuildRejects(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   []string // substrings of the error
	}{
		{
			name:   "unknown tool",
			config: `{"current_time":{},"weather":{}}`,
			want:   []string{"tools.weather", "unknown tool", "current_time"},
		},
		{
			name:   "unknown tool even when disabled",
			config: `{"teleport":{"enabled":false}}`,
			want:   []string{"tools.teleport", "unknown tool"},
		},
		{
			name:   "enabled is a string",
			config: `{"current_time":{"enabled":"yes"}}`,
			want:   []string{"tools.current_time.enabled: must be true or false"},
		},
		{
			name:   "enabled is a number",
			config: `{"current_time":{"enabled":1}}`,
			want:   []string{"tools.current_time.enabled: must be true or false"},
		},
		{
			name:   "option the tool does not accept",
			config: `{"current_time":{"timezone":"Europe/Oslo"}}`,
			want:   []string{"tools.current_time.timezone: is not an option of current_time (it takes no options)"},
		},
		{
			name:   "entry is not an object",
			config: `{"current_time":true}`,
			want:   []string{"tools.current_time"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := builtintools.Build(config(t, tt.config), tool.Env{Getenv: noEnv})
			if err == nil {
				t.Fatalf("Build() = %v, nil; want an error", set)
			}
			if set != nil {
				t.Errorf("Build() set = %v, want nil on error", set)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Build() error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestNames(t *testing.T) {
	if diff := cmp.Diff([]string{"current_time", "googleSearch", "tavilyExtract", "tavilySearch", "test_async", "test_external_async"}, builtintools.Names()); diff != "" {
		t.Errorf("Names() (-want +got):\n%s", diff)
	}
}

func TestCurrentTime(t *testing.T) {
	set, err := builtintools.Build(config(t, `{"current_time":{}}`), tool.Env{Getenv: noEnv})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	specs := set.Specs()
	if len(specs) != 1 || specs[0].Description == "" || !json.Valid(specs[0].InputSchema) {
		t.Fatalf("Specs() = %+v, want current_time with a description and a schema", specs)
	}
	if _, err := set.Prepare("current_time", json.RawMessage(`{"zone":"UTC"}`)); err == nil {
		t.Errorf("Prepare with an argument succeeded, want the schema to reject it")
	}
	call, err := set.Prepare("current_time", json.RawMessage(`{}`))
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}

	before := time.Now().UTC().Truncate(time.Second)
	out, err := call.Run(context.Background())
	after := time.Now().UTC()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	var s string
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("result %s is not a JSON string: %v", out, err)
	}
	got, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("result %q is not RFC 3339: %v", s, err)
	}
	if !strings.HasSuffix(s, "Z") {
		t.Errorf("result %q is not in UTC (want a Z suffix)", s)
	}
	// Bounds from the clock read around the call, not a timed assertion.
	if got.Before(before) || got.After(after) {
		t.Errorf("result %s is outside the call's span [%s, %s]", got, before, after)
	}
}

func TestGoogleSearchIsProviderDefined(t *testing.T) {
	set, err := builtintools.Build(config(t, `{"googleSearch":{}}`), tool.Env{Getenv: noEnv})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	want := []model.ToolSpec{{Name: "googleSearch", ProviderTool: model.ProviderGoogleSearch}}
	if diff := cmp.Diff(want, set.Specs()); diff != "" {
		t.Errorf("Specs() (-want +got):\n%s", diff)
	}
	if _, err := set.Prepare("googleSearch", json.RawMessage(`{}`)); !errors.Is(err, tool.ErrProviderTool) {
		t.Errorf("Prepare(googleSearch) = %v, want ErrProviderTool: the harness never runs it", err)
	}

	google := agentconfig.Model{Provider: "google", RunsProviderTool: func(p string) bool { return p == model.ProviderGoogleSearch }}
	openai := agentconfig.Model{Provider: "openai", RunsProviderTool: func(string) bool { return false }}
	got, err := builtintools.Check("googleSearch", json.RawMessage(`{"async":true}`), google)
	if err != nil || len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "tools.googleSearch.async is ignored") {
		t.Errorf("Check(async on google) = %+v, %v; want accepted with one warning about async", got, err)
	}
	var fe *agentconfig.FieldError
	if _, err := builtintools.Check("googleSearch", json.RawMessage(`{}`), openai); !errors.As(err, &fe) || fe.Field != "tools.googleSearch" {
		t.Errorf("Check(googleSearch on openai) = %v, want a FieldError at tools.googleSearch", err)
	}

	// At run time async leaves the tool provider-defined, and the build logs a warning.
	var logs bytes.Buffer
	set, err = builtintools.Build(config(t, `{"googleSearch":{"async":true}}`), tool.Env{Getenv: noEnv, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil || !cmp.Equal(want, set.Specs()) {
		t.Fatalf("Build(async googleSearch) = %v, %v; want the provider-defined tool", set, err)
	}
	var rec struct{ Level, Msg, Tool string }
	if err := json.Unmarshal(logs.Bytes(), &rec); err != nil || rec.Level != "WARN" || rec.Tool != "googleSearch" || !strings.Contains(rec.Msg, "async is ignored") {
		t.Errorf("Build logged %q, want one warning that async is ignored on googleSearch", logs.String())
	}
}

func TestTestAsync(t *testing.T) {
	set, err := builtintools.Build(config(t, `{"test_async":{"async":true,"maxDelayMs":1000}}`), tool.Env{Getenv: noEnv})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	for _, in := range []string{`{"echo":"x","delayMs":1001}`, `{"echo":"x","delayMs":-1}`, `{"delayMs":10}`, `{"seconds":1,"label":"old shape"}`} {
		if _, err := set.Prepare("test_async", json.RawMessage(in)); err == nil {
			t.Errorf("Prepare(%s) succeeded, want the schema to refuse it", in)
		}
	}
	call, err := set.Prepare("test_async", json.RawMessage(`{"echo":"done","delayMs":10}`))
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	out, err := call.Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff(`{"echo":"done"}`, string(out)); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}

	call, err = set.Prepare("test_async", json.RawMessage(`{"echo":"late","delayMs":1000}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := call.Run(ctx); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped before its 1s delay had passed") {
		t.Errorf("Run on a canceled context = %v, want context.Canceled saying the delay had not passed", err)
	}
}

// Without maxDelayMs a call may wait up to 30 s; the option is bounded and the old maxSeconds is
// refused by name.
func TestTestAsyncOptions(t *testing.T) {
	set, err := builtintools.Build(config(t, `{"test_async":{}}`), tool.Env{Getenv: noEnv})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if _, err := set.Prepare("test_async", json.RawMessage(`{"echo":"x","delayMs":30000}`)); err != nil {
		t.Errorf("Prepare(delayMs 30000) = %v, want the default cap to allow it", err)
	}
	if _, err := set.Prepare("test_async", json.RawMessage(`{"echo":"x","delayMs":30001}`)); err == nil {
		t.Error("Prepare(delayMs 30001) succeeded, want the default cap of 30000 to refuse it")
	}
	for _, tt := range []struct{ raw, field string }{
		{`{"maxDelayMs":900001}`, "tools.test_async.maxDelayMs"},
		{`{"maxDelayMs":"long"}`, "tools.test_async.maxDelayMs"},
		{`{"maxSeconds":10}`, "tools.test_async.maxSeconds"},
	} {
		var fe *builtintools.FieldError
		if _, err := builtintools.Check("test_async", json.RawMessage(tt.raw), agentconfig.Model{}); !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("Check(%s) = %v, want a field error at %s", tt.raw, err, tt.field)
		}
	}
	if _, err := builtintools.Check("test_async", json.RawMessage(`{"async":true,"maxDelayMs":900000}`), agentconfig.Model{}); err != nil {
		t.Errorf("Check(maxDelayMs 900000) = %v, want it accepted", err)
	}
}

// needsApproval reaches the built tool as its policy, rules included, and bad policies are
// refused at the exact field.
func TestNeedsApprovalPolicy(t *testing.T) {
	set, err := builtintools.Build(config(t, `{"test_async":{"needsApproval":{"rules":[{"if":{"properties":{"delayMs":{"maximum":1000}}},"then":"approved"}],"otherwise":"user-approval"}}}`), tool.Env{Getenv: noEnv})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	for _, tt := range []struct {
		input string
		want  approval.Status
	}{
		{`{"echo":"short","delayMs":1000}`, approval.Approved},
		{`{"echo":"long","delayMs":5000}`, approval.UserApproval},
	} {
		call, err := set.Prepare("test_async", json.RawMessage(tt.input))
		if err != nil {
			t.Fatal(err)
		}
		if got := call.Approval().Status; got != tt.want {
			t.Errorf("Approval(%s) = %s, want %s", tt.input, got, tt.want)
		}
	}
	for _, tt := range []struct{ raw, field string }{
		{`{"needsApproval":"yes"}`, "tools.test_async.needsApproval"},
		{`{"needsApproval":{"rules":[{"if":{"type":"nope"},"then":"approved"}]}}`, "tools.test_async.needsApproval.rules.0.if"},
		{`{"needsApproval":{"rules":[{"if":{},"then":"maybe"}]}}`, "tools.test_async.needsApproval.rules.0.then"},
		{`{"needsApproval":{"otherwise":"later"}}`, "tools.test_async.needsApproval.otherwise"},
	} {
		_, err := builtintools.Check("test_async", json.RawMessage(tt.raw), agentconfig.Model{})
		var fe *builtintools.FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("Check(%s) = %v, want a field error at %s", tt.raw, err, tt.field)
		}
	}
	_, err = builtintools.Check("googleSearch", json.RawMessage(`{"needsApproval":true}`), agentconfig.Model{RunsProviderTool: func(string) bool { return true }})
	var fe *builtintools.FieldError
	if !errors.As(err, &fe) || fe.Field != "tools.googleSearch.needsApproval" {
		t.Errorf("Check(googleSearch needsApproval) = %v, want a field error: the provider runs it", err)
	}
}
