package fakeapigw_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/agentharness/harness/infra/fakeapigw"
)

var creds = aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret"}

const region = "eu-west-1"

func hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// signed returns a request for url signed with c for region and service over body.
func signed(t *testing.T, method, url string, body []byte, c aws.Credentials, region, service string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := v4.NewSigner().SignHTTP(t.Context(), c, req, hash(body), service, region, time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

// setBody replaces the body sent without re-signing.
func setBody(req *http.Request, body []byte) {
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
}

func TestServer(t *testing.T) {
	msg := []byte(`{"type":"text","text":"hello"}`)
	tampered := []byte(`{"type":"text","text":"HELLO"}`) // same length
	tests := []struct {
		name       string
		req        func(t *testing.T, base string) *http.Request
		wantStatus int
		wantPosted bool
	}{
		{
			name: "signed post",
			req: func(t *testing.T, base string) *http.Request {
				return signed(t, "POST", base+"/prod/@connections/abc=", msg, creds, region, "execute-api")
			},
			wantStatus: http.StatusOK, wantPosted: true,
		},
		{
			name: "signed post with a content hash header",
			req: func(t *testing.T, base string) *http.Request {
				req, _ := http.NewRequest("POST", base+"/prod/@connections/abc=", bytes.NewReader(msg))
				req.Header.Set("X-Amz-Content-Sha256", hash(msg))
				if err := v4.NewSigner().SignHTTP(t.Context(), creds, req, hash(msg), "execute-api", region, time.Now()); err != nil {
					t.Fatal(err)
				}
				return req
			},
			wantStatus: http.StatusOK, wantPosted: true,
		},
		{
			name: "unsigned",
			req: func(t *testing.T, base string) *http.Request {
				req, _ := http.NewRequest("POST", base+"/prod/@connections/abc=", bytes.NewReader(msg))
				return req
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "tampered body",
			req: func(t *testing.T, base string) *http.Request {
				req := signed(t, "POST", base+"/prod/@connections/abc=", msg, creds, region, "execute-api")
				setBody(req, tampered)
				return req
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "tampered body with a matching content hash header",
			req: func(t *testing.T, base string) *http.Request {
				req := signed(t, "POST", base+"/prod/@connections/abc=", msg, creds, region, "execute-api")
				setBody(req, tampered)
				req.Header.Set("X-Amz-Content-Sha256", hash(tampered))
				return req
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "content hash header not matching the body",
			req: func(t *testing.T, base string) *http.Request {
				req, _ := http.NewRequest("POST", base+"/prod/@connections/abc=", bytes.NewReader(msg))
				req.Header.Set("X-Amz-Content-Sha256", hash(tampered))
				if err := v4.NewSigner().SignHTTP(t.Context(), creds, req, hash(msg), "execute-api", region, time.Now()); err != nil {
					t.Fatal(err)
				}
				return req
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "signed for another connection",
			req: func(t *testing.T, base string) *http.Request {
				req := signed(t, "POST", base+"/prod/@connections/other=", msg, creds, region, "execute-api")
				other := signed(t, "POST", base+"/prod/@connections/abc=", msg, creds, region, "execute-api")
				req.URL = other.URL
				return req
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "tampered signature",
			req: func(t *testing.T, base string) *http.Request {
				req := signed(t, "POST", base+"/prod/@connections/abc=", msg, creds, region, "execute-api")
				auth := req.Header.Get("Authorization")
				flipped := "0"
				if strings.HasSuffix(auth, "0") {
					flipped = "1"
				}
				req.Header.Set("Authorization", auth[:len(auth)-1]+flipped)
				return req
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "wrong secret",
			req: func(t *testing.T, base string) *http.Request {
				c := creds
				c.SecretAccessKey = "wrong"
				return signed(t, "POST", base+"/prod/@connections/abc=", msg, c, region, "execute-api")
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "wrong access key",
			req: func(t *testing.T, base string) *http.Request {
				c := creds
				c.AccessKeyID = "AKIDOTHER"
				return signed(t, "POST", base+"/prod/@connections/abc=", msg, c, region, "execute-api")
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "wrong region",
			req: func(t *testing.T, base string) *http.Request {
				return signed(t, "POST", base+"/prod/@connections/abc=", msg, creds, "us-east-1", "execute-api")
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "wrong service",
			req: func(t *testing.T, base string) *http.Request {
				return signed(t, "POST", base+"/prod/@connections/abc=", msg, creds, region, "apigateway")
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "unexpected session token",
			req: func(t *testing.T, base string) *http.Request {
				c := creds
				c.SessionToken = "token"
				return signed(t, "POST", base+"/prod/@connections/abc=", msg, c, region, "execute-api")
			},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "unknown connection",
			req: func(t *testing.T, base string) *http.Request {
				return signed(t, "POST", base+"/prod/@connections/nobody=", msg, creds, region, "execute-api")
			},
			wantStatus: http.StatusGone,
		},
		{
			name: "gone connection",
			req: func(t *testing.T, base string) *http.Request {
				return signed(t, "POST", base+"/prod/@connections/gone=", msg, creds, region, "execute-api")
			},
			wantStatus: http.StatusGone,
		},
		{
			name: "other method",
			req: func(t *testing.T, base string) *http.Request {
				return signed(t, "GET", base+"/prod/@connections/abc=", nil, creds, region, "execute-api")
			},
			wantStatus: http.StatusNotFound,
		},
		{
			name: "no stage",
			req: func(t *testing.T, base string) *http.Request {
				return signed(t, "POST", base+"/@connections/abc=", msg, creds, region, "execute-api")
			},
			wantStatus: http.StatusNotFound,
		},
		{
			name: "two-segment stage",
			req: func(t *testing.T, base string) *http.Request {
				return signed(t, "POST", base+"/a/prod/@connections/abc=", msg, creds, region, "execute-api")
			},
			wantStatus: http.StatusNotFound,
		},
		{
			name: "too large",
			req: func(t *testing.T, base string) *http.Request {
				return signed(t, "POST", base+"/prod/@connections/abc=", make([]byte, 128<<10+1), creds, region, "execute-api")
			},
			wantStatus: http.StatusRequestEntityTooLarge,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fakeapigw.New(creds, region)
			s.Connect("abc=")
			s.Connect("other=")
			s.Connect("gone=")
			s.Gone("gone=")
			srv := httptest.NewServer(s)
			defer srv.Close()

			resp, err := http.DefaultClient.Do(tt.req(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d (%s), want %d", resp.StatusCode, raw, tt.wantStatus)
			}
			if tt.wantStatus >= 400 {
				var body struct{ Message string }
				if err := json.Unmarshal(raw, &body); err != nil || body.Message == "" {
					t.Errorf("error body %s is not a JSON message (%v)", raw, err)
				}
			}
			got := s.Messages("abc=")
			if tt.wantPosted {
				if len(got) != 1 || !bytes.Equal(got[0], msg) {
					t.Errorf("messages = %q, want [%q]", got, msg)
				}
			} else if len(got) != 0 {
				t.Errorf("messages = %q, want none", got)
			}
			if len(s.Messages("other=")) != 0 {
				t.Errorf("other= got messages %q", s.Messages("other="))
			}
		})
	}
}

func TestForbiddenMessages(t *testing.T) {
	s := fakeapigw.New(creds, region)
	s.Connect("abc=")
	srv := httptest.NewServer(s)
	defer srv.Close()

	req := signed(t, "POST", srv.URL+"/prod/@connections/abc=", []byte("x"), creds, region, "execute-api")
	setBody(req, []byte("y"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(raw), "signature") {
		t.Errorf("tampered body: %d %s, want 403 naming the signature", resp.StatusCode, raw)
	}

	req, _ = http.NewRequest("POST", srv.URL+"/prod/@connections/abc=", strings.NewReader("x"))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(raw), "authentication token") {
		t.Errorf("unsigned: %d %s, want 403 naming the missing token", resp.StatusCode, raw)
	}
}

func TestSessionToken(t *testing.T) {
	c := creds
	c.SessionToken = "token"
	s := fakeapigw.New(c, region)
	s.Connect("abc=")
	srv := httptest.NewServer(s)
	defer srv.Close()

	for _, tc := range []struct {
		token string
		want  int
	}{{"token", http.StatusOK}, {"", http.StatusForbidden}, {"other", http.StatusForbidden}} {
		sc := c
		sc.SessionToken = tc.token
		resp, err := http.DefaultClient.Do(signed(t, "POST", srv.URL+"/prod/@connections/abc=", []byte("m"), sc, region, "execute-api"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("session token %q: status %d, want %d", tc.token, resp.StatusCode, tc.want)
		}
	}
	if got := s.Messages("abc="); len(got) != 1 {
		t.Errorf("messages = %q, want one", got)
	}
}

func TestDelete(t *testing.T) {
	s := fakeapigw.New(creds, region)
	s.Connect("abc=")
	srv := httptest.NewServer(s)
	defer srv.Close()

	do := func(method string) int {
		t.Helper()
		resp, err := http.DefaultClient.Do(signed(t, method, srv.URL+"/prod/@connections/abc=", nil, creds, region, "execute-api"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s.Deleted("abc=") {
		t.Fatal("deleted before DELETE")
	}
	if got := do("DELETE"); got != http.StatusNoContent {
		t.Errorf("DELETE: status %d, want 204", got)
	}
	if !s.Deleted("abc=") {
		t.Error("not deleted after DELETE")
	}
	if got := do("POST"); got != http.StatusGone {
		t.Errorf("POST after DELETE: status %d, want 410", got)
	}
	if got := do("DELETE"); got != http.StatusGone {
		t.Errorf("second DELETE: status %d, want 410", got)
	}
}
