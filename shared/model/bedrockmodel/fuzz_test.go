package bedrockmodel_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model/bedrockmodel"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
)

// fuzzed is the answer of a ConverseStream call, for the fuzz targets: the adapter must
// yield well-formed events or a provider error, and never panic.
var fuzzed = modeltest.Stream{
	Fixtures:    []string{"text.json", "tool_calls.json", "conversation.json", "stream_model_error.json", "reasoning.json", "reasoning_tools.json"},
	Seeds:       []string{"\x00\x00\x00\x10\x00\x00\x00\x00"},
	ContentType: "application/vnd.amazon.eventstream",
	New: func(ctx context.Context, transport *http.Transport) (agent.Model, error) {
		cfg := testConfig("us-east-1")
		cfg.HTTPClient = &http.Client{Transport: transport}
		m, err := bedrockmodel.New(bedrockmodel.Config{Provider: "bedrock", Model: modelID}, cfg,
			func(o *bedrockruntime.Options) { o.BaseEndpoint = aws.String("http://bedrock.invalid") })
		return m, err
	},
}

// FuzzStreamBody decodes any bytes as an AWS event stream.
func FuzzStreamBody(f *testing.F) { modeltest.FuzzStream(f, fuzzed) }

// FuzzStreamEvents sends well-framed event streams, so the fuzzing reaches the events rather
// than the frames' checksums: each line of script is one message, "<event type> <JSON payload>",
// or "!<exception type> <JSON payload>".
func FuzzStreamEvents(f *testing.F) {
	for _, s := range []string{
		"messageStart {\"role\":\"assistant\"}\n" +
			"contentBlockDelta {\"contentBlockIndex\":0,\"delta\":{\"text\":\"I'll check.\"}}\n" +
			"contentBlockStop {\"contentBlockIndex\":0}\n" +
			"contentBlockStart {\"contentBlockIndex\":1,\"start\":{\"toolUse\":{\"toolUseId\":\"tooluse_1\",\"name\":\"weather\"}}}\n" +
			"contentBlockDelta {\"contentBlockIndex\":1,\"delta\":{\"toolUse\":{\"input\":\"{\\\"city\\\": \\\"Os\"}}}\n" +
			"contentBlockDelta {\"contentBlockIndex\":1,\"delta\":{\"toolUse\":{\"input\":\"lo\\\"}\"}}}\n" +
			"contentBlockStop {\"contentBlockIndex\":1}\n" +
			"messageStop {\"stopReason\":\"tool_use\"}\n" +
			"metadata {\"usage\":{\"inputTokens\":412,\"outputTokens\":87,\"totalTokens\":499},\"metrics\":{\"latencyMs\":1204}}",
		"contentBlockStart {\"contentBlockIndex\":0,\"start\":{\"toolUse\":{\"name\":\"weather\"}}}\ncontentBlockStop {\"contentBlockIndex\":0}\nmessageStop {\"stopReason\":\"tool_use\"}",
		"messageStart {\"role\":\"assistant\"}\n!throttlingException {\"message\":\"Too many tokens, please wait before trying again.\"}",
		"messageStop {\"stopReason\":\"guardrail_intervened\"}\nmetadata {\"usage\":null}",
		"unknownEvent {}\nmessageStop {}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script string) {
		var buf bytes.Buffer
		enc := eventstream.NewEncoder()
		for _, line := range strings.Split(script, "\n") {
			typ, payload, _ := strings.Cut(line, " ")
			var h eventstream.Headers
			if exc, ok := strings.CutPrefix(typ, "!"); ok {
				h.Set(":exception-type", eventstream.StringValue(exc))
				h.Set(":message-type", eventstream.StringValue("exception"))
			} else {
				h.Set(":event-type", eventstream.StringValue(typ))
				h.Set(":message-type", eventstream.StringValue("event"))
			}
			h.Set(":content-type", eventstream.StringValue("application/json"))
			if err := enc.Encode(&buf, eventstream.Message{Headers: h, Payload: []byte(payload)}); err != nil {
				return // a header the format cannot hold (too long)
			}
		}
		fuzzed.Check(t, buf.Bytes())
	})
}
