package agentconfig

import (
	"errors"
	"testing"
)

func TestVariables(t *testing.T) {
	c, err := Parse([]byte(`{"name":"a","model":{"provider":"scripted"},"variables":[
		{"name":"REGION","required":true,"description":"where"},
		{"name":"API_TOKEN","type":"secret","scoped":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	region, _ := c.Variables.Find("REGION")
	token, _ := c.Variables.Find("API_TOKEN")
	if region.Type != TextVariable || !region.Required || token.Type != SecretVariable || !token.Scoped || !token.Secret() {
		t.Errorf("variables %+v, want REGION text and required, API_TOKEN secret and scoped", c.Variables)
	}
	for _, tc := range []struct{ vars, field string }{
		{`{}`, "variables"},
		{`[{"name":"1X"}]`, "variables[0].name"},
		{`[{"name":"A","type":"number"}]`, "variables[0].type"},
		{`[{"name":"A"},{"name":"A"}]`, "variables[1].name"},
		{`[{"name":"A","secret":true}]`, "variables[0].secret"},
		{`[{"name":"A","required":"yes"}]`, "variables[0]"},
	} {
		_, err := Parse([]byte(`{"name":"a","model":{"provider":"scripted"},"variables":` + tc.vars + `}`))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("variables %s: err %v, want a refusal of %s", tc.vars, err, tc.field)
		}
	}
}
