// Package approval decides whether a tool call may run: the needsApproval policy of an agent's
// tool config, the per-request overrides an account may allow, and the hash that binds a user's
// decision to the exact arguments it was asked about.
package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/agentharness/harness/shared/wire/jsonschema"
	"github.com/xeipuuv/gojsonschema"
)

// Status is what a policy says about one call; the names are the AI SDK's.
type Status string

const (
	// NotApplicable: the call runs without any approval.
	NotApplicable Status = "not-applicable"
	// Approved: the call is approved automatically and runs.
	Approved Status = "approved"
	// Denied: the call is denied automatically; the model is told why and the tool never runs.
	Denied Status = "denied"
	// UserApproval: the call waits for the user's decision.
	UserApproval Status = "user-approval"
)

func (s Status) valid() bool {
	switch s {
	case NotApplicable, Approved, Denied, UserApproval:
		return true
	}
	return false
}

// strict reports whether s lets a call run only with someone's consent.
func (s Status) strict() bool { return s == Denied || s == UserApproval }

// Decision is a policy's answer for one call.
type Decision struct {
	Status Status
	// Reason is shown with an automatic denial, and to the user with an approval request.
	Reason string
}

// Policy is a tool's needsApproval setting: true, false, or rules over the call's input.
type Policy struct {
	rules     []rule
	otherwise Decision
	// overridable lets a request loosen the policy (approve or skip approval); a request may
	// always make it stricter.
	overridable bool
	// base, when set, is the policy a request override applies to: the override decides,
	// unless it only tightens and base is stricter still.
	base    *Policy
	loosens bool
}

type rule struct {
	match    *gojsonschema.Schema
	decision Decision
}

// Always requires the user's approval for every call.
func Always() *Policy { return &Policy{otherwise: Decision{Status: UserApproval}} }

// FieldError is a policy problem at a path below needsApproval ("rules.0.if").
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

// Parse reads a needsApproval value:
//
//	true | false
//	{"rules": [{"if": <JSON schema of the input>, "then": <status>, "reason": "…"}],
//	 "otherwise": <status>, "allowRequestOverride": true}
//
// The first rule whose schema the input matches decides; "otherwise" (default "user-approval")
// covers the rest. false (or null) returns a nil Policy: no approval.
func Parse(raw json.RawMessage) (*Policy, error) {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "", "null", "false":
		return nil, nil
	case "true":
		return Always(), nil
	}
	if raw[0] != '{' {
		return nil, &FieldError{Problem: "must be true, false or an object with rules"}
	}
	var doc struct {
		Rules []struct {
			If     json.RawMessage `json:"if"`
			Then   Status          `json:"then"`
			Reason string          `json:"reason"`
		} `json:"rules"`
		Otherwise            Status `json:"otherwise"`
		AllowRequestOverride bool   `json:"allowRequestOverride"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, &FieldError{Problem: "must be an object with rules, otherwise and allowRequestOverride: " + err.Error()}
	}
	p := &Policy{otherwise: Decision{Status: UserApproval}, overridable: doc.AllowRequestOverride}
	if doc.Otherwise != "" {
		if !doc.Otherwise.valid() {
			return nil, &FieldError{Field: "otherwise", Problem: badStatus(doc.Otherwise)}
		}
		p.otherwise.Status = doc.Otherwise
	}
	for i, r := range doc.Rules {
		at := "rules." + strconv.Itoa(i)
		if len(bytes.TrimSpace(r.If)) == 0 {
			return nil, &FieldError{Field: at + ".if", Problem: "is required: a JSON schema the call's input must match"}
		}
		schema, err := jsonschema.Compile(r.If)
		var re *jsonschema.RefError
		if errors.As(err, &re) {
			return nil, &FieldError{Field: at + ".if." + re.Path, Problem: re.Problem}
		}
		if err != nil {
			return nil, &FieldError{Field: at + ".if", Problem: "is not a valid JSON schema: " + err.Error()}
		}
		if !r.Then.valid() {
			return nil, &FieldError{Field: at + ".then", Problem: badStatus(r.Then)}
		}
		p.rules = append(p.rules, rule{match: schema, decision: Decision{Status: r.Then, Reason: r.Reason}})
	}
	return p, nil
}

func badStatus(s Status) string {
	return fmt.Sprintf("%q is not a status: use %q, %q, %q or %q", s, NotApplicable, Approved, Denied, UserApproval)
}

// Decide returns the policy's decision for a call whose input already passed the tool's
// schema. A nil policy needs no approval.
func (p *Policy) Decide(input json.RawMessage) Decision {
	if p == nil {
		return Decision{Status: NotApplicable}
	}
	if p.base != nil && !p.loosens {
		// A tightening override never softens what the tool's own policy decides.
		if d := p.base.Decide(input); strictness(d.Status) > strictness(p.otherwise.Status) {
			return d
		}
		return p.otherwise
	}
	for _, r := range p.rules {
		res, err := r.match.Validate(gojsonschema.NewBytesLoader(input))
		if err == nil && res.Valid() {
			return r.decision
		}
	}
	return p.otherwise
}

// strictness orders statuses from running freely to never running.
func strictness(s Status) int {
	switch s {
	case Approved:
		return 1
	case UserApproval:
		return 2
	case Denied:
		return 3
	}
	return 0
}

// ErrOverrideRefused: a request asked to loosen a policy that does not allow it.
var ErrOverrideRefused = errors.New("the tool's needsApproval does not allow a request to loosen it (set allowRequestOverride)")

// Override returns the policy a request asks for: status for every call. A stricter status
// (denied, user-approval) is always allowed and never softens a call the tool's own policy
// treats more strictly; a looser one (approved, not-applicable) replaces the policy, and only
// where the policy allows it.
func (p *Policy) Override(s Status, reason string) (*Policy, error) {
	if !s.valid() {
		return nil, errors.New(badStatus(s))
	}
	loosens := !s.strict()
	if loosens {
		if p == nil {
			return nil, nil // nothing to loosen
		}
		if !p.overridable {
			return nil, ErrOverrideRefused
		}
	}
	return &Policy{otherwise: Decision{Status: s, Reason: reason}, overridable: p != nil && p.overridable, base: p, loosens: loosens}, nil
}

// ArgsHash identifies a call's arguments independently of how they were encoded: key order,
// spacing and number spelling (1, 1.0, 1e0) do not change it, any other difference does, large
// integers included.
func ArgsHash(input json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("arguments are not valid JSON: data after the value")
	}
	canon, err := json.Marshal(canonical(v)) // maps marshal with sorted keys
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// canonical rewrites every number of v in one spelling: integers exactly, others as the
// shortest float64 form.
func canonical(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = canonical(e)
		}
	case []any:
		for i, e := range v {
			v[i] = canonical(e)
		}
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			if n, ok := new(big.Int).SetString(s, 10); ok {
				return json.Number(n.String())
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return v // out of float64's range: keep the spelling
		}
		if f == math.Trunc(f) && math.Abs(f) < 1e21 {
			return json.Number(strconv.FormatFloat(f, 'f', -1, 64))
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return v
}
