package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/mcpeverything"
	"github.com/agentharness/harness/shared/agentconfig"
)

// everythingServer is the name the seeded agents give the MCP reference server.
const everythingServer = "everything"

// localMCP runs the MCP reference server (server-everything, from infra/node) on a free port of
// 127.0.0.1 and points the seeded agents' "everything" server at it; MCP calls may reach
// loopback (MCP_PRIVATE_ENDPOINTS=allow) unless that variable is set, even empty. It returns
// what to print and how to stop the server.
func localMCP(node, root string, log io.Writer, seed *localrunner.SeedFile) (note string, stop func(), err error) {
	srv, err := mcpeverything.Start(node, root, log)
	if err != nil {
		return "", nil, fmt.Errorf("starting the MCP reference server: %w", err)
	}
	for i, a := range seed.Agents {
		cfg, err := agentconfig.Parse(a.Config)
		if err != nil || cfg.MCPServers[everythingServer] == nil {
			continue
		}
		if seed.Agents[i].Config, err = withServerURL(a.Config, everythingServer, srv.URL); err != nil {
			srv.Stop()
			return "", nil, fmt.Errorf("seed agent %s: %w", a.AgentID, err)
		}
	}
	if _, ok := os.LookupEnv("MCP_PRIVATE_ENDPOINTS"); !ok {
		os.Setenv("MCP_PRIVATE_ENDPOINTS", "allow")
	}
	return "the MCP reference server at " + srv.URL, srv.Stop, nil
}

// withServerURL is the agent config raw with its MCP server name's url set to url.
func withServerURL(raw []byte, name, url string) ([]byte, error) {
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, err
	}
	servers, _ := cfg["mcpServers"].(map[string]any)
	server, ok := servers[name].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("mcpServers.%s is not an object", name)
	}
	server["url"] = url
	return json.Marshal(cfg)
}
