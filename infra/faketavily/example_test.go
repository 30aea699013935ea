package faketavily_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/agentharness/harness/infra/faketavily"
)

// A search ranks the documents by the query's terms and answers from the top result; an
// extract reads a known URL and reports an unknown one as failed.
func ExampleServer() {
	s := faketavily.New(&faketavily.Options{
		APIKey: "tvly-test",
		Documents: []faketavily.Document{
			{URL: "https://go.dev/doc/", Title: "Go documentation", Content: "Go is an open source programming language. It makes software simple."},
			{URL: "https://example.com/gophers", Title: "Gophers", Content: "A gopher is a burrowing rodent."},
		},
	})
	srv := httptest.NewServer(s)
	defer srv.Close()

	post := func(path, body string, out any) int {
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Authorization", "Bearer tvly-test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			panic(err)
		}
		return resp.StatusCode
	}

	var found faketavily.SearchResponse
	post("/search", `{"query":"Go language","include_answer":true,"max_results":3}`, &found)
	for _, r := range found.Results {
		fmt.Printf("%.2f %s\n", r.Score, r.URL)
	}
	fmt.Println("answer:", *found.Answer)

	var read faketavily.ExtractResponse
	post("/extract", `{"urls":["https://example.com/gophers","https://example.com/missing"],"format":"text"}`, &read)
	fmt.Printf("%q\n", read.Results[0].RawContent)
	fmt.Println("failed:", read.FailedResults[0].URL, read.FailedResults[0].Error)

	var refused faketavily.ErrorResponse
	fmt.Println(post("/search", `{}`, &refused), refused.Detail.Error)
	fmt.Println(len(s.Requests()), "requests recorded")
	// Output:
	// 0.75 https://go.dev/doc/
	// answer: Go is an open source programming language.
	// "Gophers\n\nA gopher is a burrowing rodent."
	// failed: https://example.com/missing Failed to fetch url
	// 400 Query is missing.
	// 3 requests recorded
}
