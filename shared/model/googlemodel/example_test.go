package googlemodel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/googlemodel"
)

func ExampleModel_Stream() {
	// A stand-in for the Gemini API that answers with one chunk.
	gemini := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"candidates": [{"content": {"parts": [{"text": "Oslo."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 9,"candidatesTokenCount": 2,"totalTokenCount": 11}}`+"\r\n\r\n")
	}))
	defer gemini.Close()

	ctx := context.Background()
	m, err := googlemodel.New(ctx, googlemodel.Config{Model: "gemini-2.5-flash", BaseURL: gemini.URL}, "GOOGLE_API_KEY's value")
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "Capital of Norway?"}}}}}
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch ev.Type {
		case model.EventTextDelta:
			fmt.Printf("text %q\n", ev.Text)
		case model.EventFinish:
			fmt.Printf("finish %s, %d tokens in, %d out\n", ev.Finish, ev.Usage.InputTokens, ev.Usage.OutputTokens)
		}
	}
	// Output:
	// text "Oslo."
	// finish stop, 9 tokens in, 2 out
}
