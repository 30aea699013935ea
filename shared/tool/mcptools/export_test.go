package mcptools

import "net/http"

// Transport is the transport c's requests go through.
func Transport(c *Client) http.RoundTripper { return c.http.Transport }
