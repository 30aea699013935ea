package scriptedmodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/scriptedmodel"
)

// The first call after the user's message plays step 0, a tool call; the call that carries
// its result plays step 1, whose text quotes the result.
func ExampleModel() {
	m, err := scriptedmodel.New([]scriptedmodel.Step{
		{ToolCalls: []scriptedmodel.ToolCall{{Name: "current_time"}}},
		{Text: "It is {{toolResults}}"},
	})
	if err != nil {
		panic(err)
	}
	show := func(msgs []model.Message) {
		for ev, err := range m.Stream(context.Background(), &model.Request{Messages: msgs}) {
			if err != nil {
				panic(err)
			}
			switch ev.Type {
			case model.EventTextDelta:
				fmt.Printf("text %q\n", ev.Text)
			case model.EventToolCall:
				fmt.Printf("call %s %s(%s)\n", ev.ToolCallID, ev.ToolName, ev.Input)
			case model.EventFinish:
				fmt.Println("finish", ev.Finish)
			}
		}
	}

	msgs := []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "What time is it?"}}}}
	show(msgs)
	msgs = append(msgs,
		model.Message{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartToolCall, ToolCallID: "call_1_1", ToolName: "current_time", Input: json.RawMessage(`{}`)}}},
		model.Message{Role: model.RoleTool, Parts: []model.Part{{Type: model.PartToolResult, ToolCallID: "call_1_1", ToolName: "current_time", Output: json.RawMessage(`"2026-01-01T00:00:00Z"`)}}},
	)
	show(msgs)
	// Output:
	// call call_1_1 current_time({})
	// finish tool-calls
	// text "It"
	// text " is"
	// text " [\"2026-01-01T00:00:00Z\"]"
	// finish stop
}

// A step {"error":"context_length"} fails the call as a provider refuses a conversation longer
// than its model's context window: a caller tells it apart with errors.Is.
func ExampleModel_contextLength() {
	m, err := scriptedmodel.New([]scriptedmodel.Step{{Error: scriptedmodel.ErrorContextLength}})
	if err != nil {
		panic(err)
	}
	msgs := []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "Summarise all of it."}}}}
	for _, err := range m.Stream(context.Background(), &model.Request{Messages: msgs}) {
		var pe *model.ProviderError
		if errors.Is(err, model.ErrContextLength) && errors.As(err, &pe) {
			fmt.Println(pe.Public())
		}
	}
	// Output:
	// the conversation is longer than the scripted model's context window
}
