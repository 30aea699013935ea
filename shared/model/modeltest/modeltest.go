// Package modeltest is what the model adapters' tests share: the check of the event streams an
// adapter produces (whatever a provider sends, the agent loop must get either well-formed events
// or an error) and the fuzzing that feeds it, a server standing in for a provider's API that
// keeps the requests it gets, and the calls and checks every adapter's tests make.
package modeltest

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/model"
)

// CheckStream reads the whole stream and returns its first violation of what the loop relies
// on, or nil:
//   - it ends with one *model.ProviderError or one EventFinish, and nothing follows either;
//   - text deltas are not empty;
//   - a tool call starts with a non-empty id, once, and its deltas and the complete call name
//     a started call; the complete call's input is its deltas joined ("{}" when they are blank);
//   - the finish reason is one the loop knows, a source has a URL;
//   - reasoning deltas are not empty, and the end of a piece of reasoning names its provider.
func CheckStream(events iter.Seq2[model.Event, error]) error {
	type call struct {
		name  string
		input strings.Builder
		done  bool
	}
	calls := map[string]*call{}
	ended := false
	for ev, err := range events {
		if ended {
			return fmt.Errorf("%+v, %v after the end of the stream", ev, err)
		}
		if err != nil {
			var pe *model.ProviderError
			if !errors.As(err, &pe) || pe.Provider == "" {
				return fmt.Errorf("error %T %v is not a *model.ProviderError", err, err)
			}
			ended = true
			continue
		}
		switch ev.Type {
		case model.EventTextDelta:
			if ev.Text == "" {
				return errors.New("empty text delta")
			}
		case model.EventToolInputStart:
			if ev.ToolCallID == "" {
				return fmt.Errorf("tool call %q starts without an id", ev.ToolName)
			}
			if calls[ev.ToolCallID] != nil {
				return fmt.Errorf("tool call id %q starts twice", ev.ToolCallID)
			}
			calls[ev.ToolCallID] = &call{name: ev.ToolName}
		case model.EventToolInputDelta:
			c := calls[ev.ToolCallID]
			if c == nil || c.done {
				return fmt.Errorf("input delta for tool call %q, which is not streaming", ev.ToolCallID)
			}
			c.input.WriteString(ev.Text)
		case model.EventToolCall:
			c := calls[ev.ToolCallID]
			if c == nil || c.done {
				return fmt.Errorf("tool call %q completes without having started, or twice", ev.ToolCallID)
			}
			c.done = true
			want := c.input.String()
			if strings.TrimSpace(want) == "" {
				want = "{}"
			}
			if ev.ToolName != c.name || !bytes.Equal(ev.Input, []byte(want)) {
				return fmt.Errorf("tool call %q is %s(%s), its stream said %s(%s)", ev.ToolCallID, ev.ToolName, ev.Input, c.name, want)
			}
		case model.EventReasoningDelta:
			if ev.Text == "" {
				return errors.New("empty reasoning delta")
			}
		case model.EventReasoningEnd:
			if ev.Provider == "" {
				return errors.New("reasoning ends without naming its provider")
			}
		case model.EventSource:
			if ev.Source == nil || ev.Source.URL == "" {
				return fmt.Errorf("source %+v without a URL", ev.Source)
			}
		case model.EventFinish:
			switch ev.Finish {
			case model.FinishStop, model.FinishLength, model.FinishToolCalls, model.FinishFilter, model.FinishError, model.FinishOther:
			default:
				return fmt.Errorf("finish reason %q", ev.Finish)
			}
			ended = true
		default:
			return fmt.Errorf("event of unknown type %d", ev.Type)
		}
	}
	if !ended {
		return errors.New("the stream stopped without a finish or an error")
	}
	return nil
}

// FileParts is a user message carrying a PNG and a PDF with their bytes, and a zip whose bytes
// no provider takes, for the adapters' tests of file parts.
func FileParts() model.Message {
	return model.Message{Role: model.RoleUser, Parts: []model.Part{
		{Type: model.PartText, Text: "what is in these?"},
		{Type: model.PartFile, MediaType: "image/png", Filename: "chart.png", Attachment: "att_png", Data: []byte("png-bytes")},
		{Type: model.PartFile, MediaType: "application/pdf", Filename: "report.pdf", Attachment: "att_pdf", Data: []byte("pdf-bytes")},
		{Type: model.PartFile, MediaType: "application/zip", Filename: "data.zip", Attachment: "att_zip", Data: []byte("zip-bytes")},
	}}
}

// CheckFileParts checks what an adapter sends of FileParts, marshalled: it holds each of want,
// and not the zip's bytes in base64, the form every provider would carry them in.
func CheckFileParts(t *testing.T, sent []byte, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(string(sent), w) {
			t.Errorf("the message %s lacks %s", sent, w)
		}
	}
	if strings.Contains(string(sent), "emlwLWJ5dGVz") {
		t.Errorf("the zip's bytes were sent: %s", sent)
	}
}
