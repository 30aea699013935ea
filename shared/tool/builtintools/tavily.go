package builtintools

// tavilySearch and tavilyExtract: web search and page extraction through Tavily's REST API
// (POST {base}/search and POST {base}/extract, Authorization: Bearer <key>), called directly
// with net/http. The account's options become each request's defaults; the model supplies the
// query (and may narrow its topic or time range) or the urls. The key comes from the account's
// apiKey, else the service-wide TAVILY_API_KEY. The base URL is https://api.tavily.com unless
// the operator sets TAVILY_BASE_URL for the whole service (tests, a proxy): it is never an
// account option, so an account cannot point the harness at hosts of its choosing.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/tool"
)

const (
	tavilyDefaultBaseURL = "https://api.tavily.com"
	// tavilyTimeout bounds one call inside the turn's own deadline.
	tavilyTimeout = 30 * time.Second
	// tavilyMaxResponse caps the body read; 20 extracted pages fit well within it.
	tavilyMaxResponse = 32 << 20
)

var tavilyAPIKey = Variable{Name: "TAVILY_API_KEY", Option: "apiKey", Type: Secret, Required: true, Description: "Tavily API key"}

var tavilySearchSpec = Spec{
	New: tavilySearch,
	Options: json.RawMessage(`{"type":"object","properties":{
		"apiKey":{"type":"string","minLength":1},
		"maxResults":{"type":"integer","minimum":1,"maximum":20},
		"searchDepth":{"type":"string","enum":["basic","advanced"]},
		"topic":{"type":"string","enum":["general","news","finance"]},
		"includeAnswer":{"type":"boolean"},
		"includeDomains":{"type":"array","items":{"type":"string","minLength":1}},
		"excludeDomains":{"type":"array","items":{"type":"string","minLength":1}},
		"timeRange":{"type":"string","enum":["day","week","month","year"]}
	},"additionalProperties":false}`),
	Variables: []Variable{tavilyAPIKey},
}

var tavilyExtractSpec = Spec{
	New: tavilyExtract,
	Options: json.RawMessage(`{"type":"object","properties":{
		"apiKey":{"type":"string","minLength":1},
		"extractDepth":{"type":"string","enum":["basic","advanced"]},
		"format":{"type":"string","enum":["markdown","text"]}
	},"additionalProperties":false}`),
	Variables: []Variable{tavilyAPIKey},
}

// tavilySearchRequest is the body of POST /search; omitted fields take Tavily's defaults.
type tavilySearchRequest struct {
	Query          string   `json:"query"`
	MaxResults     int      `json:"max_results,omitempty"`
	SearchDepth    string   `json:"search_depth,omitempty"`
	Topic          string   `json:"topic,omitempty"`
	IncludeAnswer  bool     `json:"include_answer,omitempty"`
	IncludeDomains []string `json:"include_domains,omitempty"`
	ExcludeDomains []string `json:"exclude_domains,omitempty"`
	TimeRange      string   `json:"time_range,omitempty"`
}

// tavilySearchResponse is the documented part of Tavily's search response, and the result the
// model sees.
type tavilySearchResponse struct {
	Query        string               `json:"query"`
	Answer       string               `json:"answer,omitempty"`
	Results      []tavilySearchResult `json:"results"`
	ResponseTime float64              `json:"response_time"`
}

type tavilySearchResult struct {
	Title         string  `json:"title"`
	URL           string  `json:"url"`
	Content       string  `json:"content"`
	Score         float64 `json:"score"`
	RawContent    string  `json:"raw_content,omitempty"`
	PublishedDate string  `json:"published_date,omitempty"`
}

// tavilyExtractRequest is the body of POST /extract.
type tavilyExtractRequest struct {
	URLs         []string `json:"urls"`
	ExtractDepth string   `json:"extract_depth,omitempty"`
	Format       string   `json:"format,omitempty"`
}

// tavilyExtractResponse is the documented part of Tavily's extract response, and the result
// the model sees.
type tavilyExtractResponse struct {
	Results       []tavilyExtractResult `json:"results"`
	FailedResults []tavilyFailedResult  `json:"failed_results"`
	ResponseTime  float64               `json:"response_time"`
}

type tavilyExtractResult struct {
	URL        string `json:"url"`
	RawContent string `json:"raw_content"`
}

type tavilyFailedResult struct {
	URL   string `json:"url"`
	Error string `json:"error"`
}

func tavilySearch(c Context) ([]tool.Tool, error) {
	var opts struct {
		MaxResults     int      `json:"maxResults"`
		SearchDepth    string   `json:"searchDepth"`
		Topic          string   `json:"topic"`
		IncludeAnswer  bool     `json:"includeAnswer"`
		IncludeDomains []string `json:"includeDomains"`
		ExcludeDomains []string `json:"excludeDomains"`
		TimeRange      string   `json:"timeRange"`
	}
	if err := c.Options.Decode(&opts); err != nil {
		return nil, err
	}
	client, err := newTavilyClient(c)
	if err != nil {
		return nil, err
	}
	return []tool.Tool{{
		Name:        "tavilySearch",
		Description: "Searches the web with Tavily. Returns the most relevant pages (title, url, a content snippet, a relevance score from 0 to 1), and a short answer when the account enables one. Use it for current events and facts you are unsure of; cite the urls you rely on.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"query":{"type":"string","minLength":1,"maxLength":400,"description":"What to search for, phrased as a search query."},
			"topic":{"type":"string","enum":["general","news","finance"],"description":"The kind of search: news for recent events, finance for markets; omit for the configured default."},
			"time_range":{"type":"string","enum":["day","week","month","year"],"description":"Only pages published within this span before now; omit for the configured default."}
		},"required":["query"],"additionalProperties":false}`),
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			var args struct {
				Query     string `json:"query"`
				Topic     string `json:"topic"`
				TimeRange string `json:"time_range"`
			}
			if err := json.Unmarshal(input, &args); err != nil {
				return nil, err
			}
			req := tavilySearchRequest{
				Query:          args.Query,
				MaxResults:     opts.MaxResults,
				SearchDepth:    opts.SearchDepth,
				Topic:          cmp.Or(args.Topic, opts.Topic),
				IncludeAnswer:  opts.IncludeAnswer,
				IncludeDomains: opts.IncludeDomains,
				ExcludeDomains: opts.ExcludeDomains,
				TimeRange:      cmp.Or(args.TimeRange, opts.TimeRange),
			}
			var resp tavilySearchResponse
			if err := client.post(ctx, "search", req, &resp); err != nil {
				return nil, err
			}
			if resp.Results == nil {
				resp.Results = []tavilySearchResult{}
			}
			return resp, nil
		},
	}}, nil
}

func tavilyExtract(c Context) ([]tool.Tool, error) {
	var opts struct {
		ExtractDepth string `json:"extractDepth"`
		Format       string `json:"format"`
	}
	if err := c.Options.Decode(&opts); err != nil {
		return nil, err
	}
	client, err := newTavilyClient(c)
	if err != nil {
		return nil, err
	}
	return []tool.Tool{{
		Name:        "tavilyExtract",
		Description: "Fetches web pages with Tavily and returns each page's main content (raw_content). Pages that could not be fetched are listed in failed_results with the reason.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"urls":{"type":"array","minItems":1,"maxItems":20,"items":{"type":"string","format":"uri","pattern":"^https?://"},"description":"The http(s) URLs of the pages to read."}
		},"required":["urls"],"additionalProperties":false}`),
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			var args struct {
				URLs []string `json:"urls"`
			}
			if err := json.Unmarshal(input, &args); err != nil {
				return nil, err
			}
			req := tavilyExtractRequest{URLs: args.URLs, ExtractDepth: opts.ExtractDepth, Format: opts.Format}
			var resp tavilyExtractResponse
			if err := client.post(ctx, "extract", req, &resp); err != nil {
				return nil, err
			}
			if resp.Results == nil {
				resp.Results = []tavilyExtractResult{}
			}
			if resp.FailedResults == nil {
				resp.FailedResults = []tavilyFailedResult{}
			}
			return resp, nil
		},
	}}, nil
}

// tavilyClient posts to one Tavily deployment with one key.
type tavilyClient struct {
	base string
	key  string
}

func newTavilyClient(c Context) (tavilyClient, error) {
	base := tavilyDefaultBaseURL
	if c.Getenv != nil {
		if v := c.Getenv("TAVILY_BASE_URL"); v != "" {
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return tavilyClient{}, fmt.Errorf("the harness environment variable TAVILY_BASE_URL %q is not an http(s) URL", v)
			}
			base = strings.TrimSuffix(v, "/")
		}
	}
	return tavilyClient{base: base, key: c.Vars[tavilyAPIKey.Name]}, nil
}

// post sends body to {base}/{endpoint} and decodes a 2xx response into out. A failure names
// the endpoint and Tavily's status and message, never the key.
func (t tavilyClient) post(ctx context.Context, endpoint string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, tavilyTimeout)
	defer cancel()
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding the tavily %s request: %w", endpoint, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/"+endpoint, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("tavily %s: %w", endpoint, err)
	}
	req.Header.Set("Authorization", "Bearer "+t.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("tavily %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, tavilyMaxResponse))
	if err != nil {
		return fmt.Errorf("tavily %s: reading the response: %w", endpoint, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := tavilyErrorMessage(data)
		if t.key != "" {
			msg = strings.ReplaceAll(msg, t.key, "[redacted]")
		}
		if msg == "" {
			return fmt.Errorf("tavily %s: %s", endpoint, resp.Status)
		}
		return fmt.Errorf("tavily %s: %s: %s", endpoint, resp.Status, msg)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("tavily %s: decoding the response: %w", endpoint, err)
	}
	return nil
}

// tavilyErrorMessage reads Tavily's error body, {"detail":{"error":"..."}}; a plain string
// detail is taken as is.
func tavilyErrorMessage(body []byte) string {
	var e struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Detail) == 0 {
		return ""
	}
	var obj struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(e.Detail, &obj) == nil && obj.Error != "" {
		return obj.Error
	}
	var s string
	if json.Unmarshal(e.Detail, &s) == nil {
		return s
	}
	return ""
}
