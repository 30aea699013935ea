// Package bedrockmodel adapts Amazon Bedrock's Converse API (ConverseStream) to the agent loop's
// streaming model interface, using aws-sdk-go-v2. It signs with the IAM credentials of the
// aws.Config it is given, which on Lambda are the function's role: no API key is involved.
package bedrockmodel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentharness/harness/shared/model/modelblock"
	"io"
	"iter"
	"math"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/agentharness/harness/shared/model"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithydocument "github.com/aws/smithy-go/document"
)

// Config is the model block this adapter takes.
type Config = modelblock.Bedrock

// Model calls one Bedrock model through ConverseStream.
type Model struct {
	client    *bedrockruntime.Client
	id        string
	inference *types.InferenceConfiguration
	// thinking is the additionalModelRequestFields that turn on Claude's extended thinking;
	// nil without reasoning.
	thinking map[string]any
	// cache puts cache points after the system prompt and at the end of the conversation, and
	// cacheTools after the tools too.
	cache, cacheTools bool
}

// provider names this adapter on reasoning parts and errors.
const provider = "bedrock"

// defaultAnswerTokens is the answer's share of maxTokens when reasoning is on and the block
// sets no maxTokens: Claude's thinking counts toward maxTokens, which must exceed its budget
// (Bedrock's extended thinking docs), so the budget alone would leave no room for the answer.
const defaultAnswerTokens = 4096

// New returns a model for cfg that calls Bedrock with awsCfg's credentials. optFns adjust the
// client after the adapter's own options, so a caller (or a test) may replace the endpoint or
// the retryer.
func New(cfg Config, awsCfg aws.Config, optFns ...func(*bedrockruntime.Options)) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("model.model is required for the bedrock provider")
	}
	inference, err := inferenceConfig(cfg.Settings, cfg.Reasoning)
	if err != nil {
		return nil, err
	}
	var thinking map[string]any
	if r := cfg.Reasoning; r != nil {
		// Claude's extended thinking through Converse (Bedrock's extended thinking docs): the
		// model's own request field, with a budget of tokens.
		thinking = map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": r.Budget()}}
	}
	// Prompt caching is on by default for the models that take cache points (Bedrock's prompt
	// caching docs: Claude and Nova); "cache" forces it either way.
	cache := modelblock.BedrockCaches(cfg.Model)
	if cfg.Cache != nil {
		cache = *cfg.Cache
	}
	opts := append([]func(*bedrockruntime.Options){func(o *bedrockruntime.Options) {
		if cfg.Region != "" {
			o.Region = cfg.Region
		}
		// The standard retryer already retries throttling and 5xx with jittered backoff and
		// stops when ctx ends; pinning three attempts keeps a throttled call inside a Lambda
		// invocation's deadline whatever AWS_MAX_ATTEMPTS or the shared config say, and Stream
		// wraps it so that it never starts a wait the deadline leaves no time for.
		o.RetryMaxAttempts = 3
	}}, optFns...)
	client := bedrockruntime.NewFromConfig(awsCfg, opts...)
	if client.Options().Region == "" {
		return nil, errors.New("the bedrock provider needs a region: set model.region or AWS_REGION")
	}
	return &Model{
		client: client, id: cfg.Model, inference: inference, thinking: thinking, cache: cache,
		// Nova caches the system prompt and the messages but refuses a cache point among the
		// tools (Bedrock's prompt caching docs); its message cache point covers them anyway.
		cacheTools: cache && !strings.Contains(cfg.Model, "amazon.nova"),
	}, nil
}

func inferenceConfig(s model.Settings, r *model.Reasoning) (*types.InferenceConfiguration, error) {
	if r != nil && s.MaxTokens == nil {
		n := int64(r.Budget() + defaultAnswerTokens)
		s.MaxTokens = &n
	}
	if s.Temperature == nil && s.TopP == nil && s.MaxTokens == nil {
		return nil, nil
	}
	c := &types.InferenceConfiguration{}
	if s.Temperature != nil {
		c.Temperature = aws.Float32(float32(*s.Temperature))
	}
	if s.TopP != nil {
		c.TopP = aws.Float32(float32(*s.TopP))
	}
	if s.MaxTokens != nil {
		if *s.MaxTokens < 1 || *s.MaxTokens > math.MaxInt32 {
			return nil, fmt.Errorf("model.settings.maxTokens %d is out of range for the bedrock provider", *s.MaxTokens)
		}
		c.MaxTokens = aws.Int32(int32(*s.MaxTokens))
	}
	return c, nil
}

// Stream runs one ConverseStream call.
func (m *Model) Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		in, err := m.input(req)
		if err != nil {
			yield(model.Event{}, err)
			return
		}
		// A client of its own for each stream: the SDK's event stream decoder keeps its buffer in
		// the client's protocol, so two streams of one client (async prompt tools on the agent's
		// model, or a stream still closing beside the next) would decode into the same buffer.
		client := bedrockruntime.New(m.client.Options())
		out, err := client.ConverseStream(ctx, in, func(o *bedrockruntime.Options) {
			o.Retryer = withinDeadline(ctx, o.Retryer)
		})
		if err != nil {
			yield(model.Event{}, providerError(err, ""))
			return
		}
		// Exceptions inside the stream arrive without the HTTP response; the request id that
		// answered is on the output's metadata.
		requestID, _ := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata)
		stream := out.GetStream()
		defer stream.Close()

		calls := map[int32]*pendingCall{}
		reasoning := map[int32]*pendingReasoning{}
		ids := map[string]bool{}
		finish := model.FinishReason("")
		var usage model.Usage
		for ev := range stream.Events() {
			var e model.Event
			switch ev := ev.(type) {
			case *types.ConverseStreamOutputMemberContentBlockStart:
				start, ok := ev.Value.Start.(*types.ContentBlockStartMemberToolUse)
				if !ok {
					continue
				}
				c := &pendingCall{id: aws.ToString(start.Value.ToolUseId), name: aws.ToString(start.Value.Name)}
				if err := model.CheckToolCallID(ids, c.id); err != nil {
					yield(model.Event{}, providerError(err, requestID))
					return
				}
				calls[aws.ToInt32(ev.Value.ContentBlockIndex)] = c
				e = model.Event{Type: model.EventToolInputStart, ToolCallID: c.id, ToolName: c.name}
			case *types.ConverseStreamOutputMemberContentBlockDelta:
				switch d := ev.Value.Delta.(type) {
				case *types.ContentBlockDeltaMemberText:
					if d.Value == "" {
						continue
					}
					e = model.Event{Type: model.EventTextDelta, Text: d.Value}
				case *types.ContentBlockDeltaMemberReasoningContent:
					index := aws.ToInt32(ev.Value.ContentBlockIndex)
					r := reasoning[index]
					if r == nil {
						r = &pendingReasoning{}
						reasoning[index] = r
					}
					// A reasoning block streams its text, then its signature; redacted reasoning
					// (Claude's encrypted thinking) is a block of its own that streams only bytes.
					switch d := d.Value.(type) {
					case *types.ReasoningContentBlockDeltaMemberText:
						if d.Value == "" {
							continue
						}
						r.text = true
						e = model.Event{Type: model.EventReasoningDelta, Text: d.Value}
					case *types.ReasoningContentBlockDeltaMemberSignature:
						r.signature += d.Value
						continue
					case *types.ReasoningContentBlockDeltaMemberRedactedContent:
						r.redacted = append(r.redacted, d.Value...)
						continue
					default:
						continue
					}
				case *types.ContentBlockDeltaMemberToolUse:
					c := calls[aws.ToInt32(ev.Value.ContentBlockIndex)]
					piece := aws.ToString(d.Value.Input)
					if c == nil || piece == "" {
						continue
					}
					c.input.WriteString(piece)
					e = model.Event{Type: model.EventToolInputDelta, ToolCallID: c.id, Text: piece}
				default:
					continue
				}
			case *types.ConverseStreamOutputMemberContentBlockStop:
				index := aws.ToInt32(ev.Value.ContentBlockIndex)
				if r, ok := reasoning[index]; ok {
					// Every reasoning block ends with its piece, signed or not, so the loop keeps
					// it as this provider's; a block that streamed nothing is no piece.
					delete(reasoning, index)
					if !r.text && r.signature == "" && len(r.redacted) == 0 {
						continue
					}
					e = model.Event{Type: model.EventReasoningEnd, Signature: r.signature, Provider: provider}
					if len(r.redacted) > 0 {
						e.Redacted = base64.StdEncoding.EncodeToString(r.redacted)
					}
					break
				}
				c, ok := calls[index]
				if !ok {
					continue
				}
				delete(calls, index)
				input := c.input.String()
				if strings.TrimSpace(input) == "" {
					input = "{}"
				}
				e = model.Event{Type: model.EventToolCall, ToolCallID: c.id, ToolName: c.name, Input: json.RawMessage(input)}
			case *types.ConverseStreamOutputMemberMessageStop:
				finish = finishReason(ev.Value.StopReason)
				continue
			case *types.ConverseStreamOutputMemberMetadata:
				if u := ev.Value.Usage; u != nil {
					// inputTokens leaves out what the cache points read and wrote. Converse's
					// usage does not split reasoning from the answer: outputTokens counts both.
					read, write := int(aws.ToInt32(u.CacheReadInputTokens)), int(aws.ToInt32(u.CacheWriteInputTokens))
					usage = model.Cached(int(aws.ToInt32(u.InputTokens))+read+write, int(aws.ToInt32(u.OutputTokens)), read, write)
				}
				continue
			default:
				continue
			}
			if !yield(e, nil) {
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(model.Event{}, providerError(err, requestID))
			return
		}
		if finish == "" {
			finish = model.FinishOther
		}
		yield(model.Event{Type: model.EventFinish, Finish: finish, Usage: usage}, nil)
	}
}

type pendingCall struct {
	id, name string
	input    strings.Builder
}

// pendingReasoning is a reasoning block until its contentBlockStop: whether it streamed text,
// its signature, or the bytes of its redacted content.
type pendingReasoning struct {
	text      bool
	signature string
	redacted  []byte
}

func finishReason(r types.StopReason) model.FinishReason {
	switch r {
	case types.StopReasonEndTurn, types.StopReasonStopSequence:
		return model.FinishStop
	case types.StopReasonToolUse:
		return model.FinishToolCalls
	case types.StopReasonMaxTokens:
		return model.FinishLength
	case types.StopReasonGuardrailIntervened, types.StopReasonContentFiltered:
		return model.FinishFilter
	default:
		return model.FinishOther
	}
}

func (m *Model) input(req *model.Request) (*bedrockruntime.ConverseStreamInput, error) {
	in := &bedrockruntime.ConverseStreamInput{ModelId: aws.String(m.id), InferenceConfig: m.inference}
	if m.thinking != nil {
		in.AdditionalModelRequestFields = document.NewLazyDocument(m.thinking)
	}
	// A cache point caches the prompt up to it (Bedrock's prompt caching docs): after the
	// system prompt and after the tools, which stay the same across an agent's calls, and at the
	// end of the conversation, whose prefix the next call repeats.
	cachePoint := types.CachePointBlock{Type: types.CachePointTypeDefault}
	if req.System != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
		if m.cache {
			in.System = append(in.System, &types.SystemContentBlockMemberCachePoint{Value: cachePoint})
		}
	}
	for _, msg := range req.Messages {
		role, content, err := convert(msg)
		if err != nil {
			return nil, err
		}
		if len(content) == 0 {
			continue
		}
		// Bedrock requires user and assistant turns to alternate, and tool results travel as a
		// user turn: a run of same-role messages becomes one.
		if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == role {
			in.Messages[n-1].Content = append(in.Messages[n-1].Content, content...)
			continue
		}
		in.Messages = append(in.Messages, types.Message{Role: role, Content: content})
	}
	if n := len(in.Messages); m.cache && n > 0 {
		in.Messages[n-1].Content = append(in.Messages[n-1].Content, &types.ContentBlockMemberCachePoint{Value: cachePoint})
	}
	var tools []types.Tool
	for _, t := range req.Tools {
		if t.ProviderTool != "" {
			return nil, fmt.Errorf("tool %s: the bedrock provider does not support the provider-defined tool %q", t.Name, t.ProviderTool)
		}
		schema, err := decodeDocument(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: decoding its input schema: %w", t.Name, err)
		}
		spec := types.ToolSpecification{
			Name:        aws.String(t.Name),
			InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)},
		}
		if t.Description != "" {
			spec.Description = aws.String(t.Description)
		}
		tools = append(tools, &types.ToolMemberToolSpec{Value: spec})
	}
	if len(tools) > 0 {
		if m.cacheTools {
			tools = append(tools, &types.ToolMemberCachePoint{Value: cachePoint})
		}
		in.ToolConfig = &types.ToolConfiguration{Tools: tools}
	}
	if len(req.Output) > 0 {
		// Structured outputs: the answer's text is the object, constrained to the schema,
		// which Converse takes as a string.
		in.OutputConfig = &types.OutputConfig{TextFormat: &types.OutputFormat{
			Type:      types.OutputFormatTypeJsonSchema,
			Structure: &types.OutputFormatStructureMemberJsonSchema{Value: types.JsonSchemaDefinition{Name: aws.String("output"), Schema: aws.String(string(req.Output))}},
		}}
	}
	return in, nil
}

// fileBlock is a file as Converse takes it: an image or a document of a format it reads; nil
// for any other, which the model knows only by its note.
func fileBlock(p model.Part) types.ContentBlock {
	if p.Data == nil {
		return nil
	}
	images := map[string]types.ImageFormat{"image/png": types.ImageFormatPng, "image/jpeg": types.ImageFormatJpeg, "image/gif": types.ImageFormatGif, "image/webp": types.ImageFormatWebp}
	if f, ok := images[p.MediaType]; ok {
		return &types.ContentBlockMemberImage{Value: types.ImageBlock{Format: f, Source: &types.ImageSourceMemberBytes{Value: p.Data}}}
	}
	docs := map[string]types.DocumentFormat{"application/pdf": types.DocumentFormatPdf, "text/plain": types.DocumentFormatTxt, "text/csv": types.DocumentFormatCsv, "text/markdown": types.DocumentFormatMd, "text/html": types.DocumentFormatHtml}
	if f, ok := docs[p.MediaType]; ok {
		// Converse allows letters, digits, spaces, hyphens, parentheses and brackets in a name.
		name := strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(" -()[]", r) {
				return r
			}
			return '-'
		}, cmp.Or(strings.TrimSuffix(p.Filename, path.Ext(p.Filename)), p.Attachment))
		return &types.ContentBlockMemberDocument{Value: types.DocumentBlock{Format: f, Name: aws.String(name), Source: &types.DocumentSourceMemberBytes{Value: p.Data}}}
	}
	return nil
}

// convert translates one stored message into a Bedrock role and content blocks.
func convert(msg model.Message) (types.ConversationRole, []types.ContentBlock, error) {
	var content []types.ContentBlock
	switch msg.Role {
	case model.RoleUser:
		for _, p := range msg.Parts {
			switch {
			// Bedrock rejects blank text blocks.
			case p.Type == model.PartText && p.Text != "":
				content = append(content, &types.ContentBlockMemberText{Value: p.Text})
			case p.Type == model.PartFile:
				content = append(content, &types.ContentBlockMemberText{Value: model.FileNote(p)})
				if b := fileBlock(p); b != nil {
					content = append(content, b)
				}
			}
		}
		return types.ConversationRoleUser, content, nil
	case model.RoleAssistant:
		var reasoning []types.ContentBlock
		for _, p := range msg.Parts {
			switch {
			case p.Type == model.PartReasoning && p.SentTo(provider):
				b, err := reasoningBlock(p)
				if err != nil {
					return "", nil, err
				}
				if b != nil {
					reasoning = append(reasoning, b)
				}
			case p.Type == model.PartText && p.Text != "":
				content = append(content, &types.ContentBlockMemberText{Value: p.Text})
			case p.Type == model.PartToolCall:
				raw := p.Input
				if len(bytes.TrimSpace(raw)) == 0 {
					raw = json.RawMessage(`{}`)
				}
				input, err := decodeDocument(raw)
				if err != nil {
					return "", nil, fmt.Errorf("tool call %s: decoding its input: %w", p.ToolCallID, err)
				}
				content = append(content, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
					ToolUseId: aws.String(p.ToolCallID),
					Name:      aws.String(p.ToolName),
					Input:     document.NewLazyDocument(input),
				}})
			}
		}
		// With thinking on, an assistant turn that used a tool must begin with its reasoning
		// blocks, signatures intact (Bedrock's extended thinking docs).
		return types.ConversationRoleAssistant, append(reasoning, content...), nil
	case model.RoleTool:
		for _, p := range msg.Parts {
			if p.Type != model.PartToolResult {
				continue
			}
			result := types.ToolResultBlock{ToolUseId: aws.String(p.ToolCallID), Content: []types.ToolResultContentBlock{resultContent(p.Output)}}
			if p.IsError {
				result.Status = types.ToolResultStatusError
			}
			content = append(content, &types.ContentBlockMemberToolResult{Value: result})
		}
		return types.ConversationRoleUser, content, nil
	default:
		return "", nil, fmt.Errorf("message with unknown role %q", msg.Role)
	}
}

// reasoningBlock is a reasoning part of this provider as Converse takes it back: its text with
// its signature, or its redacted content's bytes; nil for a part with neither.
func reasoningBlock(p model.Part) (types.ContentBlock, error) {
	if p.Redacted != "" {
		b, err := base64.StdEncoding.DecodeString(p.Redacted)
		if err != nil {
			return nil, fmt.Errorf("redacted reasoning: %w", err)
		}
		return &types.ContentBlockMemberReasoningContent{Value: &types.ReasoningContentBlockMemberRedactedContent{Value: b}}, nil
	}
	if p.Text == "" {
		return nil, nil
	}
	text := types.ReasoningTextBlock{Text: aws.String(p.Text)}
	if p.Signature != "" {
		text.Signature = aws.String(p.Signature)
	}
	return &types.ContentBlockMemberReasoningContent{Value: &types.ReasoningContentBlockMemberReasoningText{Value: text}}, nil
}

// resultContent sends an object as json content, which Bedrock accepts only for objects; a
// JSON string goes as its text and anything else as its JSON text.
func resultContent(out json.RawMessage) types.ToolResultContentBlock {
	trimmed := bytes.TrimSpace(out)
	if bytes.HasPrefix(trimmed, []byte("{")) {
		if v, err := decodeDocument(trimmed); err == nil {
			return &types.ToolResultContentBlockMemberJson{Value: document.NewLazyDocument(v)}
		}
	}
	var s string
	if err := json.Unmarshal(trimmed, &s); err == nil {
		return &types.ToolResultContentBlockMemberText{Value: s}
	}
	return &types.ToolResultContentBlockMemberText{Value: string(out)}
}

// decodeDocument decodes JSON for a Bedrock document. Numbers stay document.Numbers, written
// back verbatim: float64 would round large integers, and json.Number would be sent as a string.
func decodeDocument(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return documentNumbers(v), nil
}

func documentNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		return smithydocument.Number(x)
	case map[string]any:
		for k, e := range x {
			x[k] = documentNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = documentNumbers(e)
		}
	}
	return v
}

// streamExceptionStatus holds the HTTP statuses Bedrock's API model assigns the exceptions a
// stream can carry after its 200 response, so a throttled stream reads as "rate limited"
// rather than "could not be reached".
var streamExceptionStatus = map[string]int{
	"ValidationException":         400,
	"ModelStreamErrorException":   424,
	"ThrottlingException":         429,
	"InternalServerException":     500,
	"ServiceUnavailableException": 503,
}

// providerError keeps the status and request id of a failed call for the client and the log.
// requestID is the id of the response a stream exception arrived on.
func providerError(err error, requestID string) error {
	pe := &model.ProviderError{Provider: provider, RequestID: requestID, Err: err}
	var respErr *awshttp.ResponseError
	var apiErr smithy.APIError
	switch {
	case errors.As(err, &respErr):
		pe.Status = respErr.HTTPStatusCode()
		if respErr.RequestID != "" {
			pe.RequestID = respErr.RequestID
		}
	case errors.As(err, &apiErr):
		pe.Status = streamExceptionStatus[apiErr.ErrorCode()]
	}
	pe.ContextLength = errors.As(err, &apiErr) && tooLong(apiErr)
	return pe
}

// tooLongWording is how Bedrock says a request is longer than its model's context window, in
// the words its models use: "Input is too long for requested model.", "Too many input tokens.
// Max input tokens: N, request input token count: M", and Anthropic's own "prompt is too long:
// N tokens > M maximum", which Claude's errors pass on ("The model returned the following
// errors: ...").
var tooLongWording = []string{"input is too long", "too many input tokens", "prompt is too long"}

// tooLong reports whether a call was refused for its length. Bedrock has no exception of its
// own for that: it is a ValidationException, told apart from the others by its message.
func tooLong(apiErr smithy.APIError) bool {
	if apiErr.ErrorCode() != "ValidationException" {
		return false
	}
	msg := strings.ToLower(apiErr.ErrorMessage())
	return slices.ContainsFunc(tooLongWording, func(w string) bool { return strings.Contains(msg, w) })
}
