package mockopenai_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/agentharness/harness/infra/mockopenai"
)

// A first request that offers tools gets a call of the first tool; the request carrying its
// result gets a text that quotes it.
func ExampleServer() {
	s := mockopenai.New(nil)
	srv := httptest.NewServer(s)
	defer srv.Close()

	ask := func(messages string) string {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(
			`{"model":"m","messages":`+messages+`,"tools":[{"type":"function","function":{"name":"current_time"}}]}`))
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		var out struct {
			Choices []struct {
				Message struct {
					Content   *string
					ToolCalls []mockopenai.ToolCall `json:"tool_calls"`
				}
				FinishReason string `json:"finish_reason"`
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			panic(err)
		}
		c := out.Choices[0]
		if c.Message.Content == nil {
			return fmt.Sprintf("%s: %s %s(%s)", c.FinishReason, c.Message.ToolCalls[0].ID, c.Message.ToolCalls[0].Function.Name, c.Message.ToolCalls[0].Function.Arguments)
		}
		return fmt.Sprintf("%s: %s", c.FinishReason, *c.Message.Content)
	}

	fmt.Println(ask(`[{"role":"user","content":"What time is it?"}]`))
	fmt.Println(ask(`[{"role":"user","content":"What time is it?"},
		{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"current_time","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"12:00"}]`))
	fmt.Println(len(s.Requests()), "requests recorded")
	// Output:
	// tool_calls: call_1 current_time({})
	// stop: The tool returned: 12:00
	// 2 requests recorded
}
