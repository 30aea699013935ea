package openaimodel_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/agentharness/harness/shared/openaimodel"
)

// FuzzStream feeds any body to the adapter as the SSE answer of a Chat Completions call: it
// yields well-formed events or a provider error, and never panics.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"text.json", "tool_calls.json", "conversation.json", "bad_request.json"} {
		for _, b := range wirefixture.Bodies(f, name) {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"weather\",\"arguments\":\"{}\"}}]}}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\"},{\"index\":1,\"id\":\"a\"}]}}]}\n\ndata: [DONE]\n\n",
		"event: error\ndata: {\"error\":{\"message\":\"overloaded\"}}\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"cut",
		"data: [DONE]\n\n",
	} {
		f.Add([]byte(s))
	}
	header := http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}
	req := &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "hi"}}}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := openaimodel.New(openaimodel.Config{
			Provider: "openai", Model: testModel, BaseURL: "http://openai.invalid/v1", APIKey: "test-key",
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
