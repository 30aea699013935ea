package mcptools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/tool/mcptools"
)

// An agent's MCP server's tools, named <server>__<tool>, called as the turn engine calls them.
func ExampleClient_Tools() {
	server := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "forecast", Description: "Tomorrow's weather in a city",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ City string }
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Sunny in " + args.City}}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer srv.Close()

	// httptest listens on loopback, which FromConfig's client refuses unless MCP_PRIVATE_ENDPOINTS=allow.
	client := mcptools.New(mcptools.Options{HTTP: &http.Client{}})
	tools, warnings := client.Tools(context.Background(), agentconfig.MCPServers{
		"weather": {URL: srv.URL, NeedsApproval: json.RawMessage(`true`)},
	})
	for _, t := range tools {
		fmt.Printf("%s: %s (needs approval: %v)\n", t.Name, t.Description, t.Approval != nil)
		out, err := t.Execute(context.Background(), json.RawMessage(`{"city":"Lisbon"}`))
		fmt.Println(out, err)
	}
	fmt.Println(len(warnings), "warnings")
	// Output:
	// weather__forecast: Tomorrow's weather in a city (needs approval: true)
	// Sunny in Lisbon <nil>
	// 0 warnings
}
