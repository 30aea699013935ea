package aisdk_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentharness/harness/shared/edge/aisdk"
	"github.com/google/go-cmp/cmp"
)

// recordingWriter is a fake http.ResponseWriter that keeps every Write separately and counts
// flushes, so a test can tell one frame from several writes.
type recordingWriter struct {
	header  http.Header
	status  int
	writes  []string
	flushes int
	err     error // returned by Write when set
}

func newRecordingWriter() *recordingWriter { return &recordingWriter{header: http.Header{}} }

func (w *recordingWriter) Header() http.Header { return w.header }
func (w *recordingWriter) WriteHeader(status int) {
	w.status = status
}
func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.writes = append(w.writes, string(b))
	return len(b), nil
}
func (w *recordingWriter) Flush() { w.flushes++ }

// noFlushWriter cannot flush; the stream must still deliver every byte.
type noFlushWriter struct {
	header http.Header
	body   []byte
}

func (w *noFlushWriter) Header() http.Header { return w.header }
func (w *noFlushWriter) WriteHeader(int)     {}
func (w *noFlushWriter) Write(b []byte) (int, error) {
	w.body = append(w.body, b...)
	return len(b), nil
}

func TestOpen(t *testing.T) {
	rec := httptest.NewRecorder()
	aisdk.Open(rec, http.Header{"X-Turn-Id": {"turn-1"}})

	res := rec.Result()
	if res.StatusCode != http.StatusOK {
		t.Errorf("status = %d, want %d", res.StatusCode, http.StatusOK)
	}
	want := map[string]string{
		"x-vercel-ai-ui-message-stream": "v1",
		"Content-Type":                  "text/event-stream",
		"Cache-Control":                 "no-cache",
		"X-Accel-Buffering":             "no",
		"X-Turn-Id":                     "turn-1",
	}
	got := map[string]string{}
	for k := range want {
		got[k] = res.Header.Get(k)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if !rec.Flushed {
		t.Errorf("headers were not flushed")
	}
	if rec.Body.Len() != 0 {
		t.Errorf("body = %q, want nothing before the first chunk", rec.Body.String())
	}
	if aisdk.HeaderName != "x-vercel-ai-ui-message-stream" || aisdk.HeaderValue != "v1" {
		t.Errorf("HeaderName, HeaderValue = %q, %q; want x-vercel-ai-ui-message-stream, v1", aisdk.HeaderName, aisdk.HeaderValue)
	}
}

func TestSend(t *testing.T) {
	tests := []struct {
		name  string
		chunk any
		want  string // the JSON payload of the frame
	}{
		{"start", aisdk.Start("msg-1"), `{"type":"start","messageId":"msg-1"}`},
		{"start with an empty id", aisdk.Start(""), `{"type":"start","messageId":""}`},
		{"start-step", aisdk.StartStep(), `{"type":"start-step"}`},
		{"finish-step", aisdk.FinishStep(), `{"type":"finish-step"}`},
		{"text-start", aisdk.TextStart("t1"), `{"type":"text-start","id":"t1"}`},
		{"text-delta", aisdk.TextDelta("t1", "Hello"), `{"type":"text-delta","id":"t1","delta":"Hello"}`},
		{"text-delta empty", aisdk.TextDelta("t1", ""), `{"type":"text-delta","id":"t1","delta":""}`},
		{"text-delta escapes", aisdk.TextDelta("t1", "a\n\"b\"\n\ndata: x"), `{"type":"text-delta","id":"t1","delta":"a\n\"b\"\n\ndata: x"}`},
		{"text-end", aisdk.TextEnd("t1"), `{"type":"text-end","id":"t1"}`},
		{"tool-input-start", aisdk.ToolInputStart("c1", "weather"), `{"type":"tool-input-start","toolCallId":"c1","toolName":"weather"}`},
		{"tool-input-delta", aisdk.ToolInputDelta("c1", `{"city":`), `{"type":"tool-input-delta","toolCallId":"c1","inputTextDelta":"{\"city\":"}`},
		{"tool-input-delta empty", aisdk.ToolInputDelta("c1", ""), `{"type":"tool-input-delta","toolCallId":"c1","inputTextDelta":""}`},
		{
			"tool-input-available",
			aisdk.ToolInputAvailable("c1", "weather", json.RawMessage(`{"city":"Oslo"}`)),
			`{"type":"tool-input-available","toolCallId":"c1","toolName":"weather","input":{"city":"Oslo"}}`,
		},
		{
			"tool-input-available without input",
			aisdk.ToolInputAvailable("c1", "current_time", nil),
			`{"type":"tool-input-available","toolCallId":"c1","toolName":"current_time","input":null}`,
		},
		{
			"tool-input-error",
			aisdk.ToolInputError("c1", "weather", json.RawMessage(`{}`), "city is required"),
			`{"type":"tool-input-error","toolCallId":"c1","toolName":"weather","input":{},"errorText":"city is required"}`,
		},
		{
			"tool-output-available",
			aisdk.ToolOutput("c1", json.RawMessage(`"2026-01-01T00:00:00Z"`)),
			`{"type":"tool-output-available","toolCallId":"c1","output":"2026-01-01T00:00:00Z"}`,
		},
		{"tool-output-error", aisdk.ToolOutputError("c1", "boom"), `{"type":"tool-output-error","toolCallId":"c1","errorText":"boom"}`},
		{"tool-output-error empty", aisdk.ToolOutputError("c1", ""), `{"type":"tool-output-error","toolCallId":"c1","errorText":""}`},
		{"error", aisdk.Error("internal error"), `{"type":"error","errorText":"internal error"}`},
		{"finish", aisdk.Finish("stop", nil), `{"type":"finish","finishReason":"stop"}`},
		{
			"finish with metadata",
			aisdk.Finish("tool-calls", map[string]int{"inputTokens": 3}),
			`{"type":"finish","finishReason":"tool-calls","messageMetadata":{"inputTokens":3}}`,
		},
		{"data", aisdk.Data("turn", map[string]string{"id": "t1"}, false), `{"type":"data-turn","data":{"id":"t1"}}`},
		{"transient data", aisdk.Data("progress", 0.5, true), `{"type":"data-progress","data":0.5,"transient":true}`},
		{"data without a payload", aisdk.Data("ping", nil, false), `{"type":"data-ping","data":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newRecordingWriter()
			s := aisdk.Open(w, nil)
			openFlushes := w.flushes
			if err := s.Send(tt.chunk); err != nil {
				t.Fatalf("Send: %v", err)
			}
			want := []string{"data: " + tt.want + "\n\n"}
			if diff := cmp.Diff(want, w.writes); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if got := w.flushes - openFlushes; got != 1 {
				t.Errorf("Send flushed %d times, want 1", got)
			}
		})
	}
}

func TestStreamSequence(t *testing.T) {
	w := newRecordingWriter()
	s := aisdk.Open(w, nil)
	for _, c := range []any{aisdk.Start("m1"), aisdk.TextStart("t"), aisdk.TextDelta("t", "Hi"), aisdk.TextEnd("t"), aisdk.Finish("stop", nil)} {
		if err := s.Send(c); err != nil {
			t.Fatalf("Send(%+v): %v", c, err)
		}
	}
	if err := s.Done(); err != nil {
		t.Fatalf("Done: %v", err)
	}
	want := []string{
		"data: {\"type\":\"start\",\"messageId\":\"m1\"}\n\n",
		"data: {\"type\":\"text-start\",\"id\":\"t\"}\n\n",
		"data: {\"type\":\"text-delta\",\"id\":\"t\",\"delta\":\"Hi\"}\n\n",
		"data: {\"type\":\"text-end\",\"id\":\"t\"}\n\n",
		"data: {\"type\":\"finish\",\"finishReason\":\"stop\"}\n\n",
		"data: [DONE]\n\n",
	}
	if diff := cmp.Diff(want, w.writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if w.status != http.StatusOK {
		t.Errorf("status = %d, want %d", w.status, http.StatusOK)
	}
}

func TestDone(t *testing.T) {
	w := newRecordingWriter()
	s := aisdk.Open(w, nil)
	if err := s.Done(); err != nil {
		t.Fatalf("Done: %v", err)
	}
	if diff := cmp.Diff([]string{"data: [DONE]\n\n"}, w.writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

func TestWithoutFlusher(t *testing.T) {
	w := &noFlushWriter{header: http.Header{}}
	s := aisdk.Open(w, nil)
	if err := s.Send(aisdk.StartStep()); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := s.Done(); err != nil {
		t.Fatalf("Done: %v", err)
	}
	if got, want := string(w.body), "data: {\"type\":\"start-step\"}\n\ndata: [DONE]\n\n"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
}

func TestSendErrors(t *testing.T) {
	errGone := errors.New("client went away")
	tests := []struct {
		name     string
		writeErr error
		chunk    any
		wantIs   error
	}{
		{name: "chunk that cannot be encoded", chunk: aisdk.Data("bad", make(chan int), false)},
		{name: "write failure", writeErr: errGone, chunk: aisdk.StartStep(), wantIs: errGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newRecordingWriter()
			s := aisdk.Open(w, nil)
			w.err = tt.writeErr
			err := s.Send(tt.chunk)
			if err == nil {
				t.Fatal("Send succeeded, want an error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Send error = %v, want errors.Is(err, %v)", err, tt.wantIs)
			}
			if len(w.writes) != 0 {
				t.Errorf("writes = %q, want none", w.writes)
			}
		})
	}
	w := newRecordingWriter()
	s := aisdk.Open(w, nil)
	w.err = errGone
	if err := s.Done(); !errors.Is(err, errGone) {
		t.Errorf("Done error = %v, want errors.Is(err, %v)", err, errGone)
	}
}
