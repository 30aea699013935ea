package wirefixture

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
)

// Stream describes a provider adapter's streamed answer for FuzzStream.
type Stream struct {
	// Fixtures are testdata files whose recorded bodies seed the corpus; Seeds are more bodies.
	Fixtures []string
	Seeds    []string
	// ContentType is the answer's Content-Type.
	ContentType string
	// New builds the adapter's model on transport, which answers every call with the body.
	New func(ctx context.Context, transport *http.Transport) (agent.Model, error)
}

// FuzzStream feeds any body to an adapter as the answer of one streamed call: the stream must
// be well formed (modeltest.CheckStream), ending in a finish or a provider error, whatever the
// body, and nothing may panic.
func FuzzStream(f *testing.F, s Stream) {
	for _, name := range s.Fixtures {
		for _, b := range Bodies(f, name) {
			f.Add(b)
		}
	}
	for _, seed := range s.Seeds {
		f.Add([]byte(seed))
	}
	header := http.Header{"Content-Type": {s.ContentType}}
	req := &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "hi"}}}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := s.New(ctx, Answer(http.StatusOK, header, body))
		if err != nil {
			t.Fatal(err)
		}
		if err := modeltest.CheckStream(m.Stream(ctx, req)); err != nil {
			t.Fatalf("stream %q: %v", body, err)
		}
	})
}
