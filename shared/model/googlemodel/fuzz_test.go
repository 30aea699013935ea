package googlemodel_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model/googlemodel"
	"github.com/agentharness/harness/shared/model/modeltest"
)

// FuzzStream feeds any body to the adapter as the streamed chunks of a streamGenerateContent
// call: it yields well-formed events or a provider error, and never panics.
func FuzzStream(f *testing.F) {
	modeltest.FuzzStream(f, modeltest.Stream{
		Fixtures: []string{"text.json", "tool_calls.json", "conversation.json", "google_search.json", "reasoning.json", "reasoning_tools.json"},
		Seeds: []string{
			"data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"id\":\"c1\",\"name\":\"weather\",\"args\":{\"city\":\"Oslo\"}}},{\"text\":\"ok\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}]}\n\n",
			"data: {\"candidates\":[{\"groundingMetadata\":{\"groundingChunks\":[{\"web\":{\"uri\":\"https://example.com\",\"title\":\"Example\"}},{\"web\":{\"uri\":\"\"}}]}}]}\n\n",
			"data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"}}\n\n",
			"data: {\"error\":{\"code\":500,\"message\":\"internal\",\"status\":\"INTERNAL\"}}\n\n",
			"data: {\"candidates\":[null]}\n\n",
			"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"cut",
		},
		ContentType: "text/event-stream",
		New: func(ctx context.Context, transport *http.Transport) (agent.Model, error) {
			m, err := googlemodel.New(ctx, googlemodel.Config{
				Provider: "google", Model: modelName, BaseURL: "http://google.invalid/", APIKey: "test-key",
				Transport: transport,
			}, "")
			return m, err
		},
	})
}
