package agentconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/agentharness/harness/shared/approval"
)

// MCPServer is one entry of config.mcpServers: a remote MCP server (Streamable HTTP) whose tools
// the agent calls, each as <server>__<tool>.
type MCPServer struct {
	URL string `json:"url"`
	// BearerToken and Headers authenticate the calls; both are secrets, sealed at rest and
	// redacted in answers.
	BearerToken string            `json:"bearerToken,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	// AllowedTools are the server's tools the agent may call (by the server's names); absent:
	// all of them.
	AllowedTools []string `json:"allowedTools,omitempty"`
	// NeedsApproval is true or false for every tool of the server, or an object of policies
	// (as config.tools' needsApproval) by the server's tool name.
	NeedsApproval json.RawMessage `json:"needsApproval,omitempty"`
	// Async and Execution are the keys every tool shares; only same-invocation: the server
	// answers the call itself.
	Async     bool   `json:"async,omitempty"`
	Execution string `json:"execution,omitempty"`
	// TimeoutMs bounds one call (DefaultMCPTimeoutMs).
	TimeoutMs int `json:"timeoutMs,omitempty"`
}

// MCPServers is config.mcpServers, by server name.
type MCPServers map[string]*MCPServer

// Limits of config.mcpServers.
const (
	MaxMCPServers       = 10
	DefaultMCPTimeoutMs = 60_000
	MaxMCPTimeoutMs     = 15 * 60_000
	// MCPSeparator joins a server's name and its tool's name into the model-facing name.
	MCPSeparator = "__"
)

var mcpFields = []string{"url", "bearerToken", "headers", "allowedTools", "needsApproval", "async", "execution", "timeoutMs"}

// mcpNameRe is a server name: no "__", so a model-facing name splits one way.
var mcpNameRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,31}(_[A-Za-z0-9-]+)*$`)

// headerRe is an HTTP header name without '.', which would split the secret's path.
var headerRe = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+^_|~-]{1,64}$`)

// MCPToolName is the model-facing name of a server's tool.
func MCPToolName(server, tool string) string { return server + MCPSeparator + tool }

// Timeout is TimeoutMs with its default.
func (s *MCPServer) Timeout() int {
	if s.TimeoutMs == 0 {
		return DefaultMCPTimeoutMs
	}
	return s.TimeoutMs
}

// Allows reports whether the agent may call the server's tool.
func (s *MCPServer) Allows(tool string) bool {
	return len(s.AllowedTools) == 0 || slices.Contains(s.AllowedTools, tool)
}

// Approval is the approval policy of the server's tool; nil when its calls need none.
func (s *MCPServer) Approval(tool string) (*approval.Policy, error) {
	raw := s.NeedsApproval
	if len(raw) == 0 {
		return nil, nil
	}
	if byTool(raw) {
		var byTool map[string]json.RawMessage
		if err := json.Unmarshal(raw, &byTool); err != nil {
			return nil, err
		}
		if raw = byTool[tool]; len(raw) == 0 {
			return nil, nil
		}
	}
	return approval.Parse(raw)
}

// byTool reports whether needsApproval is an object of policies by tool name, not one policy.
func byTool(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// UnmarshalJSON decodes config.mcpServers strictly, its refusals a *FieldError at the exact
// field ("mcpServers.docs.timeoutMs"); Validate checks the servers further.
func (ms *MCPServers) UnmarshalJSON(raw []byte) error {
	entries, err := decodeEntries[MCPServer](raw, "mcpServers", "must be an object of MCP servers by name", "an MCP server field", mcpFields)
	if err == nil {
		*ms = entries
	}
	return err
}

// checkMCPServers checks config.mcpServers beyond their shape, and adds their secrets to v. No
// server is called: its tools are listed when a turn starts.
func checkMCPServers(cfg *Config, v *Validated) error {
	if len(cfg.MCPServers) > MaxMCPServers {
		return &FieldError{Field: "mcpServers", Problem: fmt.Sprintf("names %d servers, more than %d", len(cfg.MCPServers), MaxMCPServers)}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		at := "mcpServers." + name
		s := cfg.MCPServers[name]
		if s == nil {
			return &FieldError{Field: at, Problem: "must be an object"}
		}
		if !mcpNameRe.MatchString(name) {
			return &FieldError{Field: at, Problem: "must be a server name: a letter, then up to 31 letters, digits, - or single _ (its tools are named <server>__<tool>)"}
		}
		if other := toolWithPrefix(cfg, name+MCPSeparator); other != "" {
			return &FieldError{Field: at, Problem: fmt.Sprintf("the server's tools are named %s<tool>, and %s is another tool of the agent: rename one of them", name+MCPSeparator, other)}
		}
		if err := checkMCPServer(at, s); err != nil {
			return err
		}
		if s.BearerToken != "" {
			v.Secrets = append(v.Secrets, at+".bearerToken")
		}
		for h := range s.Headers {
			v.Secrets = append(v.Secrets, at+".headers."+h)
		}
	}
	return nil
}

// toolWithPrefix is a tool of the agent's other kinds whose name starts with prefix, or "".
func toolWithPrefix(cfg *Config, prefix string) string {
	var names []string
	for n := range cfg.Tools {
		names = append(names, n)
	}
	for n := range cfg.Prompts {
		names = append(names, n)
	}
	if cfg.Subagent != nil {
		for _, a := range cfg.Subagent.Agents {
			names = append(names, a.Name)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return n
		}
	}
	return ""
}

// checkMCPServer checks one server's own fields.
func checkMCPServer(at string, s *MCPServer) error {
	u, err := url.Parse(s.URL)
	switch {
	case s.URL == "":
		return &FieldError{Field: at + ".url", Problem: "is required: the server's Streamable HTTP endpoint"}
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "":
		return &FieldError{Field: at + ".url", Problem: "must be an absolute http or https URL, without user info or fragment"}
	case len(s.URL) > 2048:
		return &FieldError{Field: at + ".url", Problem: "must be at most 2048 characters"}
	case s.TimeoutMs < 0 || s.TimeoutMs > MaxMCPTimeoutMs:
		return &FieldError{Field: at + ".timeoutMs", Problem: fmt.Sprintf("must be between 1 and %d (0 or absent: %d)", MaxMCPTimeoutMs, DefaultMCPTimeoutMs)}
	case s.Execution != "" && !s.Async:
		return &FieldError{Field: at + ".execution", Problem: "applies only to async servers: set async: true as well"}
	case s.Execution != "" && s.Execution != SameInvocation:
		return &FieldError{Field: at + ".execution", Problem: fmt.Sprintf("must be %q: the MCP server answers the call itself, so no outside worker completes it", SameInvocation)}
	case len(s.Headers) > 20:
		return &FieldError{Field: at + ".headers", Problem: "must have at most 20 headers"}
	}
	for h, v := range s.Headers {
		if !headerRe.MatchString(h) {
			return &FieldError{Field: at + ".headers", Problem: fmt.Sprintf("%q is not a header name (letters, digits and !#$%%&'*+^_|~-, no '.')", h)}
		}
		if strings.EqualFold(h, "Authorization") && s.BearerToken != "" {
			return &FieldError{Field: at + ".headers." + h, Problem: "sets Authorization, and so does bearerToken: keep one"}
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return &FieldError{Field: at + ".headers." + h, Problem: "must not hold a line break or NUL"}
		}
	}
	if strings.ContainsAny(s.BearerToken, "\r\n\x00 ") {
		return &FieldError{Field: at + ".bearerToken", Problem: "must not hold whitespace or NUL"}
	}
	for i, t := range s.AllowedTools {
		if t == "" || len(t) > 128 {
			return &FieldError{Field: fmt.Sprintf("%s.allowedTools[%d]", at, i), Problem: "must be a tool name of the server (1 to 128 characters)"}
		}
	}
	return checkMCPApproval(at, s)
}

// checkMCPApproval checks needsApproval: a policy for every tool, or policies by tool name.
func checkMCPApproval(at string, s *MCPServer) error {
	raw := s.NeedsApproval
	if len(raw) == 0 {
		return nil
	}
	field := at + ".needsApproval"
	policies := map[string]json.RawMessage{"": raw}
	if byTool(raw) {
		policies = nil
		if err := json.Unmarshal(raw, &policies); err != nil {
			return &FieldError{Field: field, Problem: "must be true, false or an object of policies by the server's tool name"}
		}
	}
	for tool, p := range policies {
		f := field
		if tool != "" {
			f += "." + tool
		}
		if _, err := approval.Parse(p); err != nil {
			var pe *approval.FieldError
			if errors.As(err, &pe) {
				if pe.Field != "" {
					f += "." + pe.Field
				}
				return &FieldError{Field: f, Problem: pe.Problem}
			}
			return &FieldError{Field: f, Problem: err.Error()}
		}
	}
	return nil
}
