package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentharness/harness/shared/tool"
)

// A Set validates the model's raw arguments before a tool runs; a bad call comes back as an
// error meant for the model, and a good one runs and returns JSON.
func ExampleSet() {
	set, err := tool.NewSet(tool.Tool{
		Name:        "greet",
		Description: "Greets someone by name.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		Execute: func(_ context.Context, input json.RawMessage) (any, error) {
			var args struct{ Name string }
			if err := json.Unmarshal(input, &args); err != nil {
				return nil, err
			}
			return map[string]string{"greeting": "Hello, " + args.Name}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	for _, spec := range set.Specs() {
		fmt.Println("offered:", spec.Name)
	}

	_, err = set.Prepare("greet", json.RawMessage(`{}`))
	var inputErr *tool.InputError
	fmt.Println("input error:", errors.As(err, &inputErr), strings.Join(inputErr.Reasons, "; "))

	_, err = set.Prepare("wave", nil)
	fmt.Println("unknown tool:", errors.Is(err, tool.ErrUnknownTool))

	call, err := set.Prepare("greet", json.RawMessage(`{"name":"Ada"}`))
	if err != nil {
		panic(err)
	}
	out, err := call.Run(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println("result:", string(out))
	// Output:
	// offered: greet
	// input error: true (root): name is required
	// unknown tool: true
	// result: {"greeting":"Hello, Ada"}
}
