// Package wsconn posts to API Gateway WebSocket connections through the @connections management
// API. The SDK's apigatewaymanagementapi client is not available to this module, so the requests
// are built here and signed with the core module's SigV4 signer.
package wsconn

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// MaxMessageSize is API Gateway's limit on a WebSocket message, in bytes; larger posts are
// refused before they are sent.
const MaxMessageSize = 128 << 10

// ErrGone: the connection is closed or was never known (API Gateway answers 410). The client is
// gone for good, so callers should stop sending to it.
var ErrGone = errors.New("websocket connection gone")

// service is the SigV4 signing name of API Gateway's execute-api endpoints.
const service = "execute-api"

// errorSnippet is how much of an unexpected response body an error quotes.
const errorSnippet = 200

// Poster sends to the connections of one WebSocket API stage.
type Poster struct {
	// Endpoint is the management endpoint, https://{api-id}.execute-api.{region}.amazonaws.com/{stage}
	// (see EndpointFor); a trailing slash is ignored.
	Endpoint string
	// Region is the API's region, part of the signature.
	Region string
	// Credentials sign the requests, typically aws.Config.Credentials, which caches them.
	Credentials aws.CredentialsProvider
	// Client sends the requests; nil is http.DefaultClient.
	Client *http.Client
	// Now is the signing clock; nil is time.Now.
	Now func() time.Time
}

// Post sends data to the connection as one WebSocket message.
func (p *Poster) Post(ctx context.Context, connectionID string, data []byte) error {
	if len(data) > MaxMessageSize {
		return fmt.Errorf("posting to connection %s: message of %d bytes exceeds the %d-byte WebSocket message limit",
			connectionID, len(data), MaxMessageSize)
	}
	return p.do(ctx, http.MethodPost, connectionID, data)
}

// Disconnect closes the connection from the server side.
func (p *Poster) Disconnect(ctx context.Context, connectionID string) error {
	return p.do(ctx, http.MethodDelete, connectionID, nil)
}

// EndpointFor is the management endpoint of the API that delivered a WebSocket event, from the
// event's requestContext.domainName and requestContext.stage: a Lambda learns where to post from
// the event itself. It assumes the execute-api domain, not a custom domain name.
func EndpointFor(domainName, stage string) string {
	return "https://" + domainName + "/" + stage
}

func (p *Poster) do(ctx context.Context, method, connectionID string, body []byte) error {
	verb := "posting to"
	if method == http.MethodDelete {
		verb = "disconnecting"
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s connection %s: %w", verb, connectionID, fmt.Errorf(format, args...))
	}
	switch {
	case connectionID == "":
		return fmt.Errorf("%s connection: empty connection id", verb)
	case p.Endpoint == "":
		return fail("no endpoint")
	case p.Credentials == nil:
		return fail("no credentials")
	}

	// PathEscape keeps the id one path segment even if it holds a slash.
	u := strings.TrimSuffix(p.Endpoint, "/") + "/@connections/" + url.PathEscape(connectionID)
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return fail("%w", err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)

	creds, err := p.Credentials.Retrieve(ctx)
	if err != nil {
		return fail("retrieving credentials: %w", err)
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, payloadHash, service, p.Region, now()); err != nil {
		return fail("signing: %w", err)
	}

	client := p.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fail("%w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, errorSnippet))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusGone:
		return fail("%w", ErrGone)
	default:
		return fail("%s: %s", resp.Status, bytes.TrimSpace(snippet))
	}
}

// Admission is what a WebSocket API's $connect says of a connection it lets open: the
// subprotocol the upgrade answers with (empty: none), and when the connection's authority
// ends by time (zero: never; an end-user token's expiry).
type Admission struct {
	Subprotocol string
	Until       time.Time
}
