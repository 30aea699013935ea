package agentconfig_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// sameJSON compares raw JSON by value.
var sameJSON = cmp.Comparer(func(a, b json.RawMessage) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return cmp.Equal(va, vb)
})

// fieldError asserts err is a *FieldError that names its field.
func fieldError(t *testing.T, err error) *agentconfig.FieldError {
	t.Helper()
	var fe *agentconfig.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("refusal %T %v is not a *FieldError", err, err)
	}
	if fe.Problem == "" || fe.Field == "" {
		t.Fatalf("refusal %q names no field or problem", err)
	}
	return fe
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"name":"clock","system":"Answer briefly.","maxSteps":4,"model":{"provider":"scripted","script":[{"text":"hi"}]},"tools":{"current_time":{},"weather":{"enabled":false}}}`,
		`{"model":{"provider":"openai","model":"gpt-4o-mini"}}`,
		`{"name":"x","model":null}`,
		`{"model":{},"maxSteps":-1}`,
		`{"model":{},"Model":{}}`,
		`{"model":{},"tools":[]}`,
		`{"model":{},"maxSteps":1.5}`,
		`{"model":{},"output":{"schema":{"type":"object","properties":{"a":{"$ref":"#/definitions/b"}},"definitions":{"b":{"type":"string"}}}}}`,
		`{"model":{}} {}`,
		`[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := agentconfig.Parse(raw)
		if err != nil {
			fieldError(t, err)
			return
		}
		if len(c.Model) == 0 || string(c.Model) == "null" || c.MaxSteps < 0 {
			t.Fatalf("accepted config %+v: want a model and maxSteps >= 0", c)
		}
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("encoding %+v: %v", c, err)
		}
		c2, err := agentconfig.Parse(again)
		if err != nil {
			t.Fatalf("the accepted config, encoded again as %s, is refused: %v", again, err)
		}
		if len(c.Tools) == 0 {
			c.Tools = nil // omitempty drops an empty tools object
		}
		// The compiled output schema is compared through the schema it was compiled from.
		if diff := cmp.Diff(c, c2, sameJSON, cmpopts.IgnoreUnexported(agentconfig.Output{})); diff != "" {
			t.Fatalf("config round trip (-first +again):\n%s", diff)
		}
	})
}

var toolName = regexp.MustCompile(`^[A-Za-z_]+$`)

// checks stand in for the provider registry and the tool map: a model block is an object with a
// provider, a tools entry an object named like a known tool; "apiKey" strings are secrets in both.
var checks = agentconfig.Checks{
	Model: func(block json.RawMessage) (agentconfig.Model, error) {
		var m map[string]any
		if json.Unmarshal(block, &m) != nil || m == nil {
			return agentconfig.Model{}, errors.New("must be an object")
		}
		if p, _ := m["provider"].(string); p == "" {
			return agentconfig.Model{}, &agentconfig.FieldError{Field: "model.provider", Problem: "is required"}
		}
		out := agentconfig.Model{Provider: m["provider"].(string)}
		if _, ok := m["apiKey"]; ok {
			if _, isString := m["apiKey"].(string); !isString {
				return agentconfig.Model{}, &agentconfig.FieldError{Field: "model.apiKey", Problem: "must be a string"}
			}
			out.Secrets = []string{"apiKey"}
		}
		return out, nil
	},
	Tool: func(name string, entry json.RawMessage, _ agentconfig.Model) (agentconfig.Tool, error) {
		if !toolName.MatchString(name) {
			return agentconfig.Tool{}, errors.New("is not a tool")
		}
		var m map[string]any
		if json.Unmarshal(entry, &m) != nil || m == nil {
			return agentconfig.Tool{}, errors.New("must be an object")
		}
		var out agentconfig.Tool
		if k, ok := m["apiKey"]; ok {
			if _, isString := k.(string); !isString {
				return agentconfig.Tool{}, &agentconfig.FieldError{Field: "tools." + name + ".apiKey", Problem: "must be a string"}
			}
			out.Secrets = []string{"apiKey"}
		}
		return out, nil
	},
}

// FuzzMergePatch applies a PATCH body to a stored config, then validates the result, as an
// agent update does.
func FuzzMergePatch(f *testing.F) {
	stored := `{"name":"clock","maxSteps":4,"model":{"provider":"openai","model":"gpt-4o-mini","apiKey":"sk-1"},"tools":{"current_time":{},"tavilySearch":{"apiKey":"tvly-2","maxResults":5}}}`
	for _, p := range []string{
		`{"name":"renamed"}`,
		`{"model":{"model":"gpt-4o","apiKey":null}}`,
		`{"tools":{"tavilySearch":null,"weather":{"units":"metric"}}}`,
		`{"system":"Be brief.","maxSteps":null}`,
		`{"model":"openai/gpt-4o"}`,
		`{"maxSteps":101}`,
		`{"name":"  "}`,
		`{"tools":{"current_time":5}}`,
		`{"model":{"apiKey":7}}`,
		`{"extra":true}`,
		`null`, `[1]`, `{`,
	} {
		f.Add([]byte(stored), []byte(p))
	}
	f.Add([]byte(`{"model":{"provider":"scripted"}}`), []byte(`{"model":{"provider":null}}`))
	f.Fuzz(func(t *testing.T, raw, patch []byte) {
		merged, err := agentconfig.MergePatch(raw, patch)
		if err != nil {
			return // a stored config or a patch that is not an object
		}
		var doc, p map[string]any
		if err := json.Unmarshal(merged, &doc); err != nil || doc == nil {
			t.Fatalf("merged config %s is not an object: %v", merged, err)
		}
		if err := json.NewDecoder(bytes.NewReader(patch)).Decode(&p); err != nil {
			t.Fatalf("an accepted patch %s does not decode: %v", patch, err)
		}
		// RFC 7396: null removes a key, a non-object replaces it, an object merges into one.
		for k, v := range p {
			got, present := doc[k]
			switch v.(type) {
			case nil:
				if present {
					t.Fatalf("patch %s removes %q, merged %s keeps it", patch, k, merged)
				}
			case map[string]any:
				if _, ok := got.(map[string]any); !ok {
					t.Fatalf("patch %s merges an object into %q, merged %s has %v", patch, k, merged, got)
				}
			default:
				if !cmp.Equal(got, v) {
					t.Fatalf("patch %s sets %q to %v, merged %s has %v", patch, k, v, merged, got)
				}
			}
		}
		// A merge patch applied twice changes nothing more.
		twice, err := agentconfig.MergePatch(merged, patch)
		if err != nil || !cmp.Equal(json.RawMessage(merged), json.RawMessage(twice), sameJSON) {
			t.Fatalf("patch %s applied again: %s, %v; want %s", patch, twice, err, merged)
		}

		v, err := agentconfig.Validate(merged, checks)
		if err != nil {
			fieldError(t, err)
			return
		}
		c := v.Config
		if strings.TrimSpace(c.Name) == "" || len(c.Name) > 200 || c.MaxSteps < 0 || c.MaxSteps > agentconfig.MaxSteps {
			t.Fatalf("accepted config %+v", c)
		}
		// Every secret it reports can be taken out and put back.
		redacted, secrets, err := agentconfig.Split(merged, v.Secrets)
		if err != nil {
			t.Fatalf("Split of the validated config at %v: %v", v.Secrets, err)
		}
		if len(secrets) != len(v.Secrets) {
			t.Fatalf("Split found %d of the secrets %v", len(secrets), v.Secrets)
		}
		joined, err := agentconfig.Join(redacted, secrets)
		if err != nil || !cmp.Equal(json.RawMessage(merged), json.RawMessage(joined), sameJSON) {
			t.Fatalf("Join(Split(config)) = %s, %v; want %s", joined, err, merged)
		}
	})
}
