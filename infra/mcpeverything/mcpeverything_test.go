package mcpeverything_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentharness/harness/infra/mcpeverything"
	"github.com/agentharness/harness/infra/testenv"
)

// The server answers MCP on 127.0.0.1 with its tools, is not reachable on the machine's other
// addresses, and is gone after Stop, which is safe to call twice.
func TestStart(t *testing.T) {
	s, err := mcpeverything.Start(testenv.Node(t), testenv.Root(t), t.Output())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	u, err := url.Parse(s.URL)
	if err != nil || u.Hostname() != "127.0.0.1" || u.Path != "/mcp" {
		t.Fatalf("URL %q, want http://127.0.0.1:PORT/mcp", s.URL)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	var names []string
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("listing tools: %v", err)
		}
		names = append(names, tl.Name)
	}
	_ = cs.Close()
	for _, want := range []string{"echo", "get-sum", "trigger-long-running-operation"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v lack %q", names, want)
		}
	}

	for _, ip := range otherAddrs(t) {
		addr := net.JoinHostPort(ip.String(), u.Port())
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("the server answers on %s, want 127.0.0.1 only", addr)
		}
	}

	s.Stop()
	s.Stop()
	if _, err := (&http.Client{Timeout: time.Second}).Get(s.URL); err == nil {
		t.Errorf("%s still answers after Stop", s.URL)
	}
}

// otherAddrs are the machine's IPv4 addresses outside 127.0.0.0/8.
func otherAddrs(t *testing.T) []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP)
		}
	}
	if len(out) == 0 {
		t.Log("no non-loopback IPv4 address: the loopback-only check has nothing to dial")
	}
	return out
}

// A launcher that cannot start reports why instead of hanging.
func TestStartFails(t *testing.T) {
	if _, err := mcpeverything.Start(testenv.Node(t), t.TempDir(), nil); err == nil {
		t.Fatal("Start with no launcher under root succeeded")
	}
}
