package openaimodel_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/agentharness/harness/shared/model/openaimodel"
)

// FuzzStream feeds any body to the adapter as the SSE answer of a Chat Completions call: it
// yields well-formed events or a provider error, and never panics.
func FuzzStream(f *testing.F) {
	modeltest.FuzzStream(f, modeltest.Stream{
		Fixtures: []string{"text.json", "tool_calls.json", "conversation.json", "bad_request.json"},
		Seeds: []string{
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"weather\",\"arguments\":\"{}\"}}]}}]}\n\ndata: [DONE]\n\n",
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\"},{\"index\":1,\"id\":\"a\"}]}}]}\n\ndata: [DONE]\n\n",
			"event: error\ndata: {\"error\":{\"message\":\"overloaded\"}}\n\n",
			"data: {\"choices\":[{\"delta\":{\"content\":\"cut",
			"data: [DONE]\n\n",
		},
		ContentType: "text/event-stream; charset=utf-8",
		New: func(ctx context.Context, transport *http.Transport) (agent.Model, error) {
			m, err := openaimodel.New(openaimodel.Config{
				Provider: "openai", Model: testModel, BaseURL: "http://openai.invalid/v1", APIKey: "test-key",
				Transport: transport,
			}, "")
			return m, err
		},
	})
}
