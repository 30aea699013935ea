package wirefixture

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

// Answer returns a transport that answers every request with status, header and body, without a
// network: its dialer hands the client one end of an in-memory pipe and writes the response on
// the other. Fuzz tests feed a provider adapter any stream through it, at the speed fuzzing needs.
// The request's URL must be http, not https.
func Answer(status int, header http.Header, body []byte) *http.Transport {
	return &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			client, server := net.Pipe()
			go answer(server, status, header, body)
			return client, nil
		},
	}
}

func answer(conn net.Conn, status int, header http.Header, body []byte) {
	defer conn.Close()
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
	resp := &http.Response{
		StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Header: header.Clone(), Close: true,
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
	}
	// A client that stops reading closes its end, which ends this write.
	_ = resp.Write(conn)
}

// Bodies returns the response bodies recorded in testdata file name (binary ones decoded), to
// seed fuzz corpora with what the provider really sends.
func Bodies(tb testing.TB, name string) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, e := range Load(tb, name) {
		b, err := e.Response.Bytes()
		if err != nil {
			tb.Fatalf("a body of %s: %v", name, err)
		}
		out = append(out, b)
	}
	return out
}
