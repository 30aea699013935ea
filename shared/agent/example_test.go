package agent_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/scriptedmodel"
	"github.com/agentharness/harness/shared/tool"
)

// A turn in two steps: the model calls a tool, the loop runs it and saves the step, and the
// model answers with the result.
func ExampleRun() {
	m, err := scriptedmodel.New([]scriptedmodel.Step{
		{ToolCalls: []scriptedmodel.ToolCall{{Name: "current_time"}}},
		{Text: "It is {{toolResults}}"},
	})
	if err != nil {
		panic(err)
	}
	tools, err := tool.NewSet(tool.Tool{
		Name:        "current_time",
		Description: "Returns the current time.",
		Execute: func(context.Context, json.RawMessage) (any, error) {
			return "2026-01-01T00:00:00Z", nil
		},
	})
	if err != nil {
		panic(err)
	}
	cfg := agent.Config{
		Model: m,
		Tools: tools,
		Save: func(_ context.Context, msgs []model.Message) error {
			fmt.Println("saved", len(msgs), "messages")
			return nil
		},
	}
	history := []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "What time is it?"}}}}

	for ev, err := range agent.Run(context.Background(), cfg, history) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch ev.Type {
		case agent.ToolInputAvailable:
			fmt.Printf("calling %s(%s)\n", ev.ToolName, ev.Input)
		case agent.ToolOutput:
			fmt.Printf("tool returned %s\n", ev.Output)
		case agent.TextDelta:
			fmt.Printf("text %q\n", ev.Text)
		case agent.Finish:
			fmt.Println("finish:", ev.Finish)
		}
	}
	// Output:
	// calling current_time({})
	// tool returned "2026-01-01T00:00:00Z"
	// saved 2 messages
	// text "It"
	// text " is"
	// text " [\"2026-01-01T00:00:00Z\"]"
	// saved 1 messages
	// finish: stop
}
