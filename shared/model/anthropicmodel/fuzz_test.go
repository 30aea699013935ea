package anthropicmodel_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model/anthropicmodel"
	"github.com/agentharness/harness/shared/model/modeltest"
)

// FuzzStream feeds any body to the adapter as the SSE answer of a Messages call: it yields
// well-formed events or a provider error, and never panics.
func FuzzStream(f *testing.F) {
	modeltest.FuzzStream(f, modeltest.Stream{
		Fixtures: []string{"text.json", "tool_calls.json", "tool_results.json", "overloaded.json", "reasoning.json", "reasoning_tools.json"},
		Seeds: []string{
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"\",\"name\":\"weather\",\"input\":{}}}\n\n" +
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			"event: ping\ndata: {\"type\": \"ping\"}\n\n",
		},
		ContentType: "text/event-stream; charset=utf-8",
		New: func(ctx context.Context, transport *http.Transport) (agent.Model, error) {
			m, err := anthropicmodel.New(anthropicmodel.Config{
				Provider: "anthropic", Model: testModel, BaseURL: "http://anthropic.invalid", APIKey: "test-key",
				Transport: transport,
			}, "")
			return m, err
		},
	})
}
