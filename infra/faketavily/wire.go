package faketavily

import (
	"encoding/json"
	"errors"
)

// SearchRequest is the body of POST /search. Fields the fake does not model are ignored, as
// the real API ignores options it does not need.
type SearchRequest struct {
	Query string `json:"query"`
	// MaxResults is nil when the request leaves it out (Tavily's default, 5, applies).
	MaxResults     *int     `json:"max_results,omitempty"`
	SearchDepth    string   `json:"search_depth,omitempty"`
	Topic          string   `json:"topic,omitempty"`
	IncludeAnswer  bool     `json:"include_answer,omitempty"`
	IncludeDomains []string `json:"include_domains,omitempty"`
	ExcludeDomains []string `json:"exclude_domains,omitempty"`
	TimeRange      string   `json:"time_range,omitempty"`
}

// SearchResponse is the body of a successful POST /search.
type SearchResponse struct {
	Query string `json:"query"`
	// Answer is null unless the request set include_answer.
	Answer       *string        `json:"answer"`
	Results      []SearchResult `json:"results"`
	ResponseTime float64        `json:"response_time"`
}

// SearchResult is one page a search found.
type SearchResult struct {
	Title         string  `json:"title"`
	URL           string  `json:"url"`
	Content       string  `json:"content"`
	Score         float64 `json:"score"`
	PublishedDate string  `json:"published_date,omitempty"`
}

// ExtractRequest is the body of POST /extract.
type ExtractRequest struct {
	URLs         URLs   `json:"urls"`
	ExtractDepth string `json:"extract_depth,omitempty"`
	Format       string `json:"format,omitempty"`
}

// URLs is the extract request's urls: Tavily takes one URL as a string or several as a list.
type URLs []string

// UnmarshalJSON accepts a string or a list of strings; null leaves the list empty.
func (u *URLs) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*u = nil
		return nil
	}
	var one string
	if json.Unmarshal(b, &one) == nil {
		*u = URLs{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("urls must be a string or a list of strings")
	}
	*u = many
	return nil
}

// ExtractResponse is the body of a successful POST /extract.
type ExtractResponse struct {
	Results       []ExtractResult `json:"results"`
	FailedResults []FailedResult  `json:"failed_results"`
	ResponseTime  float64         `json:"response_time"`
}

// ExtractResult is the content of one page an extract read.
type ExtractResult struct {
	URL        string `json:"url"`
	RawContent string `json:"raw_content"`
}

// FailedResult is a URL an extract could not read, and why.
type FailedResult struct {
	URL   string `json:"url"`
	Error string `json:"error"`
}

// ErrorResponse is the body of every failed request: {"detail":{"error":"..."}}.
type ErrorResponse struct {
	Detail struct {
		Error string `json:"error"`
	} `json:"detail"`
}
