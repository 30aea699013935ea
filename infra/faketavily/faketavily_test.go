package faketavily_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentharness/harness/infra/faketavily"
)

const key = "tvly-test-key"

var docs = []faketavily.Document{
	{URL: "https://go.dev/doc/", Title: "Go documentation", Content: "Go is an open source programming language. It is simple."},
	{URL: "https://blog.golang.org/gophers", Title: "The Go gopher", Content: "The gopher is the mascot of Go."},
	{URL: "https://news.example.com/rodents", Title: "Rodents", Content: "A gopher is a burrowing rodent.", PublishedDate: "2025-01-02"},
	{URL: "https://example.com/other", Title: "Unrelated", Content: "Nothing to see here."},
}

// post sends body to url with the bearer key (none when key is empty) and returns the status
// and the decoded JSON body.
func post(t *testing.T, url, key, body string) (int, any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var got any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("response %s is not JSON: %v", raw, err)
	}
	return resp.StatusCode, got
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decoding want %s: %v", s, err)
	}
	return v
}

func TestServer(t *testing.T) {
	tests := []struct {
		name       string
		path       string
		key        string
		body       string
		wantStatus int
		want       string // the response body as JSON
	}{
		{
			name: "search ranks by the query's terms",
			path: "/search", key: key,
			body:       `{"query":"Go gopher"}`,
			wantStatus: http.StatusOK,
			want: `{"query":"Go gopher","answer":null,"response_time":0.01,"results":[
				{"title":"The Go gopher","url":"https://blog.golang.org/gophers","content":"The gopher is the mascot of Go.","score":1},
				{"title":"Go documentation","url":"https://go.dev/doc/","content":"Go is an open source programming language. It is simple.","score":0.5},
				{"title":"Rodents","url":"https://news.example.com/rodents","content":"A gopher is a burrowing rodent.","score":0.25,"published_date":"2025-01-02"}]}`,
		},
		{
			name: "search honours max_results and answers from the top result",
			path: "/search", key: key,
			body:       `{"query":"go programming language","max_results":1,"include_answer":true}`,
			wantStatus: http.StatusOK,
			want: `{"query":"go programming language","answer":"Go is an open source programming language.","response_time":0.01,"results":[
				{"title":"Go documentation","url":"https://go.dev/doc/","content":"Go is an open source programming language. It is simple.","score":0.6667}]}`,
		},
		{
			name: "search applies include_domains to subdomains too",
			path: "/search", key: key,
			body:       `{"query":"gopher","include_domains":["example.com"]}`,
			wantStatus: http.StatusOK,
			want: `{"query":"gopher","answer":null,"response_time":0.01,"results":[
				{"title":"Rodents","url":"https://news.example.com/rodents","content":"A gopher is a burrowing rodent.","score":0.5,"published_date":"2025-01-02"}]}`,
		},
		{
			name: "search applies exclude_domains",
			path: "/search", key: key,
			body:       `{"query":"gopher","exclude_domains":["example.com"]}`,
			wantStatus: http.StatusOK,
			want: `{"query":"gopher","answer":null,"response_time":0.01,"results":[
				{"title":"The Go gopher","url":"https://blog.golang.org/gophers","content":"The gopher is the mascot of Go.","score":1}]}`,
		},
		{
			name: "search that matches nothing",
			path: "/search", key: key,
			body:       `{"query":"quantum","include_answer":true}`,
			wantStatus: http.StatusOK,
			want:       `{"query":"quantum","answer":"","response_time":0.01,"results":[]}`,
		},
		{
			name: "extract reads known urls and fails the others",
			path: "/extract", key: key,
			body:       `{"urls":["https://go.dev/doc/","https://example.com/missing"]}`,
			wantStatus: http.StatusOK,
			want: `{"response_time":0.01,
				"results":[{"url":"https://go.dev/doc/","raw_content":"# Go documentation\n\nGo is an open source programming language. It is simple."}],
				"failed_results":[{"url":"https://example.com/missing","error":"Failed to fetch url"}]}`,
		},
		{
			name: "extract takes one url as a string, as text",
			path: "/extract", key: key,
			body:       `{"urls":"https://example.com/other","format":"text","extract_depth":"advanced"}`,
			wantStatus: http.StatusOK,
			want: `{"response_time":0.01,"failed_results":[],
				"results":[{"url":"https://example.com/other","raw_content":"Unrelated\n\nNothing to see here."}]}`,
		},
		{
			name: "no key", path: "/search", key: "", body: `{"query":"go"}`,
			wantStatus: http.StatusUnauthorized,
			want:       `{"detail":{"error":"Unauthorized: missing or invalid API key."}}`,
		},
		{
			name: "wrong key", path: "/extract", key: "tvly-wrong", body: `{"urls":["https://go.dev/doc/"]}`,
			wantStatus: http.StatusUnauthorized,
			want:       `{"detail":{"error":"Unauthorized: missing or invalid API key."}}`,
		},
		{
			name: "missing query", path: "/search", key: key, body: `{"max_results":3}`,
			wantStatus: http.StatusBadRequest,
			want:       `{"detail":{"error":"Query is missing."}}`,
		},
		{
			name: "blank query", path: "/search", key: key, body: `{"query":"  "}`,
			wantStatus: http.StatusBadRequest,
			want:       `{"detail":{"error":"Query is missing."}}`,
		},
		{
			name: "max_results above 20", path: "/search", key: key, body: `{"query":"go","max_results":21}`,
			wantStatus: http.StatusBadRequest,
			want:       `{"detail":{"error":"max_results must be between 0 and 20."}}`,
		},
		{
			name: "unknown topic", path: "/search", key: key, body: `{"query":"go","topic":"sports"}`,
			wantStatus: http.StatusBadRequest,
			want:       `{"detail":{"error":"Invalid topic \"sports\"."}}`,
		},
		{
			name: "missing urls", path: "/extract", key: key, body: `{"format":"text"}`,
			wantStatus: http.StatusBadRequest,
			want:       `{"detail":{"error":"No URLs provided."}}`,
		},
		{
			name: "unknown format", path: "/extract", key: key, body: `{"urls":["https://go.dev/doc/"],"format":"html"}`,
			wantStatus: http.StatusBadRequest,
			want:       `{"detail":{"error":"Invalid format \"html\"."}}`,
		},
	}
	srv := httptest.NewServer(faketavily.New(&faketavily.Options{APIKey: key, Documents: docs}))
	defer srv.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, got := post(t, srv.URL+tt.path, tt.key, tt.body)
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d", status, tt.wantStatus)
			}
			if diff := cmp.Diff(decode(t, tt.want), got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultMaxResults(t *testing.T) {
	var many []faketavily.Document
	for _, c := range "abcdefg" {
		many = append(many, faketavily.Document{URL: "https://example.com/" + string(c), Title: "Page", Content: "go"})
	}
	srv := httptest.NewServer(faketavily.New(&faketavily.Options{Documents: many}))
	defer srv.Close()
	status, got := post(t, srv.URL+"/search", "any-key", `{"query":"go"}`)
	if status != http.StatusOK {
		t.Fatalf("status = %d, want 200 (an empty APIKey accepts any key)", status)
	}
	if n := len(got.(map[string]any)["results"].([]any)); n != 5 {
		t.Errorf("got %d results, want Tavily's default of 5", n)
	}
}

func TestRequests(t *testing.T) {
	s := faketavily.New(&faketavily.Options{APIKey: key, Documents: docs})
	srv := httptest.NewServer(s)
	defer srv.Close()
	post(t, srv.URL+"/search", key, `{"query":"go"}`)
	post(t, srv.URL+"/extract", "tvly-wrong", `{"urls":"https://go.dev/doc/"}`)

	want := []faketavily.Request{
		{Method: http.MethodPost, Path: "/search", APIKey: key, Body: json.RawMessage(`{"query":"go"}`)},
		{Method: http.MethodPost, Path: "/extract", APIKey: "tvly-wrong", Body: json.RawMessage(`{"urls":"https://go.dev/doc/"}`)},
	}
	if diff := cmp.Diff(want, s.Requests()); diff != "" {
		t.Errorf("Requests() (-want +got):\n%s", diff)
	}
}
