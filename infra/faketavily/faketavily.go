// Package faketavily is a local fake of Tavily's REST API (POST /search, POST /extract) for
// tests and local runs. It speaks the documented wire shapes: a bearer API key, JSON request
// and response bodies, and {"detail":{"error":"..."}} for failures (401 for a bad key, 400 for
// a bad request). Search ranks a fixed set of documents by case-insensitive term matching;
// extract returns the content of known URLs and lists the others as failed. The server records
// the requests it received.
package faketavily

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
)

// Document is a page the fake can find and extract.
type Document struct {
	URL     string
	Title   string
	Content string
	// PublishedDate is returned as published_date when set.
	PublishedDate string
}

// Options configure a Server; the zero value accepts any key and knows no documents.
type Options struct {
	// APIKey is the key accepted in "Authorization: Bearer <key>"; empty accepts any non-empty
	// key. A request without a key is always refused.
	APIKey string
	// Documents are what search finds and extract reads, in tie-breaking order.
	Documents []Document
}

// Request is one request the server received, valid or not.
type Request struct {
	Method string
	Path   string
	// APIKey is the bearer token the request carried, empty if it had none.
	APIKey string
	// Body is the raw request body.
	Body json.RawMessage
}

// Server is an http.Handler serving POST /search and POST /extract.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu       sync.Mutex
	requests []Request
}

// Limits and defaults of the real API.
const (
	defaultMaxResults = 5
	maxMaxResults     = 20
	maxExtractURLs    = 20
	// responseTime is fixed so that whole responses can be compared in tests.
	responseTime = 0.01
	maxBody      = 1 << 20
)

// New returns a Server; opts may be nil.
func New(opts *Options) *Server {
	s := &Server{mux: http.NewServeMux()}
	if opts != nil {
		s.opts = *opts
		s.opts.Documents = slices.Clone(opts.Documents)
	}
	s.mux.HandleFunc("POST /search", s.search)
	s.mux.HandleFunc("POST /extract", s.extract)
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reading the body: %v", err))
		return
	}
	key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, APIKey: key, Body: body})
	s.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mux.ServeHTTP(w, r)
}

// Requests returns a copy of the requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// authorized answers 401 unless the request carries the accepted key.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || key == "" || (s.opts.APIKey != "" && key != s.opts.APIKey) {
		writeError(w, http.StatusUnauthorized, "Unauthorized: missing or invalid API key.")
		return false
	}
	return true
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var req SearchRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid request body: %v", err))
		return
	}
	n := defaultMaxResults
	if req.MaxResults != nil {
		n = *req.MaxResults
	}
	switch {
	case strings.TrimSpace(req.Query) == "":
		writeError(w, http.StatusBadRequest, "Query is missing.")
		return
	case n < 0 || n > maxMaxResults:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("max_results must be between 0 and %d.", maxMaxResults))
		return
	case !oneOf(req.SearchDepth, "", "basic", "advanced", "fast", "ultra-fast"):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid search_depth %q.", req.SearchDepth))
		return
	case !oneOf(req.Topic, "", "general", "news", "finance"):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid topic %q.", req.Topic))
		return
	case !oneOf(req.TimeRange, "", "day", "week", "month", "year", "d", "w", "m", "y"):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid time_range %q.", req.TimeRange))
		return
	}

	results := s.rank(req)
	if len(results) > n {
		results = results[:n]
	}
	resp := SearchResponse{Query: req.Query, Results: results, ResponseTime: responseTime}
	if req.IncludeAnswer {
		answer := ""
		if len(results) > 0 {
			answer = firstSentence(results[0].Content)
		}
		resp.Answer = &answer
	}
	writeJSON(w, http.StatusOK, resp)
}

// rank scores every document the domain filters allow: each query term adds one point when it
// occurs in the content and one when it occurs in the title, out of two per term. Documents
// that match no term are left out; ties keep the documents' order.
func (s *Server) rank(req SearchRequest) []SearchResult {
	terms := uniqueTerms(req.Query)
	results := []SearchResult{}
	for _, d := range s.opts.Documents {
		if !domainAllowed(d.URL, req.IncludeDomains, req.ExcludeDomains) {
			continue
		}
		title, content := termSet(d.Title), termSet(d.Content)
		points := 0
		for _, t := range terms {
			if content[t] {
				points++
			}
			if title[t] {
				points++
			}
		}
		if points == 0 {
			continue
		}
		score := math.Round(float64(points)/float64(2*len(terms))*1e4) / 1e4
		results = append(results, SearchResult{Title: d.Title, URL: d.URL, Content: d.Content, Score: score, PublishedDate: d.PublishedDate})
	}
	sort.SliceStable(results, func(i, j int) bool { return results[i].Score > results[j].Score })
	return results
}

func (s *Server) extract(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var req ExtractRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid request body: %v", err))
		return
	}
	switch {
	case len(req.URLs) == 0 || slices.Contains(req.URLs, ""):
		writeError(w, http.StatusBadRequest, "No URLs provided.")
		return
	case len(req.URLs) > maxExtractURLs:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("At most %d URLs can be extracted at once.", maxExtractURLs))
		return
	case !oneOf(req.ExtractDepth, "", "basic", "advanced"):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid extract_depth %q.", req.ExtractDepth))
		return
	case !oneOf(req.Format, "", "markdown", "text"):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid format %q.", req.Format))
		return
	}

	resp := ExtractResponse{Results: []ExtractResult{}, FailedResults: []FailedResult{}, ResponseTime: responseTime}
	for _, u := range req.URLs {
		i := slices.IndexFunc(s.opts.Documents, func(d Document) bool { return d.URL == u })
		if i < 0 {
			resp.FailedResults = append(resp.FailedResults, FailedResult{URL: u, Error: "Failed to fetch url"})
			continue
		}
		resp.Results = append(resp.Results, ExtractResult{URL: u, RawContent: render(s.opts.Documents[i], req.Format)})
	}
	writeJSON(w, http.StatusOK, resp)
}

// render is a document's page in the requested format: markdown (the default) puts the title
// in a heading, text leaves it plain.
func render(d Document, format string) string {
	if format == "text" {
		return d.Title + "\n\n" + d.Content
	}
	return "# " + d.Title + "\n\n" + d.Content
}

// domainAllowed applies include_domains and exclude_domains to the URL's host; a domain also
// covers its subdomains.
func domainAllowed(rawURL string, include, exclude []string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	within := func(domains []string) bool {
		return slices.ContainsFunc(domains, func(d string) bool {
			d = strings.ToLower(d)
			return host == d || strings.HasSuffix(host, "."+d)
		})
	}
	return (len(include) == 0 || within(include)) && !within(exclude)
}

// uniqueTerms splits s into lower-case words, first occurrences only.
func uniqueTerms(s string) []string {
	var out []string
	for _, t := range words(s) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func termSet(s string) map[string]bool {
	set := map[string]bool{}
	for _, t := range words(s) {
		set[t] = true
	}
	return set
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// firstSentence is s up to and including its first full stop, or all of s.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

func oneOf(v string, allowed ...string) bool { return slices.Contains(allowed, v) }

func writeError(w http.ResponseWriter, status int, msg string) {
	var e ErrorResponse
	e.Detail.Error = msg
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
