package appserver

import (
	"context"
	"errors"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"net/http"
	"net/url"

	"github.com/aws/aws-lambda-go/events"
)

// HandleLambda serves the WebSocket API's routes. A $connect answered with a status other than
// 200 refuses the upgrade, so a bad credential never gets a frame (one the subprotocol carried
// is answered with the subprotocol the browser must get back); $default answers by posting to
// the connection, so its own response is only an acknowledgement.
func (g *Gateway) HandleLambda(ctx context.Context, req events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error) {
	id := req.RequestContext.ConnectionID
	switch req.RequestContext.RouteKey {
	case "$connect":
		header := http.Header{}
		for k, vs := range req.MultiValueHeaders {
			for _, v := range vs {
				header.Add(k, v)
			}
		}
		for k, v := range req.Headers {
			if header.Get(k) == "" {
				header.Set(k, v)
			}
		}
		query := url.Values{}
		for k, v := range req.QueryStringParameters {
			query.Set(k, v)
		}
		adm, err := g.Connect(ctx, id, header, query)
		if err != nil {
			var e *httpjson.Error
			if errors.As(err, &e) {
				return events.APIGatewayProxyResponse{StatusCode: e.Status, Body: e.Message}, nil
			}
			g.h.opts.Logger.ErrorContext(ctx, "admitting a connection", "err", err)
			return events.APIGatewayProxyResponse{StatusCode: http.StatusInternalServerError}, nil
		}
		if adm.Subprotocol != "" {
			// API Gateway answers the upgrade with the headers $connect returns.
			return events.APIGatewayProxyResponse{StatusCode: http.StatusOK, Headers: map[string]string{"Sec-WebSocket-Protocol": adm.Subprotocol}}, nil
		}
	case "$disconnect":
		if err := g.Disconnect(ctx, id); err != nil {
			g.h.opts.Logger.ErrorContext(ctx, "forgetting a connection", "connectionId", id, "err", err)
		}
	default:
		body := []byte(req.Body)
		if req.IsBase64Encoded {
			body = nil // binary frames are not commands
		}
		if err := g.Message(ctx, id, body); err != nil {
			g.h.opts.Logger.ErrorContext(ctx, "handling a frame", "connectionId", id, "err", err)
			return events.APIGatewayProxyResponse{StatusCode: http.StatusInternalServerError}, nil
		}
	}
	return events.APIGatewayProxyResponse{StatusCode: http.StatusOK}, nil
}
