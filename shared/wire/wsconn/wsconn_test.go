package wsconn_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/agentharness/harness/infra/fakeapigw"
	"github.com/agentharness/harness/shared/wire/wsconn"
)

const region = "eu-west-1"

var creds = aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret"}

// recorder is what reached the server in front of the stand-in.
type recorder struct {
	mu       sync.Mutex
	paths    []string
	amzDates []string
}

func (r *recorder) requests() ([]string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...), append([]string(nil), r.amzDates...)
}

// setup starts the stand-in over HTTP and returns it, a poster for its "prod" stage signing with
// secret, and the record of the requests that reached it.
func setup(t *testing.T, secret string) (*fakeapigw.Server, *wsconn.Poster, *recorder) {
	t.Helper()
	fake := fakeapigw.New(creds, region)
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.paths = append(rec.paths, r.Method+" "+r.URL.EscapedPath())
		rec.amzDates = append(rec.amzDates, r.Header.Get("X-Amz-Date"))
		rec.mu.Unlock()
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p := &wsconn.Poster{
		Endpoint:    srv.URL + "/prod",
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(creds.AccessKeyID, secret, ""),
		Client:      srv.Client(),
	}
	return fake, p, rec
}

func TestPost(t *testing.T) {
	fake, p, rec := setup(t, creds.SecretAccessKey)
	ids := []string{"abc=", "a/b+c d="}
	for _, id := range ids {
		fake.Connect(id)
	}
	fake.Connect("bystander=")
	binary := []byte{0, 1, 0xff, '\n', '"'}

	for _, id := range ids {
		for _, msg := range [][]byte{[]byte(`{"type":"delta","text":"hi"}`), binary} {
			if err := p.Post(t.Context(), id, msg); err != nil {
				t.Fatalf("Post(%q): %v", id, err)
			}
		}
	}
	// A trailing slash on the endpoint is tolerated.
	p.Endpoint += "/"
	if err := p.Post(t.Context(), "abc=", []byte("last")); err != nil {
		t.Fatalf("Post with a trailing slash: %v", err)
	}

	want := map[string][][]byte{
		"abc=":     {[]byte(`{"type":"delta","text":"hi"}`), binary, []byte("last")},
		"a/b+c d=": {[]byte(`{"type":"delta","text":"hi"}`), binary},
	}
	for id, w := range want {
		got := fake.Messages(id)
		if len(got) != len(w) {
			t.Fatalf("%q got %d messages %q, want %q", id, len(got), got, w)
		}
		for i := range w {
			if !bytes.Equal(got[i], w[i]) {
				t.Errorf("%q message %d = %q, want %q", id, i, got[i], w[i])
			}
		}
	}
	if got := fake.Messages("bystander="); len(got) != 0 {
		t.Errorf("bystander= got %q", got)
	}
	paths, _ := rec.requests()
	if !strings.Contains(strings.Join(paths, "\n"), "POST /prod/@connections/a%2Fb+c%20d=") {
		t.Errorf("requests %q: the id with a slash and a space was not escaped into one segment", paths)
	}
}

func TestPostWrongSecret(t *testing.T) {
	fake, p, _ := setup(t, "not the secret")
	fake.Connect("abc=")
	err := p.Post(t.Context(), "abc=", []byte("hello"))
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("Post with the wrong secret: %v, want an error naming 403", err)
	}
	if errors.Is(err, wsconn.ErrGone) {
		t.Errorf("a refused signature is not a gone connection: %v", err)
	}
	if got := fake.Messages("abc="); len(got) != 0 {
		t.Errorf("recorded %q despite the bad signature", got)
	}
}

func TestPostGone(t *testing.T) {
	fake, p, _ := setup(t, creds.SecretAccessKey)
	fake.Connect("left=")
	fake.Gone("left=")
	for _, id := range []string{"left=", "never="} {
		if err := p.Post(t.Context(), id, []byte("hello")); !errors.Is(err, wsconn.ErrGone) {
			t.Errorf("Post(%q) = %v, want ErrGone", id, err)
		}
	}
}

func TestPostRefusedBeforeSending(t *testing.T) {
	fake, p, rec := setup(t, creds.SecretAccessKey)
	fake.Connect("abc=")

	err := p.Post(t.Context(), "abc=", make([]byte, wsconn.MaxMessageSize+1))
	if err == nil || !strings.Contains(err.Error(), "131072") {
		t.Errorf("oversized Post: %v, want an error naming the 131072-byte limit", err)
	}
	if err := p.Post(t.Context(), "", []byte("hello")); err == nil {
		t.Error("Post with an empty connection id succeeded")
	}
	if err := p.Disconnect(t.Context(), ""); err == nil {
		t.Error("Disconnect with an empty connection id succeeded")
	}
	if paths, _ := rec.requests(); len(paths) != 0 {
		t.Errorf("requests reached the server: %q", paths)
	}

	// The limit itself is allowed.
	if err := p.Post(t.Context(), "abc=", bytes.Repeat([]byte("x"), wsconn.MaxMessageSize)); err != nil {
		t.Errorf("Post of exactly %d bytes: %v", wsconn.MaxMessageSize, err)
	}
	if got := fake.Messages("abc="); len(got) != 1 || len(got[0]) != wsconn.MaxMessageSize {
		t.Errorf("got %d messages, want one of %d bytes", len(got), wsconn.MaxMessageSize)
	}
}

func TestDisconnect(t *testing.T) {
	fake, p, rec := setup(t, creds.SecretAccessKey)
	fake.Connect("abc=")
	if err := p.Disconnect(t.Context(), "abc="); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	if !fake.Deleted("abc=") {
		t.Error("connection not deleted")
	}
	if paths, _ := rec.requests(); len(paths) != 1 || paths[0] != "DELETE /prod/@connections/abc=" {
		t.Errorf("requests = %q, want one DELETE", paths)
	}
	if err := p.Disconnect(t.Context(), "abc="); !errors.Is(err, wsconn.ErrGone) {
		t.Errorf("second Disconnect = %v, want ErrGone", err)
	}
	if err := p.Post(t.Context(), "abc=", []byte("hello")); !errors.Is(err, wsconn.ErrGone) {
		t.Errorf("Post after Disconnect = %v, want ErrGone", err)
	}
}

func TestSignsAtNow(t *testing.T) {
	fake, p, rec := setup(t, creds.SecretAccessKey)
	fake.Connect("abc=")
	p.Now = func() time.Time { return time.Date(2024, 2, 29, 23, 59, 58, 0, time.FixedZone("x", 3600)) }
	if err := p.Post(t.Context(), "abc=", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, dates := rec.requests(); len(dates) != 1 || dates[0] != "20240229T225958Z" {
		t.Errorf("X-Amz-Date = %q, want [20240229T225958Z]", dates)
	}
}

func TestPostOtherStatus(t *testing.T) {
	body := "boom " + strings.Repeat("y", 300)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, body, http.StatusInternalServerError)
	}))
	defer srv.Close()
	p := &wsconn.Poster{
		Endpoint:    srv.URL + "/prod",
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
	}
	err := p.Post(t.Context(), "abc=", []byte("hello"))
	if err == nil {
		t.Fatal("Post succeeded on a 500")
	}
	msg := err.Error()
	if !strings.Contains(msg, "500") || !strings.Contains(msg, body[:200]) || strings.Contains(msg, body[:201]) {
		t.Errorf("error %q: want the status and the first 200 bytes of the body", msg)
	}
	if errors.Is(err, wsconn.ErrGone) {
		t.Errorf("a 500 is not ErrGone: %v", err)
	}
}

func TestEndpointFor(t *testing.T) {
	got := wsconn.EndpointFor("abc123.execute-api.eu-west-1.amazonaws.com", "prod")
	if want := "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"; got != want {
		t.Errorf("EndpointFor = %q, want %q", got, want)
	}
}
