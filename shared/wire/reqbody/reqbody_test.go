package reqbody_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/wire/reqbody"
)

// inMemory is the body type net/http sends with the headers in one write.
var inMemory = reflect.TypeOf(io.NopCloser(bytes.NewReader(nil)))

// wrapped is a body net/http cannot see into, like the AWS SDK's and openai-go's.
type wrapped struct{ io.Reader }

func (wrapped) Close() error { return nil }

func TestTransportSendsSmallBodiesFromMemory(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, string(b))
	}))
	defer srv.Close()
	var sent []*http.Request
	rt := reqbody.Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = append(sent, r)
		return http.DefaultTransport.RoundTrip(r)
	})}
	big := strings.Repeat("x", reqbody.Limit+1)
	for _, body := range []string{`{"a":1}`, big} {
		req, err := http.NewRequest("POST", srv.URL, wrapped{strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(len(body))
		resp, err := (&http.Client{Transport: rt}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if reflect.TypeOf(req.Body) != reflect.TypeOf(wrapped{}) {
			t.Errorf("the caller's request was changed: its body is a %T", req.Body)
		}
	}
	if len(got) != 2 || got[0] != `{"a":1}` || got[1] != big {
		t.Fatalf("the server got %d bodies, the first %.20q", len(got), got)
	}
	if typ := reflect.TypeOf(sent[0].Body); typ != inMemory {
		t.Errorf("a small body went out as a %v, not from memory", typ)
	}
	if sent[0].GetBody == nil {
		t.Error("a buffered body has no GetBody, so it cannot be resent on a stale connection")
	}
	if typ := reflect.TypeOf(sent[1].Body); typ == inMemory {
		t.Errorf("a body over the limit was read into memory")
	}
}

func TestClientBuffersInPlace(t *testing.T) {
	var typ reflect.Type
	c := reqbody.Client{Doer: doFunc(func(r *http.Request) (*http.Response, error) {
		typ = reflect.TypeOf(r.Body)
		b, _ := io.ReadAll(r.Body)
		return &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(b))}, nil
	})}
	req, _ := http.NewRequest("POST", "http://127.0.0.1/", wrapped{strings.NewReader("hello")})
	req.ContentLength = 5
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	echo, _ := io.ReadAll(resp.Body)
	if typ != inMemory || string(echo) != "hello" {
		t.Errorf("sent a %v body %q, want it from memory and %q", typ, echo, "hello")
	}

	short, _ := http.NewRequest("POST", "http://127.0.0.1/", wrapped{strings.NewReader("hel")})
	short.ContentLength = 5
	if _, err := c.Do(short); err == nil || !strings.Contains(err.Error(), "reading the request body") {
		t.Errorf("a body shorter than its Content-Length: err = %v, want a read error", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }
