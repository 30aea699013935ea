package anthropicmodel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/anthropicmodel"
)

func ExampleModel_Stream() {
	// A stand-in for api.anthropic.com that answers with the recorded text.json stream.
	raw, _ := os.ReadFile("testdata/text.json")
	var exchanges []wirefixture.Exchange
	_ = json.Unmarshal(raw, &exchanges)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, exchanges[0].Response.Body)
	}))
	defer srv.Close()

	m, err := anthropicmodel.New(anthropicmodel.Config{Provider: "anthropic", Model: "claude-haiku-4-5", BaseURL: srv.URL}, "sk-ant-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &model.Request{System: "Answer in one short sentence.", Messages: []model.Message{
		{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "What is the capital of Norway?"}}},
	}}
	for ev, err := range m.Stream(context.Background(), req) {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch ev.Type {
		case model.EventTextDelta:
			fmt.Print(ev.Text)
		case model.EventFinish:
			fmt.Printf("\nfinish: %s, tokens in %d, out %d\n", ev.Finish, ev.Usage.InputTokens, ev.Usage.OutputTokens)
		}
	}
	// Output:
	// The capital of Norway is Oslo.
	// finish: stop, tokens in 21, out 10
}
