package anthropicmodel_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/anthropicmodel"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
)

// FuzzStream feeds any body to the adapter as the SSE answer of a Messages call: it yields
// well-formed events or a provider error, and never panics.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"text.json", "tool_calls.json", "tool_results.json", "overloaded.json"} {
		for _, b := range wirefixture.Bodies(f, name) {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"\",\"name\":\"weather\",\"input\":{}}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"event: ping\ndata: {\"type\": \"ping\"}\n\n",
	} {
		f.Add([]byte(s))
	}
	header := http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}
	req := &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "hi"}}}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := anthropicmodel.New(anthropicmodel.Config{
			Provider: "anthropic", Model: testModel, BaseURL: "http://anthropic.invalid", APIKey: "test-key",
			Transport: wirefixture.Answer(http.StatusOK, header, body),
		}, "")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := modeltest.CheckStream(m.Stream(ctx, req)); err != nil {
			t.Fatalf("stream %q: %v", body, err)
		}
	})
}
