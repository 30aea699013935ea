package modeltest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
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

// FuzzStream feeds any body to an adapter as the answer of one streamed call (Stream.Check).
func FuzzStream(f *testing.F, s Stream) {
	for _, name := range s.Fixtures {
		for _, b := range wirefixture.Bodies(f, name) {
			f.Add(b)
		}
	}
	for _, seed := range s.Seeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(s.Check)
}

// Check feeds body to the adapter as the answer of one streamed call: the stream must be well
// formed (CheckStream), ending in a finish or a provider error, whatever the body, and nothing
// may panic.
func (s Stream) Check(t *testing.T, body []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := s.New(ctx, wirefixture.Answer(http.StatusOK, http.Header{"Content-Type": {s.ContentType}}, body))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckStream(m.Stream(ctx, &model.Request{Messages: []model.Message{User("hi")}})); err != nil {
		t.Fatalf("stream %q: %v", body, err)
	}
}
