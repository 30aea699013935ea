package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
	"github.com/google/go-cmp/cmp"
)

// echo returns its input decoded, so a test can see what Execute received.
func echo(_ context.Context, input json.RawMessage) (any, error) {
	var v any
	err := json.Unmarshal(input, &v)
	return v, err
}

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"],"additionalProperties":false}`

func TestNewSetRejects(t *testing.T) {
	tests := []struct {
		name  string
		tools []tool.Tool
		want  string // a substring of the error
	}{
		{
			name:  "empty name",
			tools: []tool.Tool{{Name: "", Execute: echo}},
			want:  "empty name",
		},
		{
			name:  "duplicate name",
			tools: []tool.Tool{{Name: "a", Execute: echo}, {Name: "b", Execute: echo}, {Name: "a", Execute: echo}},
			want:  `duplicate tool name "a"`,
		},
		{
			name:  "missing Execute",
			tools: []tool.Tool{{Name: "noop"}},
			want:  `tool "noop" has no Execute`,
		},
		{
			name:  "schema is not JSON",
			tools: []tool.Tool{{Name: "broken", InputSchema: json.RawMessage(`{"type":`), Execute: echo}},
			want:  `input schema of tool "broken"`,
		},
		{
			name:  "schema with an unknown type",
			tools: []tool.Tool{{Name: "odd", InputSchema: json.RawMessage(`{"type":"strange"}`), Execute: echo}},
			want:  `input schema of tool "odd"`,
		},
		{
			name:  "schema with a remote $ref",
			tools: []tool.Tool{{Name: "remote", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1:9/x"}}}`), Execute: echo}},
			want:  `input schema of tool "remote": properties.a.$ref: "http://127.0.0.1:9/x" is not a local reference`,
		},
		{
			name:  "schema with a malformed required list",
			tools: []tool.Tool{{Name: "req", InputSchema: json.RawMessage(`{"type":"object","required":"city"}`), Execute: echo}},
			want:  `input schema of tool "req"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := tool.NewSet(tt.tools...)
			if err == nil {
				t.Fatalf("NewSet() = %v, nil; want an error containing %q", set, tt.want)
			}
			if set != nil {
				t.Errorf("NewSet() set = %v, want nil on error", set)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewSet() error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestSpecs(t *testing.T) {
	set, err := tool.NewSet(
		tool.Tool{Name: "zeta", Description: "last", InputSchema: json.RawMessage(weatherSchema), Execute: echo},
		tool.Tool{Name: "alpha", Description: "first", Execute: echo},
		tool.Tool{Name: "mid", Description: "middle", Execute: echo},
	)
	if err != nil {
		t.Fatalf("NewSet: %v", err)
	}
	want := []model.ToolSpec{
		{Name: "alpha", Description: "first", InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)},
		{Name: "mid", Description: "middle", InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)},
		{Name: "zeta", Description: "last", InputSchema: json.RawMessage(weatherSchema)},
	}
	if diff := cmp.Diff(want, set.Specs()); diff != "" {
		t.Errorf("Specs() (-want +got):\n%s", diff)
	}
	if got, want := set.Len(), 3; got != want {
		t.Errorf("Len() = %d, want %d", got, want)
	}
}

func TestNewSetEmpty(t *testing.T) {
	set, err := tool.NewSet()
	if err != nil {
		t.Fatalf("NewSet(): %v", err)
	}
	if got := set.Len(); got != 0 {
		t.Errorf("Len() = %d, want 0", got)
	}
	if got := set.Specs(); len(got) != 0 {
		t.Errorf("Specs() = %v, want none", got)
	}
}

func newWeatherSet(t *testing.T) *tool.Set {
	t.Helper()
	set, err := tool.NewSet(
		tool.Tool{Name: "weather", InputSchema: json.RawMessage(weatherSchema), Execute: echo},
		tool.Tool{Name: "no_args", Execute: echo},
	)
	if err != nil {
		t.Fatalf("NewSet: %v", err)
	}
	return set
}

func TestPrepareUnknownTool(t *testing.T) {
	set := newWeatherSet(t)
	call, err := set.Prepare("forecast", json.RawMessage(`{}`))
	if call != nil {
		t.Errorf("Prepare() call = %v, want nil", call)
	}
	if !errors.Is(err, tool.ErrUnknownTool) {
		t.Fatalf("Prepare() error = %v, want errors.Is(err, ErrUnknownTool)", err)
	}
	if !strings.Contains(err.Error(), `"forecast"`) {
		t.Errorf("Prepare() error = %q, want it to name the tool %q", err, "forecast")
	}
	var inputErr *tool.InputError
	if errors.As(err, &inputErr) {
		t.Errorf("Prepare() error is an *InputError (%v), want only ErrUnknownTool", inputErr)
	}
}

func TestPrepareInputErrors(t *testing.T) {
	tests := []struct {
		name   string
		tool   string
		input  string
		reason string // a substring of one of the reasons
	}{
		{name: "missing required field", tool: "weather", input: `{"days":2}`, reason: "city is required"},
		{name: "wrong type", tool: "weather", input: `{"city":"Oslo","days":"two"}`, reason: "Invalid type"},
		{name: "extra property", tool: "weather", input: `{"city":"Oslo","unit":"C"}`, reason: "Additional property unit is not allowed"},
		{name: "not an object", tool: "weather", input: `["Oslo"]`, reason: "Invalid type"},
		{name: "empty input for a required field", tool: "weather", input: ``, reason: "city is required"},
		{name: "invalid JSON", tool: "weather", input: `{"city":`, reason: "not valid JSON"},
		{name: "invalid JSON for a tool without arguments", tool: "no_args", input: `nope`, reason: "not valid JSON"},
		{name: "argument for a tool without arguments", tool: "no_args", input: `{"x":1}`, reason: "Additional property x is not allowed"},
	}
	set := newWeatherSet(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call, err := set.Prepare(tt.tool, json.RawMessage(tt.input))
			if call != nil {
				t.Errorf("Prepare() call = %v, want nil", call)
			}
			var inputErr *tool.InputError
			if !errors.As(err, &inputErr) {
				t.Fatalf("Prepare() error = %v (%T), want *tool.InputError", err, err)
			}
			if inputErr.Tool != tt.tool {
				t.Errorf("InputError.Tool = %q, want %q", inputErr.Tool, tt.tool)
			}
			if !strings.Contains(strings.Join(inputErr.Reasons, "\n"), tt.reason) {
				t.Errorf("InputError.Reasons = %q, want one containing %q", inputErr.Reasons, tt.reason)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.tool) || !strings.Contains(msg, tt.reason) {
				t.Errorf("Error() = %q, want it to name %q and %q", msg, tt.tool, tt.reason)
			}
			if errors.Is(err, tool.ErrUnknownTool) {
				t.Errorf("Prepare() error = %v, want it not to be ErrUnknownTool", err)
			}
		})
	}
}

func TestInputErrorListsEveryReason(t *testing.T) {
	set := newWeatherSet(t)
	_, err := set.Prepare("weather", json.RawMessage(`{"days":"two","unit":"C"}`))
	var inputErr *tool.InputError
	if !errors.As(err, &inputErr) {
		t.Fatalf("Prepare() error = %v, want *tool.InputError", err)
	}
	if got, want := len(inputErr.Reasons), 3; got != want {
		t.Errorf("len(Reasons) = %d, want %d (missing city, days type, extra unit): %q", got, want, inputErr.Reasons)
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name    string
		execute func(context.Context, json.RawMessage) (any, error)
		input   string
		want    string
	}{
		{name: "echoes valid input", execute: echo, input: `{"city":"Oslo","days":3}`, want: `{"city":"Oslo","days":3}`},
		{
			name:    "string result",
			execute: func(context.Context, json.RawMessage) (any, error) { return "2026-01-01T00:00:00Z", nil },
			input:   `{"city":"Oslo"}`,
			want:    `"2026-01-01T00:00:00Z"`,
		},
		{
			name: "struct result",
			execute: func(context.Context, json.RawMessage) (any, error) {
				return struct {
					TempC int    `json:"tempC"`
					Sky   string `json:"sky"`
				}{TempC: -3, Sky: "clear"}, nil
			},
			input: `{"city":"Oslo"}`,
			want:  `{"tempC":-3,"sky":"clear"}`,
		},
		{
			name:    "nil result",
			execute: func(context.Context, json.RawMessage) (any, error) { return nil, nil },
			input:   `{"city":"Oslo"}`,
			want:    `null`,
		},
		{
			name:    "raw JSON result is kept",
			execute: func(context.Context, json.RawMessage) (any, error) { return json.RawMessage(`[1,2]`), nil },
			input:   `{"city":"Oslo"}`,
			want:    `[1,2]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := tool.NewSet(tool.Tool{Name: "weather", InputSchema: json.RawMessage(weatherSchema), Execute: tt.execute})
			if err != nil {
				t.Fatalf("NewSet: %v", err)
			}
			call, err := set.Prepare("weather", json.RawMessage(tt.input))
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			got, err := call.Run(context.Background())
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Run() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestRunEmptyInputIsEmptyObject(t *testing.T) {
	for _, input := range []json.RawMessage{nil, {}} {
		var got json.RawMessage
		set, err := tool.NewSet(tool.Tool{Name: "no_args", Execute: func(_ context.Context, in json.RawMessage) (any, error) {
			got = in
			return "ok", nil
		}})
		if err != nil {
			t.Fatalf("NewSet: %v", err)
		}
		call, err := set.Prepare("no_args", input)
		if err != nil {
			t.Fatalf("Prepare(%q): %v", input, err)
		}
		if _, err := call.Run(context.Background()); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if string(got) != `{}` {
			t.Errorf("Prepare(%q): Execute received %q, want {}", input, got)
		}
	}
}

func TestRunPassesContext(t *testing.T) {
	type key struct{}
	var got any
	set, err := tool.NewSet(tool.Tool{Name: "ctx", Execute: func(ctx context.Context, _ json.RawMessage) (any, error) {
		got = ctx.Value(key{})
		return nil, nil
	}})
	if err != nil {
		t.Fatalf("NewSet: %v", err)
	}
	call, err := set.Prepare("ctx", nil)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if _, err := call.Run(context.WithValue(context.Background(), key{}, "request-1")); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got != "request-1" {
		t.Errorf("Execute saw context value %v, want %q", got, "request-1")
	}
}

var errBackend = errors.New("backend unavailable")

func TestRunFailures(t *testing.T) {
	tests := []struct {
		name    string
		execute func(context.Context, json.RawMessage) (any, error)
		wantIs  error  // if set, errors.Is(err, wantIs) must hold
		wantMsg string // a substring of the error
	}{
		{
			name:    "tool error",
			execute: func(context.Context, json.RawMessage) (any, error) { return nil, errBackend },
			wantIs:  errBackend,
			wantMsg: "tool flaky failed: backend unavailable",
		},
		{
			name:    "tool error with a result",
			execute: func(context.Context, json.RawMessage) (any, error) { return "partial", errBackend },
			wantIs:  errBackend,
			wantMsg: "backend unavailable",
		},
		{
			name:    "panic",
			execute: func(context.Context, json.RawMessage) (any, error) { panic("index out of range") },
			wantMsg: "panic: index out of range",
		},
		{
			name: "nil pointer panic",
			execute: func(context.Context, json.RawMessage) (any, error) {
				var m map[string]int
				m["x"] = 1
				return nil, nil
			},
			wantMsg: "panic:",
		},
		{
			name:    "result that cannot be encoded",
			execute: func(context.Context, json.RawMessage) (any, error) { return make(chan int), nil },
			wantMsg: "encoding the result",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := tool.NewSet(tool.Tool{Name: "flaky", Execute: tt.execute})
			if err != nil {
				t.Fatalf("NewSet: %v", err)
			}
			call, err := set.Prepare("flaky", nil)
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			out, err := call.Run(context.Background())
			if out != nil {
				t.Errorf("Run() output = %s, want nil", out)
			}
			var execErr *tool.ExecError
			if !errors.As(err, &execErr) {
				t.Fatalf("Run() error = %v (%T), want *tool.ExecError", err, err)
			}
			if execErr.Tool != "flaky" {
				t.Errorf("ExecError.Tool = %q, want %q", execErr.Tool, "flaky")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Run() error = %v, want errors.Is(err, %v)", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Run() error = %q, want it to contain %q", err, tt.wantMsg)
			}
		})
	}
}

// Only narrows a set to an allowlist; With adds tools with NewSet's checks.
func TestOnlyAndWith(t *testing.T) {
	set, err := tool.NewSet(
		tool.Tool{Name: "a", Execute: echo},
		tool.Tool{Name: "b", Execute: echo},
	)
	if err != nil {
		t.Fatal(err)
	}
	only := set.Only([]string{"b", "missing"})
	if diff := cmp.Diff([]string{"b"}, only.Names()); diff != "" {
		t.Errorf("Only names (-want +got):\n%s", diff)
	}
	if len(only.Specs()) != 1 || only.Specs()[0].Name != "b" {
		t.Errorf("Only specs = %v, want b alone", only.Specs())
	}
	if _, err := only.Prepare("a", nil); !errors.Is(err, tool.ErrUnknownTool) {
		t.Errorf("Prepare(a) on the narrowed set = %v, want ErrUnknownTool", err)
	}
	if n := len(set.Only([]string{}).Names()); n != 0 {
		t.Errorf("Only(empty) kept %d tools, want none", n)
	}

	more, err := set.With(tool.Tool{Name: "c", Execute: echo, Async: "external-dispatch"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, more.Names()); diff != "" {
		t.Errorf("With names (-want +got):\n%s", diff)
	}
	if more.AsyncMode("c") != "external-dispatch" || len(more.Specs()) != 3 {
		t.Errorf("With: async mode %q, %d specs", more.AsyncMode("c"), len(more.Specs()))
	}
	if set.Len() != 2 {
		t.Errorf("With changed the original set: %d tools", set.Len())
	}
	if _, err := set.With(tool.Tool{Name: "a", Execute: echo}); err == nil || !strings.Contains(err.Error(), `duplicate tool name "a"`) {
		t.Errorf("With a duplicate = %v, want a duplicate-name error", err)
	}
	var none *tool.Set
	fromNil, err := none.With(tool.Tool{Name: "x", Execute: echo})
	if err != nil || fromNil.Len() != 1 {
		t.Errorf("nil.With = %v, %v; want one tool", fromNil, err)
	}
}
