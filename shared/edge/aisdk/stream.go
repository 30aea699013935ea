// The stream is written as server-sent events: `data: {json}` frames ending with `data: [DONE]`.

package aisdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// HeaderName and HeaderValue mark a response as a UI message stream.
const (
	HeaderName  = "x-vercel-ai-ui-message-stream"
	HeaderValue = "v1"
)

// Writer writes UI message chunks to an HTTP response.
type Writer struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
}

// Open sends the stream's status and headers and returns a writer for its chunks.
func Open(w http.ResponseWriter, extra http.Header) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	h.Set(HeaderName, HeaderValue)
	for k, v := range extra {
		h[k] = v
	}
	w.WriteHeader(http.StatusOK)
	sw := &Writer{w: w, rc: http.NewResponseController(w)}
	sw.flush()
	return sw
}

// Send writes one chunk as a single SSE frame and flushes it.
func (s *Writer) Send(chunk any) error { return s.SendID("", chunk) }

// SendID is Send with the frame's SSE id (none when id is empty): a client that loses the
// stream names the last id it got (Last-Event-ID) to resume after it.
func (s *Writer) SendID(id string, chunk any) error {
	b, err := json.Marshal(chunk)
	if err != nil {
		return fmt.Errorf("encoding chunk: %w", err)
	}
	s.buf.Reset()
	if id != "" {
		s.buf.WriteString("id: ")
		s.buf.WriteString(id)
		s.buf.WriteString("\n")
	}
	s.buf.WriteString("data: ")
	s.buf.Write(b)
	s.buf.WriteString("\n\n")
	return s.write()
}

// Comment writes an SSE comment line, which clients ignore: a heartbeat that keeps proxies and
// clients from timing out a quiet stream.
func (s *Writer) Comment(text string) error {
	s.buf.Reset()
	s.buf.WriteString(": ")
	s.buf.WriteString(text)
	s.buf.WriteString("\n\n")
	return s.write()
}

// Done writes the stream's terminator.
func (s *Writer) Done() error {
	s.buf.Reset()
	s.buf.WriteString("data: [DONE]\n\n")
	return s.write()
}

func (s *Writer) write() error {
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return fmt.Errorf("writing chunk: %w", err)
	}
	s.flush()
	return nil
}

// flush is best-effort: a writer that cannot flush still receives every byte.
func (s *Writer) flush() { _ = s.rc.Flush() }
