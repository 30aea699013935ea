package approval_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentharness/harness/shared/approval"
)

// A needsApproval policy with rules: the first rule the call's input matches decides, and
// otherwise covers the rest.
func ExamplePolicy() {
	policy, err := approval.Parse(json.RawMessage(`{
		"rules": [
			{"if": {"properties": {"seconds": {"maximum": 1}}}, "then": "approved"},
			{"if": {"properties": {"seconds": {"minimum": 30}}}, "then": "denied", "reason": "too slow"}
		],
		"otherwise": "user-approval"
	}`))
	if err != nil {
		panic(err)
	}
	for _, input := range []string{`{"seconds":1}`, `{"seconds":45}`, `{"seconds":10}`} {
		d := policy.Decide(json.RawMessage(input))
		fmt.Printf("%s: %s %q\n", input, d.Status, d.Reason)
	}

	// false (or null) is no policy at all: calls run without approval.
	none, _ := approval.Parse(json.RawMessage(`false`))
	fmt.Println("false:", none.Decide(json.RawMessage(`{"seconds":45}`)).Status)
	// Output:
	// {"seconds":1}: approved ""
	// {"seconds":45}: denied "too slow"
	// {"seconds":10}: user-approval ""
	// false: not-applicable
}
