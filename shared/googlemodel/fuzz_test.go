package googlemodel_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/googlemodel"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
)

// FuzzStream feeds any body to the adapter as the streamed chunks of a streamGenerateContent
// call: it yields well-formed events or a provider error, and never panics.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"text.json", "tool_calls.json", "conversation.json", "google_search.json"} {
		for _, b := range wirefixture.Bodies(f, name) {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"id\":\"c1\",\"name\":\"weather\",\"args\":{\"city\":\"Oslo\"}}},{\"text\":\"ok\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}]}\n\n",
		"data: {\"candidates\":[{\"groundingMetadata\":{\"groundingChunks\":[{\"web\":{\"uri\":\"https://example.com\",\"title\":\"Example\"}},{\"web\":{\"uri\":\"\"}}]}}]}\n\n",
		"data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"}}\n\n",
		"data: {\"error\":{\"code\":500,\"message\":\"internal\",\"status\":\"INTERNAL\"}}\n\n",
		"data: {\"candidates\":[null]}\n\n",
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"cut",
	} {
		f.Add([]byte(s))
	}
	header := http.Header{"Content-Type": {"text/event-stream"}}
	req := &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "hi"}}}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := googlemodel.New(ctx, googlemodel.Config{
			Provider: "google", Model: modelName, BaseURL: "http://google.invalid/", APIKey: "test-key",
			Transport: wirefixture.Answer(http.StatusOK, header, body),
		}, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := modeltest.CheckStream(m.Stream(ctx, req)); err != nil {
			t.Fatalf("stream %q: %v", body, err)
		}
	})
}
