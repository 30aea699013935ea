package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"testing"
)

// policyField is where a refusal of needsApproval may point: the value itself (""), otherwise,
// or a rule's if or then.
var policyField = regexp.MustCompile(`^(|otherwise|rules\.[0-9]+\.(if|then))$`)

// FuzzPolicy compiles a needsApproval value and decides one call's input with it, with every
// request override on top.
func FuzzPolicy(f *testing.F) {
	rules := `{"rules":[{"if":{"properties":{"seconds":{"maximum":1}}},"then":"approved"},{"if":{"properties":{"seconds":{"minimum":30}}},"then":"denied","reason":"too slow"}],"otherwise":"user-approval"}`
	for _, s := range [][2]string{
		{rules, `{"seconds":1}`},
		{rules, `{"seconds":45}`},
		{rules, `{"seconds":10}`},
		{`{"rules":[{"if":{"required":["env"],"properties":{"env":{"const":"prod"}}},"then":"user-approval","reason":"production"}],"otherwise":"approved","allowRequestOverride":true}`, `{"env":"prod"}`},
		{`true`, `{}`},
		{`false`, `{"a":1}`},
		{`null`, ``},
		{`{"rules":[{"then":"approved"}]}`, `{}`},
		{`{"rules":[{"if":{"type":"nope"},"then":"approved"}]}`, `{}`},
		{`{"rules":[{"if":{},"then":"maybe"}]}`, `{}`},
		{`{"otherwise":"sometimes"}`, `{}`},
		{`{"rule":[]}`, `{}`},
		{`"yes"`, `{}`},
		{`{"rules":[{"if":{"pattern":"^a+$","type":"string"},"then":"denied"}]}`, `"aaa"`},
		{`{"otherwise":"approved"}`, `{"n":1.0e0,"big":123456789012345678901234567890}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, raw, input []byte) {
		p, err := Parse(raw)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Problem == "" || !policyField.MatchString(fe.Field) {
				t.Fatalf("refusal %T %v: want a *FieldError at the value, otherwise or a rule", err, err)
			}
			return
		}
		d := p.Decide(input)
		if !d.Status.valid() {
			t.Fatalf("Decide(%s) = %q, not a status", input, d.Status)
		}
		if again := p.Decide(input); again != d {
			t.Fatalf("Decide(%s) = %+v then %+v", input, d, again)
		}
		if p == nil && d.Status != NotApplicable {
			t.Fatalf("no policy decided %q", d.Status)
		}
		switch string(bytes.TrimSpace(raw)) {
		case "true":
			if d.Status != UserApproval {
				t.Fatalf("needsApproval true decided %q", d.Status)
			}
		}
		for _, s := range []Status{NotApplicable, Approved, Denied, UserApproval} {
			o, err := p.Override(s, "because")
			switch {
			case s.strict():
				// A stricter request applies, and never softens what the policy decides.
				if err != nil {
					t.Fatalf("Override(%q) = %v", s, err)
				}
				got := o.Decide(input)
				if want := max(strictness(s), strictness(d.Status)); strictness(got.Status) != want {
					t.Fatalf("Override(%q) decided %q over the policy's %q", s, got.Status, d.Status)
				}
			case p == nil:
				if o != nil || err != nil {
					t.Fatalf("loosening no policy = %v, %v; want nothing", o, err)
				}
			case !p.overridable:
				if !errors.Is(err, ErrOverrideRefused) {
					t.Fatalf("loosening a policy without allowRequestOverride = %v", err)
				}
			default:
				if err != nil || o.Decide(input).Status != s {
					t.Fatalf("Override(%q) = %v, deciding %q", s, err, o.Decide(input).Status)
				}
			}
		}

		// The arguments hash does not depend on how the input is spelled.
		h, err := ArgsHash(input)
		if err != nil {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(bytes.TrimSpace(input)))
		dec.UseNumber()
		if len(bytes.TrimSpace(input)) == 0 {
			return
		}
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("ArgsHash accepted %q, which does not decode: %v", input, err)
		}
		respelled, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatalf("encoding %v: %v", v, err)
		}
		if h2, err := ArgsHash(respelled); err != nil || h2 != h {
			t.Fatalf("ArgsHash(%s) = %s, ArgsHash(%s) = %s, %v", input, h, respelled, h2, err)
		}
	})
}
