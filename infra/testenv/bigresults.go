package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BigText is at least n bytes of text with what a JSON encoding escapes (quotes, backslashes,
// newlines, "<" and "&") and characters of two to four bytes, so a result cut to fit a stored
// message must count its escapes and cut between characters. It is the same for the same n.
func BigText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %d: \"quoted\" \\ <tag> & é € 😀\n", i)
	}
	return b.String()
}

// BigMCPServer serves over Streamable HTTP on loopback an MCP server whose tool "dump" returns
// BigText(bytes) as one text block, and returns its endpoint. It stops when the test ends.
func BigMCPServer(t testing.TB) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "dump", Description: "Returns a text of the given size.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"bytes":{"type":"integer"}},"required":["bytes"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Bytes int }
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: BigText(args.Bytes)}}}, nil
		})
	s := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(s.Close)
	return s.URL
}
