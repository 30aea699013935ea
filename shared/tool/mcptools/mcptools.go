// Package mcptools offers the tools of an agent's remote MCP servers (config.mcpServers) as
// model-facing tools. When a turn starts, each server's tool list is fetched over Streamable
// HTTP (or the legacy HTTP+SSE transport, for a server that has only that) and reused for a
// while; its tools become tool.Tools named <server>__<tool> whose calls go to the server. A
// server that cannot be reached or answers badly is left out of the turn with a Warning: it
// never fails the turn.
//
// Only the server's URL is contacted: the configured credentials go with every request, so
// redirects and requests to any other origin are refused.
package mcptools

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/wire/egress"
	"github.com/agentharness/harness/shared/wire/jsonschema"
)

const (
	// DefaultTTL is how long a server's tool list is reused when Options.TTL is zero.
	DefaultTTL = 60 * time.Second
	// PrivateVar is the variable with which the operator lets agents call MCP servers on
	// private addresses too ("allow").
	PrivateVar = "MCP_PRIVATE_ENDPOINTS"
	// maxListTime bounds listing a server's tools (within its timeoutMs), so one slow server
	// holds back the start of a turn that long at most.
	maxListTime = 30 * time.Second
	// maxPages bounds a tool list's pages, so a server cannot page forever.
	maxPages = 100
	// maxResponse caps one HTTP answer of a server (a call's whole SSE stream included).
	maxResponse = 32 << 20
)

// toolNameRe is a model-facing tool name, as every provider accepts it.
var toolNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Options configures a Client; the zero value works.
type Options struct {
	// HTTP is the client every MCP request goes through (its Transport, Timeout and Jar; it
	// never follows a redirect); nil: http.DefaultClient.
	HTTP *http.Client
	// TTL is how long a server's tool list is reused (default DefaultTTL).
	TTL time.Duration
	// Now is the clock of the TTL; nil: time.Now.
	Now func() time.Time
	// Logger receives the SDK's notices; nil discards them.
	Logger *slog.Logger
}

// Client lists MCP servers' tools and calls them. It is safe for concurrent use; make one per
// process, so the tool lists it keeps outlive a turn.
type Client struct {
	http   *http.Client
	ttl    time.Duration
	now    func() time.Time
	logger *slog.Logger
	mcp    *mcp.Client

	// calls are the calls waiting for progress, by progress token.
	calls     sync.Map // string → *progressCall
	nextToken atomic.Uint64

	mu    sync.Mutex
	lists map[string]toolList // by listKey
}

// toolList is a server's tool list as it was fetched.
type toolList struct {
	at    time.Time
	tools []remoteTool
}

// remoteTool is one tool as the server lists it.
type remoteTool struct {
	name        string
	description string
	schema      json.RawMessage
	// schemaErr says why schema does not compile; nil when it does.
	schemaErr error
}

// New returns a Client.
func New(opts Options) *Client {
	c := &Client{
		http:   cmp.Or(opts.HTTP, http.DefaultClient),
		ttl:    cmp.Or(opts.TTL, DefaultTTL),
		now:    opts.Now,
		logger: opts.Logger,
		lists:  map[string]toolList{},
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	c.mcp = mcp.NewClient(&mcp.Implementation{Name: "agentharness", Version: "1.0.0"}, &mcp.ClientOptions{
		Logger: c.logger,
		// No roots, sampling or elicitation: the harness answers no requests of a server.
		Capabilities:                &mcp.ClientCapabilities{},
		ProgressNotificationHandler: c.onProgress,
	})
	return c
}

// FromConfig returns a Client whose requests dial public addresses only (egress.Transport()),
// unless private, the operator's PrivateVar, is "allow": then they go through
// http.DefaultTransport. Either transport is the process's own, so connections are reused from
// turn to turn.
func FromConfig(private string) (*Client, error) {
	var rt http.RoundTripper = egress.Transport()
	switch private {
	case "":
	case "allow":
		rt = http.DefaultTransport
	default:
		return nil, fmt.Errorf("%s is %q: it must be \"allow\" or unset", PrivateVar, private)
	}
	return New(Options{HTTP: &http.Client{Transport: rt}}), nil
}

// Warning says why a server's tools, or one of them, are not offered this turn.
type Warning struct {
	Server string
	Err    error
}

func (w Warning) Error() string { return "MCP server " + w.Server + ": " + w.Err.Error() }
func (w Warning) Unwrap() error { return w.Err }

// Tools lists every server's tools (the servers in parallel; a list younger than the TTL is
// reused, keyed by the server's URL and a hash of its credentials) and returns them as
// model-facing tools, sorted by name. A server that cannot be reached or listed, or answers an
// invalid list, gives a Warning and no tools; a tool that cannot be offered (its name, its
// schema, its approval policy) gives a Warning and the server's other tools stay.
func (c *Client) Tools(ctx context.Context, servers agentconfig.MCPServers) ([]tool.Tool, []Warning) {
	names := slices.Sorted(maps.Keys(servers))
	lists := make([][]remoteTool, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		if servers[name] == nil {
			errs[i] = errors.New("has no configuration")
			continue
		}
		wg.Go(func() { lists[i], errs[i] = c.list(ctx, servers[name]) })
	}
	wg.Wait()

	var tools []tool.Tool
	var warnings []Warning
	for i, name := range names {
		if errs[i] != nil {
			warnings = append(warnings, Warning{Server: name, Err: errs[i]})
			continue
		}
		ts, ws := c.offer(name, servers[name], lists[i])
		tools = append(tools, ts...)
		warnings = append(warnings, ws...)
	}
	slices.SortFunc(tools, func(a, b tool.Tool) int { return strings.Compare(a.Name, b.Name) })
	return tools, warnings
}

// list returns the server's tools, from the cache while the list is younger than the TTL.
// Failures are not kept: the next turn asks again.
func (c *Client) list(ctx context.Context, s *agentconfig.MCPServer) ([]remoteTool, error) {
	key := listKey(s)
	c.mu.Lock()
	l, ok := c.lists[key]
	c.mu.Unlock()
	if ok && c.now().Sub(l.at) < c.ttl {
		return l.tools, nil
	}

	limit := min(time.Duration(s.Timeout())*time.Millisecond, maxListTime)
	listCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cs, ln, err := c.connect(listCtx, s)
	if err != nil {
		return nil, explain(ctx, listCtx, ln, "connecting", limit, err)
	}
	tools, err := listAll(listCtx, cs)
	closeSession(cs, listCtx.Err() != nil)
	if err != nil {
		return nil, explain(ctx, listCtx, ln, "listing its tools", limit, err)
	}

	at := c.now()
	c.mu.Lock()
	for k, old := range c.lists {
		if at.Sub(old.at) >= c.ttl {
			delete(c.lists, k)
		}
	}
	c.lists[key] = toolList{at: at, tools: tools}
	c.mu.Unlock()
	return tools, nil
}

// listKey identifies a server's tool list: its URL and a hash of its credentials, since a
// server may list different tools to different callers.
func listKey(s *agentconfig.MCPServer) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(s.BearerToken), s.BearerToken)
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(s.Headers[k]), s.Headers[k])
	}
	return s.URL + " " + hex.EncodeToString(h.Sum(nil))
}

// listAll pages through the server's tool list.
func listAll(ctx context.Context, cs *mcp.ClientSession) ([]remoteTool, error) {
	var out []remoteTool
	seen := map[string]bool{}
	cursor := ""
	for range maxPages {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, t := range res.Tools {
			out = append(out, remote(t))
		}
		if res.NextCursor == "" {
			return out, nil
		}
		if seen[res.NextCursor] {
			return nil, fmt.Errorf("its tool list comes back to page %q", res.NextCursor)
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
	return nil, fmt.Errorf("its tool list goes on past %d pages", maxPages)
}

// remote keeps what the harness uses of a listed tool, and checks its schema once per list.
func remote(t *mcp.Tool) remoteTool {
	r := remoteTool{name: t.Name, description: t.Description}
	if r.description == "" {
		r.description = t.Title
	}
	if r.description == "" && t.Annotations != nil {
		r.description = t.Annotations.Title
	}
	r.schema, r.schemaErr = json.Marshal(t.InputSchema)
	if r.schemaErr == nil {
		_, r.schemaErr = jsonschema.Compile(r.schema)
	}
	return r
}

// offer turns a server's listed tools into the agent's tools, as its config allows them.
func (c *Client) offer(server string, s *agentconfig.MCPServer, listed []remoteTool) ([]tool.Tool, []Warning) {
	var tools []tool.Tool
	var warnings []Warning
	warn := func(format string, args ...any) {
		warnings = append(warnings, Warning{Server: server, Err: fmt.Errorf(format, args...)})
	}
	cfg := *s
	offered := map[string]bool{}
	for _, r := range listed {
		if !s.Allows(r.name) {
			continue
		}
		name := agentconfig.MCPToolName(server, r.name)
		switch {
		case !toolNameRe.MatchString(name):
			warn("tool %q is left out: as %q its name is not 1 to 64 letters, digits, _ or -", r.name, name)
			continue
		case offered[name]:
			warn("tool %q is listed twice: only the first is offered", r.name)
			continue
		case r.schemaErr != nil:
			warn("tool %q is left out: its inputSchema is refused: %w", r.name, r.schemaErr)
			continue
		}
		policy, err := s.Approval(r.name)
		if err != nil {
			warn("tool %q is left out: its needsApproval: %w", r.name, err)
			continue
		}
		offered[name] = true
		t := tool.Tool{
			Name:        name,
			Description: r.description,
			InputSchema: r.schema,
			Approval:    policy,
			Execute:     c.execute(server, &cfg, r.name),
		}
		if s.Async {
			t.Async = asynctools.SameInvocation
		}
		tools = append(tools, t)
	}
	for _, name := range s.AllowedTools {
		if !slices.ContainsFunc(listed, func(r remoteTool) bool { return r.name == name }) {
			warn("allowedTools names %q, which the server does not list", name)
		}
	}
	return tools, warnings
}

// execute calls the server's tool: a session of its own per call, bounded by the server's
// timeoutMs.
func (c *Client) execute(server string, s *agentconfig.MCPServer, name string) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, input json.RawMessage) (any, error) {
		limit := time.Duration(s.Timeout()) * time.Millisecond
		callCtx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		cs, ln, err := c.connect(callCtx, s)
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: %w", server, explain(ctx, callCtx, ln, "connecting", limit, err))
		}
		params := &mcp.CallToolParams{Name: name, Arguments: input}
		if fn := progressFrom(ctx); fn != nil {
			token := strconv.FormatUint(c.nextToken.Add(1), 10)
			c.calls.Store(token, &progressCall{session: cs, fn: fn})
			defer c.calls.Delete(token)
			params.SetProgressToken(token)
		}
		res, err := cs.CallTool(callCtx, params)
		closeSession(cs, callCtx.Err() != nil)
		if err != nil {
			return nil, callError(ctx, callCtx, ln, server, limit, err)
		}
		return result(res)
	}
}

// localCodes are the codes of the SDK's own JSON-RPC errors (client closing, server closing,
// rejected by the transport): failures of the connection, not answers of the server.
var localCodes = []int64{-32003, -32004, -32005}

// callError says why a call has no result: the turn's own context ended, the server took too
// long, refused the call, or the connection broke.
func callError(parent, ctx context.Context, ln *link, server string, limit time.Duration, err error) error {
	var wire *jsonrpc.Error
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("MCP server %s: calling: %w", server, parent.Err())
	case ctx.Err() != nil:
		return fmt.Errorf("MCP server %s did not answer within %d ms", server, limit.Milliseconds())
	case ln.refusal() != nil:
		return fmt.Errorf("MCP server %s: %w", server, ln.refusal())
	case errors.As(err, &wire) && !slices.Contains(localCodes, wire.Code):
		return fmt.Errorf("MCP server %s refused the call: %s", server, wire.Message)
	}
	return fmt.Errorf("the connection to MCP server %s dropped before it answered: %v", server, err)
}

// explain says why a step (connecting, listing) with the server failed, in terms of what the
// SDK's error does not say: a request the harness refused, or the server's time running out.
func explain(parent, ctx context.Context, ln *link, step string, limit time.Duration, err error) error {
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("%s: %w", step, parent.Err())
	case ctx.Err() != nil:
		return fmt.Errorf("%s: the server did not answer within %d ms", step, limit.Milliseconds())
	case ln != nil && ln.refusal() != nil:
		return fmt.Errorf("%s: %w", step, ln.refusal())
	}
	return fmt.Errorf("%s: %w", step, err)
}

// closeSession ends a session; after a timeout without waiting, since a server that did not
// answer may not answer the session's DELETE either (the SDK bounds it at five seconds).
func closeSession(cs *mcp.ClientSession, timedOut bool) {
	if timedOut {
		go cs.Close()
		return
	}
	_ = cs.Close()
}

// connect opens a session with the server over Streamable HTTP or, when the server answers
// that transport's first POST with 404 or 405 (a server of the 2024-11-05 protocol), over
// HTTP+SSE. The link returned is the one of the session, or of the last attempt.
func (c *Client) connect(ctx context.Context, s *agentconfig.MCPServer) (*mcp.ClientSession, *link, error) {
	ln, err := c.newLink(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	cs, err := c.mcp.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   s.URL,
		HTTPClient: ln.client,
		// Progress and results come on each call's own stream; nothing else is listened to.
		DisableStandaloneSSE: true,
	}, nil)
	if err == nil || !ln.isLegacy() || ctx.Err() != nil {
		return cs, ln, err
	}
	status := ln.legacyStatus()
	ln, _ = c.newLink(ctx, s)
	cs, sseErr := c.mcp.Connect(ctx, &mcp.SSEClientTransport{Endpoint: s.URL, HTTPClient: ln.client}, nil)
	if sseErr != nil {
		return nil, ln, fmt.Errorf("%w (it answered Streamable HTTP with %d, and HTTP+SSE failed too: %w)", err, status, sseErr)
	}
	return cs, ln, nil
}

// link carries one session's HTTP requests: it adds the server's credentials, keeps every
// request on the server's origin, and remembers what the SDK's errors do not tell.
type link struct {
	client *http.Client
	base   http.RoundTripper
	origin string
	header http.Header

	mu      sync.Mutex
	refused error // the first request refused, and why
	legacy  int   // the 404 or 405 a POST was answered with; 0 for none
}

func (c *Client) newLink(ctx context.Context, s *agentconfig.MCPServer) (*link, error) {
	u, err := url.Parse(s.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("url %q is not an absolute URL", s.URL)
	}
	ln := &link{base: cmp.Or(c.http.Transport, http.DefaultTransport), origin: origin(u), header: http.Header{}}
	for k, v := range s.Headers {
		ln.header.Set(k, v)
	}
	if s.BearerToken != "" {
		ln.header.Set("Authorization", "Bearer "+s.BearerToken)
	}
	if h, ok := ctx.Value(callHeaderKey{}).(callHeader); ok && h.value != "" {
		ln.header.Set(h.name, h.value) // after the config's headers, which cannot stand in for it
	}
	ln.client = &http.Client{Transport: ln, CheckRedirect: ln.checkRedirect, Jar: c.http.Jar, Timeout: c.http.Timeout}
	return ln, nil
}

// origin is u's scheme, host and port, the port written out even where it is the scheme's
// default, so http://host and http://host:80 are one origin.
func origin(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// RoundTrip sends req with the server's credentials, unless it leaves the server's origin (a
// legacy server names the URL to post to).
func (ln *link) RoundTrip(req *http.Request) (*http.Response, error) {
	if o := origin(req.URL); o != ln.origin {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, ln.refuse(fmt.Errorf("the server sent the harness to %s, outside its own origin %s", o, ln.origin))
	}
	req = req.Clone(req.Context())
	for k, v := range ln.header {
		// The protocol's own headers (Accept, Mcp-Session-Id...) stay as the SDK set them.
		if _, set := req.Header[k]; !set {
			req.Header[k] = v
		}
	}
	res, err := ln.base.RoundTrip(req)
	if err != nil {
		var blocked *egress.BlockedError
		if errors.As(err, &blocked) {
			ln.refuse(&privateError{host: req.URL.Hostname(), err: blocked})
		}
		return nil, err
	}
	if req.Method == http.MethodPost && (res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed) {
		ln.mu.Lock()
		ln.legacy = res.StatusCode
		ln.mu.Unlock()
	}
	res.Body = &cappedBody{ReadCloser: res.Body, left: maxResponse, ln: ln}
	return res, nil
}

func (ln *link) checkRedirect(req *http.Request, _ []*http.Request) error {
	return ln.refuse(fmt.Errorf("the server redirected to %s, and the harness follows no redirects of MCP servers", req.URL.Redacted()))
}

// refuse records the first refusal and returns err.
func (ln *link) refuse(err error) error {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.refused == nil {
		ln.refused = err
	}
	return err
}

func (ln *link) refusal() error {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return ln.refused
}

func (ln *link) isLegacy() bool { return ln.legacyStatus() != 0 }

func (ln *link) legacyStatus() int {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return ln.legacy
}

// cappedBody fails a server's answer past maxResponse bytes.
type cappedBody struct {
	io.ReadCloser
	left int64
	ln   *link
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, b.ln.refuse(fmt.Errorf("the server's answer is larger than %d MiB", maxResponse>>20))
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// privateError is a connection egress refused: the server's address is not public.
type privateError struct {
	host string
	err  *egress.BlockedError
}

func (e *privateError) Error() string {
	addr := e.err.Addr.String()
	what := e.host + " resolves to " + addr + ", " + e.err.Reason
	if e.host == addr {
		what = addr + " is " + e.err.Reason
	}
	return what + "; the harness only calls MCP servers on public addresses unless the operator allows private ones with " + PrivateVar + "=allow"
}

func (e *privateError) Unwrap() error { return e.err }

// toolResult is a result the model sees as an object: its content blocks and the structured
// content, when the server sent any.
type toolResult struct {
	Content           []any `json:"content"`
	StructuredContent any   `json:"structuredContent,omitempty"`
}

// One struct per block type, so no block loses a key it must have.
type (
	textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	// mediaBlock stands for an image or audio: its size, not its data, which a tool result
	// cannot carry to the model yet.
	mediaBlock struct {
		Type     string `json:"type"`
		MIMEType string `json:"mimeType"`
		Bytes    int    `json:"bytes"`
	}
	textResourceBlock struct {
		Type     string `json:"type"`
		URI      string `json:"uri"`
		MIMEType string `json:"mimeType,omitempty"`
		Text     string `json:"text"`
	}
	blobResourceBlock struct {
		Type     string `json:"type"`
		URI      string `json:"uri"`
		MIMEType string `json:"mimeType,omitempty"`
		Bytes    int    `json:"bytes"`
	}
	linkBlock struct {
		Type string `json:"type"`
		URI  string `json:"uri"`
		Name string `json:"name"`
	}
)

// result maps a call's result to what the model sees: a failure as an error of its text, a
// single text as the string, anything else as a toolResult.
func result(res *mcp.CallToolResult) (any, error) {
	if res.IsError {
		var texts []string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, t.Text)
			}
		}
		return nil, errors.New(cmp.Or(strings.Join(texts, "\n"), "the tool failed without saying why"))
	}
	if t, ok := only(res.Content).(*mcp.TextContent); ok && res.StructuredContent == nil {
		return t.Text, nil
	}
	out := toolResult{Content: make([]any, 0, len(res.Content)), StructuredContent: res.StructuredContent}
	for _, c := range res.Content {
		out.Content = append(out.Content, block(c))
	}
	return out, nil
}

// only is the single content block, or nil.
func only(content []mcp.Content) mcp.Content {
	if len(content) != 1 {
		return nil
	}
	return content[0]
}

func block(c mcp.Content) any {
	switch c := c.(type) {
	case *mcp.TextContent:
		return textBlock{Type: "text", Text: c.Text}
	case *mcp.ImageContent:
		return mediaBlock{Type: "image", MIMEType: c.MIMEType, Bytes: len(c.Data)}
	case *mcp.AudioContent:
		return mediaBlock{Type: "audio", MIMEType: c.MIMEType, Bytes: len(c.Data)}
	case *mcp.ResourceLink:
		return linkBlock{Type: "resource_link", URI: c.URI, Name: c.Name}
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			r = &mcp.ResourceContents{}
		}
		if r.Blob != nil {
			return blobResourceBlock{Type: "resource", URI: r.URI, MIMEType: r.MIMEType, Bytes: len(r.Blob)}
		}
		return textResourceBlock{Type: "resource", URI: r.URI, MIMEType: r.MIMEType, Text: r.Text}
	}
	// Sampling's tool_use and tool_result have no place in a tool's result.
	return textBlock{Type: "text", Text: "(a content block of a kind tool results do not carry)"}
}

// progressCall is a call that reports progress: notifications count only from its own
// session, so no other server can report into it.
type progressCall struct {
	session *mcp.ClientSession
	fn      func(progress, total float64, message string)
}

func (c *Client) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, _ := req.Params.ProgressToken.(string)
	v, ok := c.calls.Load(token)
	if !ok {
		return
	}
	if call := v.(*progressCall); call.session == req.Session {
		call.fn(req.Params.Progress, req.Params.Total, req.Params.Message)
	}
}

type callHeaderKey struct{}

type callHeader struct{ name, value string }

// WithTree returns ctx carrying a header, name: value, that every request of an MCP tool's call
// made with it sends: the turn tree of the calling turn (a server that is the harness's own
// POST /mcp counts the turn it starts in it). An empty value sends nothing.
func WithTree(ctx context.Context, name, value string) context.Context {
	return context.WithValue(ctx, callHeaderKey{}, callHeader{name, value})
}

type progressKey struct{}

// WithProgress returns ctx carrying fn, which an MCP tool's call reports the server's
// progress notifications to (total 0: unknown). fn runs on the SDK's goroutine, one
// notification at a time.
func WithProgress(ctx context.Context, fn func(progress, total float64, message string)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

func progressFrom(ctx context.Context) func(progress, total float64, message string) {
	fn, _ := ctx.Value(progressKey{}).(func(progress, total float64, message string))
	return fn
}
