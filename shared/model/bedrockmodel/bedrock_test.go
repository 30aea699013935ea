// The wire fixtures in testdata follow Bedrock's documented ConverseStream format: each answer is
// a binary AWS event stream (application/vnd.amazon.eventstream, stored base64) of messageStart,
// contentBlockStart, contentBlockDelta, contentBlockStop, messageStop and metadata events, each
// with the :event-type, :content-type application/json and :message-type event headers, and
// each fixture's request body pins what the adapter sends. They were built, without access to
// AWS, by the generator at the end of this file: `go test ./shared/model/bedrockmodel -build-fixtures`
// rewrites them from the shapes written there, for review.
//
// `go test ./shared/model/bedrockmodel -record` with real AWS credentials (the default chain, in a US
// region, allowed to call the us.amazon.nova-lite-v1:0 profile) re-records the fixtures Bedrock
// can produce on demand (text.json, tool_calls.json, conversation.json, validation_error.json);
// the model's words then change, so update the wanted events with them. A throttle or a broken
// stream cannot be ordered from Bedrock: those fixtures stay synthetic and are replayed even
// under -record, as do the reasoning and cache fixtures (reasoning_test.go, cache_test.go),
// written for Claude and Llama models the recording profile does not call.
package bedrockmodel_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/bedrockmodel"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"
)

var buildFixtures = flag.Bool("build-fixtures", false, "rewrite testdata from the documented Bedrock event shapes in this file before the tests run")

func TestMain(m *testing.M) {
	flag.Parse()
	if *buildFixtures {
		if wirefixture.Recording() {
			fmt.Fprintln(os.Stderr, "-build-fixtures and -record both rewrite testdata: use one")
			os.Exit(2)
		}
		if err := writeFixtures(); err != nil {
			fmt.Fprintln(os.Stderr, "building fixtures:", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// modelID is the model the fixtures were made for: Amazon Nova Lite through its US inference
// profile, which takes temperature and topP together and calls tools.
const modelID = "us.amazon.nova-lite-v1:0"

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`

var (
	weatherSpec = model.ToolSpec{Name: "weather", Description: "Forecast for a city.", InputSchema: json.RawMessage(weatherSchema)}
	timeSpec    = model.ToolSpec{Name: "current_time", Description: "The current time in a time zone.", InputSchema: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string"}}}`)}
)

// fixture is a server answering from one testdata file, and the AWS config to call it with.
type fixture struct {
	url      string
	requests func() []wirefixture.Captured
	awsCfg   aws.Config
}

// serve replays testdata/name. Under -record a recordable fixture is recorded from Bedrock
// with real credentials; the synthetic ones are replayed as always.
func serve(t *testing.T, name string, recordable bool) *fixture {
	t.Helper()
	if wirefixture.Recording() && recordable {
		awsCfg := recordingConfig(t)
		s := wirefixture.Serve(t, name, "https://"+bedrockHost(awsCfg.Region))
		return &fixture{url: s.URL, requests: s.Requests, awsCfg: awsCfg}
	}
	awsCfg := testConfig("us-east-1")
	if !recordable {
		s := wirefixture.Replay(t, name)
		return &fixture{url: s.URL, requests: s.Requests, awsCfg: awsCfg}
	}
	s := wirefixture.Serve(t, name, "https://"+bedrockHost(awsCfg.Region))
	return &fixture{url: s.URL, requests: s.Requests, awsCfg: awsCfg}
}

func (f *fixture) model(t *testing.T, cfg bedrockmodel.Config, optFns ...func(*bedrockruntime.Options)) *bedrockmodel.Model {
	t.Helper()
	optFns = append(optFns, func(o *bedrockruntime.Options) { o.BaseEndpoint = aws.String(f.url) })
	m, err := bedrockmodel.New(cfg, f.awsCfg, optFns...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func bedrockHost(region string) string { return "bedrock-runtime." + region + ".amazonaws.com" }

// recordingConfig loads the real credentials -record calls Bedrock with.
func recordingConfig(t *testing.T) aws.Config {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatalf("-record: loading the AWS config: %v", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Credentials == nil {
		t.Fatal("-record needs AWS credentials from the default chain")
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		t.Fatalf("-record needs AWS credentials from the default chain: %v", err)
	}
	// The call goes to the recording proxy, which forwards it to Bedrock with the same headers:
	// sign it for Bedrock's host so the signature holds there.
	host := bedrockHost(cfg.Region)
	cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
		return s.Finalize.Insert(middleware.FinalizeMiddlewareFunc("SignForBedrockHost",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok {
					req.Host = host
				}
				return next.HandleFinalize(ctx, in)
			}), "Signing", middleware.Before)
	})
	return cfg
}

func TestTextAnswer(t *testing.T) {
	f := serve(t, "text.json", true)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{System: "You are terse.", Messages: []model.Message{modeltest.User("Say hello in three words.")}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "Hello"},
		{Type: model.EventTextDelta, Text: " there,"},
		{Type: model.EventTextDelta, Text: " friend."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 12, OutputTokens: 5}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestToolCalls(t *testing.T) {
	f := serve(t, "tool_calls.json", true)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{
		Messages: []model.Message{modeltest.User("What's the weather in Oslo for three days, and the time there?")},
		Tools:    []model.ToolSpec{weatherSpec, timeSpec},
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	const w, c = "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "tooluse_3vQx9dTfSNaH2bLwRk8cJg"
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "I'll check both."},
		{Type: model.EventToolInputStart, ToolCallID: w, ToolName: "weather"},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `{"city": "Os`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `lo", "days": 3}`},
		{Type: model.EventToolCall, ToolCallID: w, ToolName: "weather", Input: json.RawMessage(`{"city": "Oslo", "days": 3}`)},
		{Type: model.EventToolInputStart, ToolCallID: c, ToolName: "current_time"},
		// current_time streamed only an empty piece of input: the call carries "{}".
		{Type: model.EventToolCall, ToolCallID: c, ToolName: "current_time", Input: json.RawMessage(`{}`)},
		{Type: model.EventFinish, Finish: model.FinishToolCalls, Usage: model.Usage{InputTokens: 412, OutputTokens: 87}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestConversationRequest leaves the proof to the fixture's pinned request body: the system
// block, the assistant's text and toolUse blocks, both results (one an error) in a user turn
// merged with the user's next message, the tool config and the inference config.
func TestConversationRequest(t *testing.T) {
	f := serve(t, "conversation.json", true)
	temp, topP, maxTokens := 0.3, 0.9, int64(512)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID, Settings: model.Settings{Temperature: &temp, TopP: &topP, MaxTokens: &maxTokens}})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{
		System: "Be brief.",
		Messages: []model.Message{
			modeltest.User("Weather in Oslo and Bergen?"),
			{Role: model.RoleAssistant, Parts: []model.Part{
				{Type: model.PartText, Text: "Checking both."},
				{Type: model.PartToolCall, ToolCallID: "tooluse_oslo", ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo"}`)},
				{Type: model.PartToolCall, ToolCallID: "tooluse_bergen", ToolName: "weather", Input: json.RawMessage(`{"city":"Bergen","days":2}`)},
			}},
			{Role: model.RoleTool, Parts: []model.Part{
				{Type: model.PartToolResult, ToolCallID: "tooluse_oslo", ToolName: "weather", Output: json.RawMessage(`{"sky":"sunny","high":21}`)},
				{Type: model.PartToolResult, ToolCallID: "tooluse_bergen", ToolName: "weather", Output: json.RawMessage(`"the weather service timed out"`), IsError: true},
			}},
			modeltest.User("Answer in one sentence."),
		},
		Tools: []model.ToolSpec{weatherSpec},
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "Oslo is sunny at 21 °C;"},
		{Type: model.EventTextDelta, Text: " Bergen's forecast is unavailable."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 389, OutputTokens: 16}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// retryer keeps the standard retry policy with a tiny backoff, so retries take no time, and
// allows more attempts than the adapter's three, to show the adapter's limit is what holds.
func retryer(o *bedrockruntime.Options) {
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxBackoff = time.Millisecond
		so.MaxAttempts = 10
	})
}

func TestThrottlingIsRetried(t *testing.T) {
	f := serve(t, "throttled_then_ok.json", false)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID}, retryer)

	got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Say hello in three words.")}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "Hello, kind stranger."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 9, OutputTokens: 5}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"attempt=1 max=3", "attempt=2 max=3"}, attempts(f.requests())); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
}

func TestThrottlingGivesUpAfterThreeAttempts(t *testing.T) {
	f := serve(t, "throttled_thrice.json", false)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID}, retryer)

	events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Say hello in three words.")}})

	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	pe := modeltest.ProviderError(t, err, "bedrock")
	want := model.ProviderError{Provider: "bedrock", Status: http.StatusTooManyRequests, RequestID: "f3c1d0e2-5b6a-4c7d-8e9f-0a1b2c3d4e53"}
	if got := (model.ProviderError{Provider: pe.Provider, Status: pe.Status, RequestID: pe.RequestID}); got != want {
		t.Errorf("provider error = %+v, want %+v", got, want)
	}
	if diff := cmp.Diff([]string{"attempt=1 max=3", "attempt=2 max=3", "attempt=3 max=3"}, attempts(f.requests())); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
}

// A throttle's Retry-After (or AWS's x-amz-retry-after) is a floor on the wait before the
// retry, though the retryer's own backoff (1ms here) is shorter.
func TestThrottleWaitIsHonoured(t *testing.T) {
	for _, name := range []string{"throttled_retry_after_then_ok.json", "throttled_amz_retry_after_then_ok.json"} {
		t.Run(name, func(t *testing.T) {
			f := serve(t, name, false)
			m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID}, retryer)

			start := time.Now()
			got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Say hello in three words.")}})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			want := []model.Event{
				{Type: model.EventTextDelta, Text: "Hello, kind stranger."},
				{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 9, OutputTokens: 5}},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"attempt=1 max=3", "attempt=2 max=3"}, attempts(f.requests())); diff != "" {
				t.Errorf("attempts (-want +got):\n%s", diff)
			}
			if elapsed < time.Second {
				t.Errorf("Stream took %v; the retry must wait the 1s the throttle asks for", elapsed)
			}
		})
	}
}

// A throttle whose wait outlasts the context's deadline is not waited for: the 429 comes back
// at once, as a ProviderError, leaving the caller its remaining time, and is not retried. The
// client keeps the production retryer, whose first backoff is random up to 2s.
func TestThrottleWaitPastDeadlineIsNotTaken(t *testing.T) {
	f := serve(t, "throttled_retry_after_long.json", false)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	start := time.Now()
	events, err := modeltest.Collect(ctx, m, &model.Request{Messages: []model.Message{modeltest.User("Say hello in three words.")}})
	elapsed := time.Since(start)

	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	pe := modeltest.ProviderError(t, err, "bedrock")
	// A canceled request here would mean the retryer slept into the deadline instead.
	want := model.ProviderError{Provider: "bedrock", Status: http.StatusTooManyRequests, RequestID: "d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6"}
	if got := (model.ProviderError{Provider: pe.Provider, Status: pe.Status, RequestID: pe.RequestID}); got != want {
		t.Errorf("provider error = %+v, want %+v (error: %v)", got, want, err)
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ThrottlingException" {
		t.Errorf("error = %v, want the ThrottlingException", err)
	}
	if elapsed > 5*time.Second {
		t.Errorf("Stream took %v; it must not wait for a retry the deadline does not leave time for", elapsed)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1: no retry past the deadline", n)
	}
}

// attempts reads the SDK's Amz-Sdk-Request header of each request: its attempt number and the
// retryer's maximum.
func attempts(reqs []wirefixture.Captured) []string {
	var out []string
	for _, r := range reqs {
		var parts []string
		for _, p := range strings.Split(r.Header.Get("Amz-Sdk-Request"), "; ") {
			if strings.HasPrefix(p, "attempt=") || strings.HasPrefix(p, "max=") {
				parts = append(parts, p)
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

func TestValidationErrorIsNotRetried(t *testing.T) {
	f := serve(t, "validation_error.json", true)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: "no-such-model"}, retryer)

	events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("hi")}})

	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	pe := modeltest.ProviderError(t, err, "bedrock")
	want := model.ProviderError{Provider: "bedrock", Status: http.StatusBadRequest, RequestID: "9b2f7c1e-3d4a-4e5b-8c6d-7e8f9a0b1c2d"}
	if got := (model.ProviderError{Provider: pe.Provider, Status: pe.Status, RequestID: pe.RequestID}); got != want {
		t.Errorf("provider error = %+v, want %+v", got, want)
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorMessage() != "The provided model identifier is invalid." {
		t.Errorf("error = %v, want the API error with Bedrock's message", err)
	}
	if errors.Is(err, model.ErrContextLength) {
		t.Errorf("errors.Is(%v, model.ErrContextLength) = true, want false: the request is not too long", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

// TestContextLengthExceeded pins which refusals read as model.ErrContextLength: a
// ValidationException, before the stream or inside it, in one of the ways Bedrock's models word
// input longer than their context window; not another ValidationException, nor a throttle
// that speaks of tokens.
func TestContextLengthExceeded(t *testing.T) {
	const requestID = "2e4f6a8b-0c1d-4e3f-9a5b-7c9d1e3f5a7b"
	tests := []struct {
		name   string
		answer wirefixture.Response
		want   bool
	}{
		{"input is too long", apiError(http.StatusBadRequest, "ValidationException", requestID, "Input is too long for requested model."), true},
		{"too many input tokens", apiError(http.StatusBadRequest, "ValidationException", requestID, "Too many input tokens. Max input tokens: 8192, request input token count: 9279 "), true},
		{"Claude's prompt is too long", apiError(http.StatusBadRequest, "ValidationException", requestID, "The model returned the following errors: prompt is too long: 200049 tokens > 200000 maximum"), true},
		{"inside the stream", eventStream(requestID, exception("validationException", `{"message":"The model returned the following errors: Input is too long for requested model."}`)), true},
		{"another validation error", apiError(http.StatusBadRequest, "ValidationException", requestID, "The provided model identifier is invalid."), false},
		{"a throttle", apiError(http.StatusTooManyRequests, "ThrottlingException", requestID, "Too many tokens, please wait before trying again."), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := modeltest.NewServer(t, tt.answer)
			f := &fixture{url: srv.URL, requests: srv.Requests, awsCfg: testConfig("us-east-1")}
			m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID}, retryer)

			_, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Summarise the build log above.")}})

			if tt.want {
				modeltest.ContextLengthError(t, err, "bedrock")
				return
			}
			modeltest.ProviderError(t, err, "bedrock")
			if errors.Is(err, model.ErrContextLength) {
				t.Errorf("errors.Is(%v, model.ErrContextLength) = true, want false", err)
			}
		})
	}
}

func TestExceptionInsideTheStream(t *testing.T) {
	tests := []struct {
		fixture    string
		wantStatus int
		wantCode   string
	}{
		{"stream_throttled.json", http.StatusTooManyRequests, "ThrottlingException"},
		{"stream_model_error.json", http.StatusFailedDependency, "ModelStreamErrorException"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			f := serve(t, tt.fixture, false)
			m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID}, retryer)

			events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Tell me a long story.")}})

			wantEvents := []model.Event{{Type: model.EventTextDelta, Text: "Once upon"}}
			if diff := cmp.Diff(wantEvents, events); diff != "" {
				t.Errorf("events before the error (-want +got):\n%s", diff)
			}
			pe := modeltest.ProviderError(t, err, "bedrock")
			want := model.ProviderError{Provider: "bedrock", Status: tt.wantStatus, RequestID: "5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f"}
			if got := (model.ProviderError{Provider: pe.Provider, Status: pe.Status, RequestID: pe.RequestID}); got != want {
				t.Errorf("provider error = %+v, want %+v", got, want)
			}
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != tt.wantCode {
				t.Errorf("error = %v, want the %s the stream carried", err, tt.wantCode)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("server saw %d requests, want 1: a stream that failed midway is not retried", n)
			}
		})
	}
}

func TestProviderToolIsUnsupported(t *testing.T) {
	srv := modeltest.NewServer(t, modeltest.Unexpected)
	m := (&fixture{url: srv.URL, awsCfg: testConfig("us-east-1")}).model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID})

	modeltest.CheckRefused(t, m, srv, &model.Request{
		Messages: []model.Message{modeltest.User("Search the web for today's news.")},
		Tools:    []model.ToolSpec{weatherSpec, {Name: "search", ProviderTool: model.ProviderGoogleSearch}},
	}, `tool search: the bedrock provider does not support the provider-defined tool "`+model.ProviderGoogleSearch+`"`)
}

func testConfig(region string) aws.Config {
	return aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", "")}
}

func TestFinishReasons(t *testing.T) {
	tests := []struct {
		stopReason string // empty sends no messageStop
		want       model.FinishReason
	}{
		{"end_turn", model.FinishStop},
		{"stop_sequence", model.FinishStop},
		{"tool_use", model.FinishToolCalls},
		{"max_tokens", model.FinishLength},
		{"guardrail_intervened", model.FinishFilter},
		{"content_filtered", model.FinishFilter},
		{"model_context_window_exceeded", model.FinishOther},
		{"", model.FinishOther},
	}
	for _, tt := range tests {
		name := tt.stopReason
		if name == "" {
			name = "none"
		}
		t.Run(name, func(t *testing.T) {
			msgs := []streamMessage{
				event("messageStart", `{"role":"assistant"}`),
				event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`),
				event("contentBlockStop", `{"contentBlockIndex":0}`),
			}
			if tt.stopReason != "" {
				msgs = append(msgs, event("messageStop", `{"stopReason":"`+tt.stopReason+`"}`))
			}
			msgs = append(msgs, event("metadata", `{"usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4},"metrics":{"latencyMs":80}}`))
			srv := modeltest.NewServer(t, eventStream("0f1e2d3c-4b5a-4697-8877-665544332211", msgs...))
			m := (&fixture{url: srv.URL, awsCfg: testConfig("us-east-1")}).model(t, bedrockmodel.Config{Model: modelID})

			got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("hi")}})
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			want := []model.Event{
				{Type: model.EventTextDelta, Text: "Hi"},
				{Type: model.EventFinish, Finish: tt.want, Usage: model.Usage{InputTokens: 3, OutputTokens: 1}},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStreamStopsWhenTheConsumerBreaks(t *testing.T) {
	srv := modeltest.NewServer(t, toolCallsStream())
	m := (&fixture{url: srv.URL, awsCfg: testConfig("us-east-1")}).model(t, bedrockmodel.Config{Model: modelID})
	req := &model.Request{Messages: []model.Message{modeltest.User("What's the weather in Oslo for three days, and the time there?")}, Tools: []model.ToolSpec{weatherSpec, timeSpec}}
	modeltest.CheckBreaks(t, m, req, 8)
}

// TestSigning shows the calls are signed with the aws.Config's IAM credentials, for its region
// or for the region the model block names.
func TestSigning(t *testing.T) {
	tests := []struct {
		name, configRegion, blockRegion, wantScope string
	}{
		{"aws config region", "us-east-1", "", "/us-east-1/bedrock/aws4_request"},
		{"model block region", "us-east-1", "eu-central-1", "/eu-central-1/bedrock/aws4_request"},
		{"model block region without an aws config region", "", "us-west-2", "/us-west-2/bedrock/aws4_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := modeltest.NewServer(t, eventStream("0f1e2d3c-4b5a-4697-8877-665544332211",
				event("messageStart", `{"role":"assistant"}`),
				event("messageStop", `{"stopReason":"end_turn"}`),
			))
			m := (&fixture{url: srv.URL, awsCfg: testConfig(tt.configRegion)}).model(t, bedrockmodel.Config{Model: modelID, Region: tt.blockRegion})
			if _, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("hi")}}); err != nil {
				t.Fatalf("Stream: %v", err)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(reqs))
			}
			auth := reqs[0].Header.Get("Authorization")
			if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(auth, tt.wantScope) {
				t.Errorf("Authorization = %q, want a SigV4 signature by AKIDTEST with scope %s", auth, tt.wantScope)
			}
		})
	}
}

func TestNew(t *testing.T) {
	tooMany := int64(1) << 31
	tests := []struct {
		name    string
		cfg     bedrockmodel.Config
		region  string // the aws.Config's
		wantErr string // empty: New must succeed
	}{
		{name: "missing model", cfg: bedrockmodel.Config{}, region: "us-east-1", wantErr: "model.model is required"},
		{name: "no region anywhere", cfg: bedrockmodel.Config{Model: modelID}, wantErr: "needs a region"},
		{name: "maxTokens beyond Bedrock's range", cfg: bedrockmodel.Config{Model: modelID, Settings: model.Settings{MaxTokens: &tooMany}}, region: "us-east-1", wantErr: "maxTokens"},
		{name: "region from the aws config", cfg: bedrockmodel.Config{Model: modelID}, region: "us-east-1"},
		{name: "region from the model block", cfg: bedrockmodel.Config{Model: "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.amazon.nova-lite-v1:0", Region: "eu-west-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := bedrockmodel.New(tt.cfg, testConfig(tt.region))
			modeltest.CheckNew(t, m, err, tt.wantErr)
		})
	}
}

// The fixture generator. Its shapes follow Bedrock's API reference for ConverseStream; each
// request body is written out by hand, so the fixture pins what the adapter must send rather
// than echoing it.

// streamMessage is one message of an AWS event stream: an event, or an exception.
type streamMessage struct {
	messageType string // "event" or "exception"
	typ         string // the :event-type or :exception-type
	payload     string
}

func event(typ, payload string) streamMessage { return streamMessage{"event", typ, payload} }

func exception(typ, payload string) streamMessage {
	return streamMessage{"exception", typ, payload}
}

// eventStream encodes msgs as a ConverseStream answer with the SDK's encoder. Events also
// carry a "p" member, like the random padding Bedrock adds to its events, which a reader must
// ignore.
func eventStream(requestID string, msgs ...streamMessage) wirefixture.Response {
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, msg := range msgs {
		var h eventstream.Headers
		payload := []byte(msg.payload)
		if msg.messageType == "event" {
			h.Set(":event-type", eventstream.StringValue(msg.typ))
			payload = padded(msg.payload)
		} else {
			h.Set(":exception-type", eventstream.StringValue(msg.typ))
		}
		h.Set(":content-type", eventstream.StringValue("application/json"))
		h.Set(":message-type", eventstream.StringValue(msg.messageType))
		if err := enc.Encode(&buf, eventstream.Message{Headers: h, Payload: payload}); err != nil {
			panic(fmt.Sprintf("encoding %s %s: %v", msg.messageType, msg.typ, err))
		}
	}
	return wirefixture.Response{
		Status:     http.StatusOK,
		Headers:    map[string]string{"Content-Type": "application/vnd.amazon.eventstream", "X-Amzn-Requestid": requestID},
		BodyBase64: base64.StdEncoding.EncodeToString(buf.Bytes()),
	}
}

func padded(payload string) []byte {
	var v map[string]any
	if err := json.Unmarshal([]byte(payload), &v); err != nil {
		panic(fmt.Sprintf("event payload %s: %v", payload, err))
	}
	v["p"] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"[:10+len(payload)%26]
	out, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return out
}

// apiError is Bedrock's answer to a call it refuses before streaming.
func apiError(status int, code, requestID, message string) wirefixture.Response {
	body, _ := json.Marshal(map[string]string{"message": message})
	return wirefixture.Response{
		Status: status,
		Headers: map[string]string{
			"Content-Type":     "application/json",
			"X-Amzn-Errortype": code + ":http://internal.amazon.com/coral/com.amazon.bedrock/",
			"X-Amzn-Requestid": requestID,
		},
		Body: string(body),
	}
}

func converseStream(model, body string) wirefixture.Request {
	return wirefixture.Request{Method: http.MethodPost, Path: "/model/" + model + "/converse-stream", Body: json.RawMessage(body)}
}

func textStream(requestID string, usage string, pieces ...string) wirefixture.Response {
	msgs := []streamMessage{event("messageStart", `{"role":"assistant"}`)}
	for _, p := range pieces {
		text, _ := json.Marshal(p)
		msgs = append(msgs, event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":`+string(text)+`}}`))
	}
	msgs = append(msgs,
		event("contentBlockStop", `{"contentBlockIndex":0}`),
		event("messageStop", `{"stopReason":"end_turn"}`),
		event("metadata", usage),
	)
	return eventStream(requestID, msgs...)
}

// cachePoint is the cache point the adapter puts after the system prompt, the tools (not for
// Nova) and the conversation of a model that caches: every fixture's Nova Lite by default.
const cachePoint = `{"cachePoint":{"type":"default"}}`

const helloRequest = `{"messages":[{"role":"user","content":[{"text":"Say hello in three words."},` + cachePoint + `]}]}`

var weatherTool = `{"toolSpec":{"name":"weather","description":"Forecast for a city.","inputSchema":{"json":` + weatherSchema + `}}}`

// toolCallsStream is text, then two tool calls whose input streams in pieces, the second
// with only an empty piece.
func toolCallsStream() wirefixture.Response {
	return eventStream("2e8b5d71-94c6-4f0a-b3e2-6d1c7a9f8e04",
		event("messageStart", `{"role":"assistant"}`),
		event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"I'll check both."}}`),
		event("contentBlockStop", `{"contentBlockIndex":0}`),
		event("contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q","name":"weather"}}}`),
		event("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"city\": \"Os"}}}`),
		event("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"lo\", \"days\": 3}"}}}`),
		event("contentBlockStop", `{"contentBlockIndex":1}`),
		event("contentBlockStart", `{"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"tooluse_3vQx9dTfSNaH2bLwRk8cJg","name":"current_time"}}}`),
		event("contentBlockDelta", `{"contentBlockIndex":2,"delta":{"toolUse":{"input":""}}}`),
		event("contentBlockStop", `{"contentBlockIndex":2}`),
		event("messageStop", `{"stopReason":"tool_use"}`),
		event("metadata", `{"usage":{"inputTokens":412,"outputTokens":87,"totalTokens":499},"metrics":{"latencyMs":1204}}`),
	)
}

func fixtures() map[string][]wirefixture.Exchange {
	throttled := func(requestID string) wirefixture.Exchange {
		return wirefixture.Exchange{
			Request:  converseStream(modelID, helloRequest),
			Response: apiError(http.StatusTooManyRequests, "ThrottlingException", requestID, "Too many requests, please wait before trying again."),
		}
	}
	// throttledWait is a throttle whose answer names the wait before a retry in header.
	throttledWait := func(requestID, header, wait string) wirefixture.Exchange {
		ex := throttled(requestID)
		ex.Response.Headers[header] = wait
		return ex
	}
	hello := func(requestID string) wirefixture.Exchange {
		return wirefixture.Exchange{
			Request: converseStream(modelID, helloRequest),
			Response: textStream(requestID,
				`{"usage":{"inputTokens":9,"outputTokens":5,"totalTokens":14},"metrics":{"latencyMs":290}}`,
				"Hello, kind stranger."),
		}
	}
	brokenStory := func(exceptionType, payload string) []wirefixture.Exchange {
		return []wirefixture.Exchange{{
			Request: converseStream(modelID, `{"messages":[{"role":"user","content":[{"text":"Tell me a long story."},`+cachePoint+`]}]}`),
			Response: eventStream("5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f",
				event("messageStart", `{"role":"assistant"}`),
				event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Once upon"}}`),
				exception(exceptionType, payload),
			),
		}}
	}
	return map[string][]wirefixture.Exchange{
		"text.json": {{
			Request: converseStream(modelID, `{
				"system":[{"text":"You are terse."},`+cachePoint+`],
				"messages":[{"role":"user","content":[{"text":"Say hello in three words."},`+cachePoint+`]}]
			}`),
			Response: textStream("7c4a9f2e-1b3d-4e5f-a6b7-c8d9e0f1a2b3",
				`{"usage":{"inputTokens":12,"outputTokens":5,"totalTokens":17},"metrics":{"latencyMs":312}}`,
				"Hello", " there,", " friend."),
		}},
		"cache_usage.json": {{
			Request: converseStream(modelID, `{
				"system":[{"text":"You are terse."},`+cachePoint+`],
				"messages":[{"role":"user","content":[{"text":"Say hello in three words."},`+cachePoint+`]}]
			}`),
			Response: textStream("7c4a9f2e-1b3d-4e5f-a6b7-c8d9e0f1a2b3",
				`{"usage":{"inputTokens":12,"outputTokens":5,"totalTokens":2065,"cacheReadInputTokens":1792,"cacheWriteInputTokens":256},"metrics":{"latencyMs":312}}`,
				"Hello", " there,", " friend."),
		}},
		"tool_calls.json": {{
			Request: converseStream(modelID, `{
				"messages":[{"role":"user","content":[{"text":"What's the weather in Oslo for three days, and the time there?"},`+cachePoint+`]}],
				"toolConfig":{"tools":[`+weatherTool+`,
					{"toolSpec":{"name":"current_time","description":"The current time in a time zone.","inputSchema":{"json":{"type":"object","properties":{"timezone":{"type":"string"}}}}}}]}
			}`),
			Response: toolCallsStream(),
		}},
		"conversation.json": {{
			Request: converseStream(modelID, `{
				"system":[{"text":"Be brief."},`+cachePoint+`],
				"messages":[
					{"role":"user","content":[{"text":"Weather in Oslo and Bergen?"}]},
					{"role":"assistant","content":[
						{"text":"Checking both."},
						{"toolUse":{"toolUseId":"tooluse_oslo","name":"weather","input":{"city":"Oslo"}}},
						{"toolUse":{"toolUseId":"tooluse_bergen","name":"weather","input":{"city":"Bergen","days":2}}}
					]},
					{"role":"user","content":[
						{"toolResult":{"toolUseId":"tooluse_oslo","content":[{"json":{"sky":"sunny","high":21}}]}},
						{"toolResult":{"toolUseId":"tooluse_bergen","content":[{"text":"the weather service timed out"}],"status":"error"}},
						{"text":"Answer in one sentence."},
						`+cachePoint+`
					]}
				],
				"toolConfig":{"tools":[`+weatherTool+`]},
				"inferenceConfig":{"maxTokens":512,"temperature":0.3,"topP":0.9}
			}`),
			Response: textStream("c0ffee00-1234-4abc-9def-0123456789ab",
				`{"usage":{"inputTokens":389,"outputTokens":16,"totalTokens":405},"metrics":{"latencyMs":640}}`,
				"Oslo is sunny at 21 °C;", " Bergen's forecast is unavailable."),
		}},
		"output.json": {{
			Request: converseStream(modelID, `{
				"system":[{"text":"Say where it is sunny."},`+cachePoint+`],
				"messages":[
					{"role":"user","content":[{"text":"Where is it sunny?"}]},
					{"role":"assistant","content":[{"text":"It is sunny in Oslo."}]},
					{"role":"user","content":[{"text":`+mustJSON(modeltest.OutputRequest().Messages[2].Text())+`},`+cachePoint+`]}
				],
				"outputConfig":{"textFormat":{"type":"json_schema","structure":{"jsonSchema":{"name":"output","schema":`+mustJSON(modeltest.OutputSchema)+`}}}}
			}`),
			Response: textStream("4f3e2d1c-0b9a-4876-a543-21fedcba9876",
				`{"usage":{"inputTokens":97,"outputTokens":10,"totalTokens":107},"metrics":{"latencyMs":455}}`,
				`{"city":"Oslo",`, `"sunny":true}`),
		}},
		"throttled_then_ok.json": {
			throttled("a1b2c3d4-e5f6-4789-8abc-def012345678"),
			{
				Request: converseStream(modelID, helloRequest),
				Response: textStream("b2c3d4e5-f6a7-4890-9bcd-ef0123456789",
					`{"usage":{"inputTokens":9,"outputTokens":5,"totalTokens":14},"metrics":{"latencyMs":290}}`,
					"Hello, kind stranger."),
			},
		},
		"throttled_retry_after_then_ok.json": {
			throttledWait("7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c01", "Retry-After", "1"),
			hello("7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c02"),
		},
		"throttled_amz_retry_after_then_ok.json": {
			throttledWait("7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c03", "X-Amz-Retry-After", "1000"),
			hello("7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c04"),
		},
		"throttled_retry_after_long.json": {
			throttledWait("d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6", "Retry-After", "60"),
		},
		"throttled_thrice.json": {
			throttled("f3c1d0e2-5b6a-4c7d-8e9f-0a1b2c3d4e51"),
			throttled("f3c1d0e2-5b6a-4c7d-8e9f-0a1b2c3d4e52"),
			throttled("f3c1d0e2-5b6a-4c7d-8e9f-0a1b2c3d4e53"),
		},
		"validation_error.json": {{
			Request:  converseStream("no-such-model", `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`),
			Response: apiError(http.StatusBadRequest, "ValidationException", "9b2f7c1e-3d4a-4e5b-8c6d-7e8f9a0b1c2d", "The provided model identifier is invalid."),
		}},
		"stream_throttled.json": brokenStory("throttlingException",
			`{"message":"Too many tokens, please wait before trying again."}`),
		"stream_model_error.json": brokenStory("modelStreamErrorException",
			`{"message":"An error occurred while streaming the response. Retry your request.","originalStatusCode":500,"originalMessage":"Internal server error"}`),
	}
}

// writeFixtures writes every fixture in the format wirefixture reads and -record writes.
func writeFixtures() error {
	all := fixtures()
	maps.Copy(all, reasoningFixtures())
	maps.Copy(all, cacheFixtures())
	for name, exchanges := range all {
		out, err := json.MarshalIndent(exchanges, "", "  ")
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join("testdata", name), append(out, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// mustJSON is s as a JSON string.
func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A structured output is asked for as Converse's structured outputs (outputConfig.textFormat
// json_schema, the schema as a string), the retry's note sent as a user message; the answer is
// the object's JSON as text.
func TestStructuredOutput(t *testing.T) {
	f := serve(t, "output.json", false)
	modeltest.CheckOutput(t, f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: modelID}), model.Usage{InputTokens: 97, OutputTokens: 10})
	if n := len(f.requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}
