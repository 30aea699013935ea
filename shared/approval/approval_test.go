package approval_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/approval"
	"github.com/google/go-cmp/cmp"
)

// filesPolicy decides on a path: /tmp is approved, other absolute paths are denied (the first
// rule that matches wins, so /tmp never reaches the second rule), relative paths need no
// approval, and anything without a path falls to the default.
const filesPolicy = `{
	"rules": [
		{"if": {"properties": {"path": {"type": "string", "pattern": "^/tmp/"}}, "required": ["path"]}, "then": "approved"},
		{"if": {"properties": {"path": {"type": "string", "pattern": "^/"}}, "required": ["path"]}, "then": "denied", "reason": "absolute paths are off limits"},
		{"if": {"required": ["path"]}, "then": "not-applicable"}
	]
}`

func mustParse(t *testing.T, raw string) *approval.Policy {
	t.Helper()
	p, err := approval.Parse(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("Parse(%s): %v", raw, err)
	}
	return p
}

func TestParseDecide(t *testing.T) {
	inputs := []string{`{}`, `{"path":"/tmp/a"}`, `{"path":"/etc/passwd"}`, `{"path":"notes.txt"}`, `{"other":1}`}
	user := approval.Decision{Status: approval.UserApproval}
	none := approval.Decision{Status: approval.NotApplicable}
	tests := []struct {
		name    string
		raw     string
		wantNil bool
		// want is the decision for each of inputs, in order.
		want []approval.Decision
	}{
		{name: "true", raw: `true`, want: []approval.Decision{user, user, user, user, user}},
		{name: "true with spaces", raw: " \n true\t", want: []approval.Decision{user, user, user, user, user}},
		{name: "false", raw: `false`, wantNil: true, want: []approval.Decision{none, none, none, none, none}},
		{name: "null", raw: `null`, wantNil: true, want: []approval.Decision{none, none, none, none, none}},
		{name: "empty", raw: ``, wantNil: true, want: []approval.Decision{none, none, none, none, none}},
		{name: "blank", raw: "  ", wantNil: true, want: []approval.Decision{none, none, none, none, none}},
		{
			name: "rules, default otherwise",
			raw:  filesPolicy,
			want: []approval.Decision{
				user,
				{Status: approval.Approved},
				{Status: approval.Denied, Reason: "absolute paths are off limits"},
				none,
				user,
			},
		},
		{
			name: "rules, explicit otherwise",
			raw:  strings.Replace(filesPolicy, `"rules"`, `"otherwise": "denied", "rules"`, 1),
			want: []approval.Decision{
				{Status: approval.Denied},
				{Status: approval.Approved},
				{Status: approval.Denied, Reason: "absolute paths are off limits"},
				none,
				{Status: approval.Denied},
			},
		},
		{
			name: "rule order decides: the broad rule first shadows the narrow one",
			raw: `{"rules": [
				{"if": {"required": ["path"]}, "then": "user-approval", "reason": "touches files"},
				{"if": {"properties": {"path": {"pattern": "^/tmp/"}}, "required": ["path"]}, "then": "approved"}
			], "otherwise": "not-applicable"}`,
			want: []approval.Decision{
				none,
				{Status: approval.UserApproval, Reason: "touches files"},
				{Status: approval.UserApproval, Reason: "touches files"},
				{Status: approval.UserApproval, Reason: "touches files"},
				none,
			},
		},
		{
			name: "no rules",
			raw:  `{"otherwise": "approved", "allowRequestOverride": true}`,
			want: []approval.Decision{{Status: approval.Approved}, {Status: approval.Approved}, {Status: approval.Approved}, {Status: approval.Approved}, {Status: approval.Approved}},
		},
		{name: "empty object", raw: `{}`, want: []approval.Decision{user, user, user, user, user}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.raw)
			if (p == nil) != tt.wantNil {
				t.Errorf("Parse(%s) = %v, want nil: %v", tt.raw, p, tt.wantNil)
			}
			got := make([]approval.Decision, len(inputs))
			for i, in := range inputs {
				got[i] = p.Decide(json.RawMessage(in))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decisions for %v (-want +got):\n%s", inputs, diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		wantField string
		wantText  string // a part of the problem
	}{
		{name: "string", raw: `"yes"`, wantField: "", wantText: "must be true, false or an object"},
		{name: "number", raw: `1`, wantField: "", wantText: "must be true, false or an object"},
		{name: "array", raw: `[{"if":{},"then":"denied"}]`, wantField: "", wantText: "must be true, false or an object"},
		{name: "unknown field", raw: `{"rules":[],"otherwize":"denied"}`, wantField: "", wantText: "otherwize"},
		{name: "rules not a list", raw: `{"rules":{"if":{},"then":"denied"}}`, wantField: ""},
		{name: "broken JSON", raw: `{"rules":[`, wantField: ""},
		{name: "first rule without if", raw: `{"rules":[{"then":"denied"}]}`, wantField: "rules.0.if", wantText: "is required"},
		{name: "first rule with a bad schema", raw: `{"rules":[{"if":{"type":"nope"},"then":"denied"}]}`, wantField: "rules.0.if", wantText: "not a valid JSON schema"},
		{name: "schema with a remote $ref", raw: `{"rules":[{"if":{},"then":"denied"},{"if":{"$ref":"http://127.0.0.1:9/x"},"then":"approved"}]}`, wantField: "rules.1.if.$ref", wantText: "not a local reference"},
		{name: "schema with a file $ref in a property", raw: `{"rules":[{"if":{"properties":{"path":{"$ref":"file:///etc/passwd"}}},"then":"approved"}]}`, wantField: "rules.0.if.properties.path.$ref", wantText: "not a local reference"},
		{name: "second rule with a bad status", raw: `{"rules":[{"if":{},"then":"denied"},{"if":{},"then":"ask"}]}`, wantField: "rules.1.then", wantText: `"ask" is not a status`},
		{name: "second rule without then", raw: `{"rules":[{"if":{},"then":"approved"},{"if":{}}]}`, wantField: "rules.1.then", wantText: `"" is not a status`},
		{name: "bad otherwise", raw: `{"rules":[{"if":{},"then":"denied"}],"otherwise":"maybe"}`, wantField: "otherwise", wantText: `"maybe" is not a status`},
		{name: "status in the wrong case", raw: `{"otherwise":"Denied"}`, wantField: "otherwise", wantText: `"Denied" is not a status`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := approval.Parse(json.RawMessage(tt.raw))
			if p != nil {
				t.Errorf("Parse(%s) policy = %v, want nil with an error", tt.raw, p)
			}
			var fe *approval.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse(%s) error = %v (%T), want *approval.FieldError", tt.raw, err, err)
			}
			if fe.Field != tt.wantField {
				t.Errorf("Parse(%s) error field = %q, want %q (error %q)", tt.raw, fe.Field, tt.wantField, err)
			}
			if !strings.Contains(fe.Problem, tt.wantText) {
				t.Errorf("Parse(%s) problem = %q, want it to contain %q", tt.raw, fe.Problem, tt.wantText)
			}
			wantMsg := fe.Problem
			if tt.wantField != "" {
				wantMsg = tt.wantField + ": " + fe.Problem
			}
			if err.Error() != wantMsg {
				t.Errorf("Error() = %q, want %q", err.Error(), wantMsg)
			}
		})
	}
}

func TestOverride(t *testing.T) {
	const reason = "set by the request"
	inputs := []string{`{}`, `{"path":"/tmp/a"}`, `{"path":"/etc/passwd"}`}
	all := func(d approval.Decision) []approval.Decision { return []approval.Decision{d, d, d} }
	tests := []struct {
		name    string
		policy  string // "" means a nil policy
		status  approval.Status
		wantErr error // ErrOverrideRefused, or errAny for another error
		wantNil bool
		want    []approval.Decision // the overridden policy's decisions for inputs
	}{
		{name: "nil, denied", status: approval.Denied, want: all(approval.Decision{Status: approval.Denied, Reason: reason})},
		{name: "nil, user-approval", status: approval.UserApproval, want: all(approval.Decision{Status: approval.UserApproval, Reason: reason})},
		{name: "nil, approved: nothing to loosen", status: approval.Approved, wantNil: true, want: all(approval.Decision{Status: approval.NotApplicable})},
		{name: "nil, not-applicable: nothing to loosen", status: approval.NotApplicable, wantNil: true, want: all(approval.Decision{Status: approval.NotApplicable})},
		{name: "nil, invalid status", status: "maybe", wantErr: errAny},
		{name: "nil, empty status", status: "", wantErr: errAny},

		{name: "strict policy, denied", policy: filesPolicy, status: approval.Denied, want: all(approval.Decision{Status: approval.Denied, Reason: reason})},
		{name: "true, user-approval", policy: `true`, status: approval.UserApproval, want: all(approval.Decision{Status: approval.UserApproval, Reason: reason})},
		{name: "strict policy, approved refused", policy: filesPolicy, status: approval.Approved, wantErr: approval.ErrOverrideRefused},
		{name: "strict policy, not-applicable refused", policy: filesPolicy, status: approval.NotApplicable, wantErr: approval.ErrOverrideRefused},
		{name: "true, approved refused", policy: `true`, status: approval.Approved, wantErr: approval.ErrOverrideRefused},
		{name: "strict policy, invalid status", policy: filesPolicy, status: "ask", wantErr: errAny},

		{name: "overridable, approved", policy: `{"allowRequestOverride":true}`, status: approval.Approved, want: all(approval.Decision{Status: approval.Approved, Reason: reason})},
		{name: "overridable, not-applicable", policy: `{"allowRequestOverride":true}`, status: approval.NotApplicable, want: all(approval.Decision{Status: approval.NotApplicable, Reason: reason})},
		{name: "overridable, denied", policy: `{"allowRequestOverride":true}`, status: approval.Denied, want: all(approval.Decision{Status: approval.Denied, Reason: reason})},
		{name: "overridable, invalid status", policy: `{"allowRequestOverride":true}`, status: "yes", wantErr: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p *approval.Policy
			if tt.policy != "" {
				p = mustParse(t, tt.policy)
			}
			got, err := p.Override(tt.status, reason)
			switch {
			case tt.wantErr == errAny:
				if err == nil {
					t.Fatalf("Override(%q) = %v, nil; want an error", tt.status, got)
				}
				if !strings.Contains(err.Error(), "not a status") {
					t.Errorf("Override(%q) error = %q, want it to say the status is not one", tt.status, err)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Override(%q) error = %v, want %v", tt.status, err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("Override(%q): %v", tt.status, err)
			}
			if tt.wantErr != nil {
				if got != nil {
					t.Errorf("Override(%q) policy = %v, want nil with the error", tt.status, got)
				}
				return
			}
			if (got == nil) != tt.wantNil {
				t.Errorf("Override(%q) = %v, want nil: %v", tt.status, got, tt.wantNil)
			}
			decisions := make([]approval.Decision, len(inputs))
			for i, in := range inputs {
				decisions[i] = got.Decide(json.RawMessage(in))
			}
			if diff := cmp.Diff(tt.want, decisions); diff != "" {
				t.Errorf("decisions of the overridden policy for %v (-want +got):\n%s", inputs, diff)
			}
		})
	}
}

var errAny = errors.New("any error")

// An override keeps whether the policy may be loosened: making a strict policy stricter does not
// let a later override loosen it, and an overridable one stays overridable.
func TestOverrideKeepsOverridability(t *testing.T) {
	tests := []struct {
		name    string
		policy  string // "" means nil
		wantErr error
	}{
		{name: "nil policy made strict", wantErr: approval.ErrOverrideRefused},
		{name: "strict policy made stricter", policy: `true`, wantErr: approval.ErrOverrideRefused},
		{name: "overridable policy made stricter", policy: `{"allowRequestOverride":true,"otherwise":"approved"}`, wantErr: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p *approval.Policy
			if tt.policy != "" {
				p = mustParse(t, tt.policy)
			}
			strict, err := p.Override(approval.Denied, "first")
			if err != nil {
				t.Fatalf("Override(denied): %v", err)
			}
			loose, err := strict.Override(approval.Approved, "second")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("second Override(approved) error = %v, want %v", err, tt.wantErr)
			}
			if err == nil {
				if got, want := loose.Decide(json.RawMessage(`{}`)), (approval.Decision{Status: approval.Approved, Reason: "second"}); got != want {
					t.Errorf("Decide after loosening = %+v, want %+v", got, want)
				}
			}
		})
	}
}

// A policy that denies a call outright cannot be turned, by a request that may not loosen it,
// into one that lets the user approve that call: user-approval is looser than denied. Either the
// override is refused or the denial survives it.
func TestOverrideUserApprovalDoesNotLoosenADenial(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		input  string
	}{
		{name: "denying rule", policy: filesPolicy, input: `{"path":"/etc/passwd"}`},
		{name: "denying otherwise", policy: `{"otherwise":"denied"}`, input: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.policy)
			if got := p.Decide(json.RawMessage(tt.input)).Status; got != approval.Denied {
				t.Fatalf("before the override Decide(%s) = %q, want denied", tt.input, got)
			}
			over, err := p.Override(approval.UserApproval, "set by the request")
			if errors.Is(err, approval.ErrOverrideRefused) {
				return
			}
			if err != nil {
				t.Fatalf("Override(user-approval): %v", err)
			}
			if got := over.Decide(json.RawMessage(tt.input)).Status; got != approval.Denied {
				t.Errorf("after Override(user-approval) Decide(%s) = %q, want %q (or the override refused with ErrOverrideRefused): a non-overridable denial became something the user can approve",
					tt.input, got, approval.Denied)
			}
		})
	}
}

func TestArgsHash(t *testing.T) {
	hash := func(t *testing.T, in string) string {
		t.Helper()
		h, err := approval.ArgsHash(json.RawMessage(in))
		if err != nil {
			t.Fatalf("ArgsHash(%s): %v", in, err)
		}
		if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			t.Fatalf("ArgsHash(%s) = %q, want 64 lowercase hex digits", in, h)
		}
		return h
	}
	const base = `{"a":1,"b":[1,2]}`
	tests := []struct {
		name     string
		a, b     string
		wantSame bool
	}{
		{name: "key order, spacing, number spelling", a: base, b: `{ "b":[1,2.0], "a":1.0 }`, wantSame: true},
		{name: "exponent", a: base, b: `{"b":[1,2],"a":1e0}`, wantSame: true},
		{name: "newlines and tabs", a: base, b: "{\n\t\"a\": 1,\n\t\"b\": [ 1 , 2 ]\n}", wantSame: true},
		{name: "string escapes", a: `{"s":"é/"}`, b: `{"s":"\u00e9\/"}`, wantSame: true},
		{name: "nested key order", a: `{"o":{"x":1,"y":{"p":true,"q":null}}}`, b: `{"o":{"y":{"q":null,"p":true},"x":1}}`, wantSame: true},
		{name: "empty input is {}", a: ``, b: `{}`, wantSame: true},
		{name: "blank input is {}", a: " \n", b: `{}`, wantSame: true},

		{name: "changed value", a: base, b: `{"a":2,"b":[1,2]}`},
		{name: "changed array item", a: base, b: `{"a":1,"b":[1,3]}`},
		{name: "array order", a: base, b: `{"a":1,"b":[2,1]}`},
		{name: "extra key", a: base, b: `{"a":1,"b":[1,2],"c":null}`},
		{name: "missing key", a: base, b: `{"a":1}`},
		{name: "number as string", a: base, b: `{"a":"1","b":[1,2]}`},
		{name: "renamed key", a: base, b: `{"A":1,"b":[1,2]}`},
		{name: "string case", a: `{"s":"x"}`, b: `{"s":"X"}`},
		{name: "null is not {}", a: `null`, b: `{}`},
		{name: "empty array is not {}", a: `[]`, b: `{}`},
		{name: "nested value", a: `{"o":{"x":1}}`, b: `{"o":{"x":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ha, hb := hash(t, tt.a), hash(t, tt.b)
			if (ha == hb) != tt.wantSame {
				t.Errorf("ArgsHash(%q) = %s, ArgsHash(%q) = %s; want equal: %v", tt.a, ha, tt.b, hb, tt.wantSame)
			}
		})
	}
}

func TestArgsHashInvalidJSON(t *testing.T) {
	for _, in := range []string{`{"a":`, `{a:1}`, `{"a":1}}`, `'x'`, `{"a":1} {"b":2}`} {
		t.Run(in, func(t *testing.T) {
			h, err := approval.ArgsHash(json.RawMessage(in))
			if err == nil {
				t.Fatalf("ArgsHash(%s) = %q, nil; want an error", in, h)
			}
			if !strings.Contains(err.Error(), "not valid JSON") {
				t.Errorf("ArgsHash(%s) error = %q, want it to say the arguments are not valid JSON", in, err)
			}
		})
	}
}

// Arguments that differ only beyond float64 precision are different arguments: a decision on
// deleting record 9007199254740993 must not also cover record 9007199254740992.
func TestArgsHashKeepsLargeNumbersApart(t *testing.T) {
	tests := []struct{ a, b string }{
		{a: `{"id":9007199254740993}`, b: `{"id":9007199254740992}`},
		{a: `{"id":12345678901234567890}`, b: `{"id":12345678901234567891}`},
	}
	for _, tt := range tests {
		t.Run(tt.a, func(t *testing.T) {
			ha, err := approval.ArgsHash(json.RawMessage(tt.a))
			if err != nil {
				t.Fatal(err)
			}
			hb, err := approval.ArgsHash(json.RawMessage(tt.b))
			if err != nil {
				t.Fatal(err)
			}
			if ha == hb {
				t.Errorf("ArgsHash(%s) == ArgsHash(%s) = %s, want them different", tt.a, tt.b, ha)
			}
		})
	}
}
