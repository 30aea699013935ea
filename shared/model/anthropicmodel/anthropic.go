// Package anthropicmodel adapts the Anthropic Messages API, streamed, to the agent loop's model
// interface, using the official anthropic-sdk-go.
package anthropicmodel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentharness/harness/shared/model/modelblock"
	"github.com/agentharness/harness/shared/wire/egress"
	"iter"
	"net/http"
	"slices"
	"strings"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/wire/retryafter"
	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

const provider = "anthropic"

// DefaultMaxTokens caps an answer when the config sets no maxTokens: Anthropic requires
// max_tokens on every call.
const DefaultMaxTokens = 4096

// Config is the model block this adapter takes.
type Config = modelblock.Hosted

// Model calls one Anthropic model.
type Model struct {
	client    anthropic.Client
	name      string
	settings  model.Settings
	reasoning *model.Reasoning
	cache     bool
}

// New returns a model for cfg. The API key falls back to envKey when the config names none.
func New(cfg Config, envKey string) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("model.model is required for the anthropic provider")
	}
	key := cfg.APIKey
	if key == "" {
		key = envKey
	}
	if key == "" {
		return nil, errors.New("the anthropic provider needs model.apiKey or ANTHROPIC_API_KEY")
	}
	opts := []option.RequestOption{
		// The config alone says where calls go and with which key; by default the SDK would also
		// pick up ANTHROPIC_BASE_URL, auth tokens and profile files from the environment.
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(key),
		// The SDK retries connection errors, 408, 409, 429 and 5xx, honouring retry-after and
		// giving up when ctx is done; retryafter.WithinDeadline keeps it from starting a wait that
		// would outlast the invocation's deadline.
		option.WithMaxRetries(2),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return retryafter.WithinDeadline(req, next)
		}),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.Transport != nil {
		opts = append(opts, option.WithHTTPClient(egress.ModelClient(cfg.Transport)))
	}
	return &Model{
		client: anthropic.NewClient(opts...), name: cfg.Model, settings: cfg.Settings,
		reasoning: cfg.Reasoning,
		// Prompt caching is on unless the block turns it off: a cache read costs a tenth of
		// an input token, and a write a quarter more (Anthropic's prompt caching docs).
		cache: cfg.Cache == nil || *cfg.Cache,
	}, nil
}

// Stream runs one streaming Messages call. Events come in the order the model produced them;
// a tool call is complete when its content block stops.
func (m *Model) Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		params, err := m.params(req)
		if err != nil {
			yield(model.Event{}, err)
			return
		}
		// The response, once there is one, gives a failure part-way through the stream its
		// request id; API errors carry their own.
		var res *http.Response
		stream := m.client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&res))
		defer stream.Close()

		calls := map[int64]*pendingCall{}
		// thinking holds the signatures of the thinking blocks still streaming, by index.
		thinking := map[int64]*strings.Builder{}
		ids := map[string]bool{}
		finish := model.FinishOther
		var input, cacheRead, cacheWrite, output int
		stopped := false
		for stream.Next() {
			ev := stream.Current()
			var out model.Event
			switch ev.Type {
			case "message_start":
				// input_tokens leaves out what the prompt cache read and wrote.
				u := ev.Message.Usage
				input, cacheRead, cacheWrite = int(u.InputTokens), int(u.CacheReadInputTokens), int(u.CacheCreationInputTokens)
			case "content_block_start":
				switch b := ev.ContentBlock; b.Type {
				case "text":
					out = model.Event{Type: model.EventTextDelta, Text: b.Text}
				case "thinking":
					// A thinking block opens empty; its text comes in thinking_delta events and
					// its signature in a signature_delta just before it stops (Anthropic's
					// extended thinking docs).
					thinking[ev.Index] = &strings.Builder{}
					out = model.Event{Type: model.EventReasoningDelta, Text: b.Thinking}
				case "redacted_thinking":
					// Reasoning the safety systems flagged comes whole and encrypted, to be sent
					// back as it came.
					out = model.Event{Type: model.EventReasoningEnd, Redacted: b.Data, Provider: provider}
				case "tool_use":
					if err := model.CheckToolCallID(ids, b.ID); err != nil {
						yield(model.Event{}, providerError(err, res))
						return
					}
					calls[ev.Index] = &pendingCall{id: b.ID, name: b.Name}
					out = model.Event{Type: model.EventToolInputStart, ToolCallID: b.ID, ToolName: b.Name}
				}
			case "content_block_delta":
				switch ev.Delta.Type {
				case "text_delta":
					out = model.Event{Type: model.EventTextDelta, Text: ev.Delta.Text}
				case "thinking_delta":
					out = model.Event{Type: model.EventReasoningDelta, Text: ev.Delta.Thinking}
				case "signature_delta":
					if sig := thinking[ev.Index]; sig != nil {
						sig.WriteString(ev.Delta.Signature)
					}
				case "input_json_delta":
					if c := calls[ev.Index]; c != nil && ev.Delta.PartialJSON != "" {
						c.input.WriteString(ev.Delta.PartialJSON)
						out = model.Event{Type: model.EventToolInputDelta, ToolCallID: c.id, Text: ev.Delta.PartialJSON}
					}
				}
			case "content_block_stop":
				if sig := thinking[ev.Index]; sig != nil {
					delete(thinking, ev.Index)
					out = model.Event{Type: model.EventReasoningEnd, Signature: sig.String(), Provider: provider}
				}
				if c := calls[ev.Index]; c != nil {
					delete(calls, ev.Index)
					input := c.input.String()
					if strings.TrimSpace(input) == "" {
						input = "{}"
					}
					out = model.Event{Type: model.EventToolCall, ToolCallID: c.id, ToolName: c.name, Input: json.RawMessage(input)}
				}
			case "message_delta":
				if ev.Delta.StopReason != "" {
					finish = finishReason(ev.Delta.StopReason)
				}
				output = int(ev.Usage.OutputTokens)
			case "message_stop":
				stopped = true
			}
			if out.Type == 0 || ((out.Type == model.EventTextDelta || out.Type == model.EventReasoningDelta) && out.Text == "") {
				continue
			}
			if !yield(out, nil) {
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(model.Event{}, providerError(err, res))
			return
		}
		// A connection cut between events ends the body cleanly; only message_stop says the
		// answer is whole.
		if !stopped {
			yield(model.Event{}, providerError(errors.New("the event stream ended before message_stop"), res))
			return
		}
		// output_tokens counts the thinking with the answer, and Anthropic reports no split
		// (and bills the full thinking, not the summary shown), so the usage gives none.
		usage := model.Cached(input+cacheRead+cacheWrite, output, cacheRead, cacheWrite)
		yield(model.Event{Type: model.EventFinish, Finish: finish, Usage: usage}, nil)
	}
}

type pendingCall struct {
	id, name string
	input    strings.Builder
}

func finishReason(r anthropic.StopReason) model.FinishReason {
	switch r {
	case anthropic.StopReasonEndTurn, anthropic.StopReasonStopSequence:
		return model.FinishStop
	case anthropic.StopReasonMaxTokens:
		return model.FinishLength
	case anthropic.StopReasonToolUse:
		return model.FinishToolCalls
	case anthropic.StopReasonRefusal:
		return model.FinishFilter
	default:
		return model.FinishOther
	}
}

func (m *Model) params(req *model.Request) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(m.name), MaxTokens: DefaultMaxTokens}
	if r := m.reasoning; r != nil {
		// Thinking counts toward max_tokens, which must exceed the budget (Anthropic's extended
		// thinking docs): without a maxTokens set, the answer keeps the default on top of it.
		budget := int64(r.Budget())
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(budget)
		p.MaxTokens = budget + DefaultMaxTokens
	}
	if s := m.settings; s.MaxTokens != nil {
		p.MaxTokens = *s.MaxTokens
	}
	if s := m.settings; s.Temperature != nil {
		p.Temperature = anthropic.Float(*s.Temperature)
	}
	if s := m.settings; s.TopP != nil {
		p.TopP = anthropic.Float(*s.TopP)
	}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return p, err
	}
	p.Messages = msgs
	for _, t := range req.Tools {
		if t.ProviderTool != "" {
			return p, fmt.Errorf("tool %s: the anthropic provider does not support the provider tool %q", t.Name, t.ProviderTool)
		}
		schema, err := inputSchema(t.InputSchema)
		if err != nil {
			return p, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	if len(req.Output) > 0 {
		// JSON outputs: the answer's text is the object, constrained to the schema.
		var schema map[string]any
		if err := json.Unmarshal(req.Output, &schema); err != nil {
			return p, fmt.Errorf("decoding the output schema: %w", err)
		}
		p.OutputConfig.Format = anthropic.JSONOutputFormatParam{Schema: schema}
	}
	if m.cache {
		cacheBreakpoints(&p)
	}
	return p, nil
}

// cacheBreakpoints marks the ends of the prompt's stable parts for the prompt cache: the
// system prompt, the tools, and the conversation so far, whose prefix the next step of the
// loop sends again and reads back from the cache. Three of the four breakpoints Anthropic
// allows; one on a prompt shorter than the model's least cacheable length is ignored
// (Anthropic's prompt caching docs).
func cacheBreakpoints(p *anthropic.MessageNewParams) {
	mark := anthropic.NewCacheControlEphemeralParam()
	if n := len(p.System); n > 0 {
		p.System[n-1].CacheControl = mark
	}
	if n := len(p.Tools); n > 0 {
		if cc := p.Tools[n-1].GetCacheControl(); cc != nil {
			*cc = mark
		}
	}
	if n := len(p.Messages); n > 0 {
		// Thinking blocks take no cache_control of their own; the last block that does closes
		// the prefix.
		blocks := p.Messages[n-1].Content
		for i := len(blocks) - 1; i >= 0; i-- {
			if cc := blocks[i].GetCacheControl(); cc != nil {
				*cc = mark
				break
			}
		}
	}
}

// messages converts a conversation. Anthropic wants user and assistant turns to alternate and
// takes tool results in a user turn, so consecutive messages of one side join a single turn.
func messages(msgs []model.Message) ([]anthropic.MessageParam, error) {
	var out []anthropic.MessageParam
	for _, msg := range msgs {
		var role anthropic.MessageParamRole
		var blocks []anthropic.ContentBlockParamUnion
		switch msg.Role {
		case model.RoleUser:
			role = anthropic.MessageParamRoleUser
			for _, p := range msg.Parts {
				switch {
				// Anthropic rejects empty text blocks.
				case p.Type == model.PartText && p.Text != "":
					blocks = append(blocks, anthropic.NewTextBlock(p.Text))
				case p.Type != model.PartFile:
				case p.Data != nil && slices.Contains(model.ImageTypes, p.MediaType):
					blocks = append(blocks, anthropic.NewTextBlock(model.FileNote(p)), anthropic.NewImageBlockBase64(p.MediaType, base64.StdEncoding.EncodeToString(p.Data)))
				case p.Data != nil && p.MediaType == "application/pdf":
					blocks = append(blocks, anthropic.NewTextBlock(model.FileNote(p)), anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: base64.StdEncoding.EncodeToString(p.Data)}))
				case p.Data != nil && p.MediaType == "text/plain":
					blocks = append(blocks, anthropic.NewTextBlock(model.FileNote(p)), anthropic.NewDocumentBlock(anthropic.PlainTextSourceParam{Data: string(p.Data)}))
				default:
					blocks = append(blocks, anthropic.NewTextBlock(model.FileNote(p)))
				}
			}
		case model.RoleAssistant:
			role = anthropic.MessageParamRoleAssistant
			// Thinking goes back first and unmodified, its signature with it, so tool use with
			// extended thinking goes on across steps (Anthropic's extended thinking docs);
			// another provider's reasoning cannot be read here and is left out.
			for _, p := range msg.Parts {
				switch {
				case p.Type != model.PartReasoning || !p.SentTo(provider):
				// A thinking block without its signature would be refused.
				case p.Redacted == "" && p.Signature == "":
				case p.Redacted != "":
					blocks = append(blocks, anthropic.NewRedactedThinkingBlock(p.Redacted))
				default:
					blocks = append(blocks, anthropic.NewThinkingBlock(p.Signature, p.Text))
				}
			}
			for _, p := range msg.Parts {
				switch {
				case p.Type == model.PartText && p.Text != "":
					blocks = append(blocks, anthropic.NewTextBlock(p.Text))
				case p.Type == model.PartToolCall:
					blocks = append(blocks, anthropic.NewToolUseBlock(p.ToolCallID, toolInput(p.Input), p.ToolName))
				}
			}
		case model.RoleTool:
			role = anthropic.MessageParamRoleUser
			for _, p := range msg.Parts {
				if p.Type != model.PartToolResult {
					continue
				}
				r := anthropic.ToolResultBlockParam{ToolUseID: p.ToolCallID}
				if len(p.Output) > 0 {
					r.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: string(p.Output)}}}
				}
				if p.IsError {
					r.IsError = anthropic.Bool(true)
				}
				blocks = append(blocks, anthropic.ContentBlockParamUnion{OfToolResult: &r})
			}
		default:
			return nil, fmt.Errorf("message with unknown role %q", msg.Role)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, anthropic.MessageParam{Role: role, Content: blocks})
	}
	return out, nil
}

// toolInput returns a stored tool call's input as Anthropic takes it: a JSON object. The loop
// keeps unparseable arguments as a JSON string, which Anthropic would reject on every later
// call of the conversation; the tool result already told the model they were unusable.
func toolInput(input json.RawMessage) json.RawMessage {
	trimmed := strings.TrimSpace(string(input))
	if !strings.HasPrefix(trimmed, "{") || !json.Valid(input) {
		return json.RawMessage("{}")
	}
	return input
}

// inputSchema converts a tool's JSON schema, keeping every keyword it has.
func inputSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var known struct {
		Type       string   `json:"type"`
		Properties any      `json:"properties"`
		Required   []string `json:"required"`
	}
	var extra map[string]any
	if err := json.Unmarshal(raw, &known); err != nil {
		return anthropic.ToolInputSchemaParam{}, fmt.Errorf("decoding its input schema: %w", err)
	}
	if err := json.Unmarshal(raw, &extra); err != nil {
		return anthropic.ToolInputSchemaParam{}, fmt.Errorf("decoding its input schema: %w", err)
	}
	if known.Type != "" && known.Type != "object" {
		return anthropic.ToolInputSchemaParam{}, fmt.Errorf("its input schema has type %q; Anthropic takes only objects", known.Type)
	}
	delete(extra, "type")
	delete(extra, "properties")
	delete(extra, "required")
	return anthropic.ToolInputSchemaParam{Properties: known.Properties, Required: known.Required, ExtraFields: extra}, nil
}

// errorStatus is the HTTP status Anthropic documents for each error type. An error event
// inside a stream arrives after a 200, so its type is what says which failure it is (an
// overloaded_error mid-stream is the 529 a call would get before streaming).
var errorStatus = map[anthropic.ErrorType]int{
	anthropic.ErrorTypeInvalidRequestError: http.StatusBadRequest,
	anthropic.ErrorTypeAuthenticationError: http.StatusUnauthorized,
	anthropic.ErrorTypeBillingError:        http.StatusPaymentRequired,
	anthropic.ErrorTypePermissionError:     http.StatusForbidden,
	anthropic.ErrorTypeNotFoundError:       http.StatusNotFound,
	"request_too_large":                    http.StatusRequestEntityTooLarge,
	anthropic.ErrorTypeRateLimitError:      http.StatusTooManyRequests,
	anthropic.ErrorTypeAPIError:            http.StatusInternalServerError,
	anthropic.ErrorTypeTimeoutError:        http.StatusGatewayTimeout,
	anthropic.ErrorTypeOverloadedError:     529,
}

// providerError keeps the status and request id of a failed call for the client and the log.
func providerError(err error, res *http.Response) error {
	pe := &model.ProviderError{Provider: provider, Err: err}
	if res != nil {
		pe.RequestID = res.Header.Get("request-id")
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		pe.Status = apiErr.StatusCode
		if apiErr.RequestID != "" {
			pe.RequestID = apiErr.RequestID
		}
		if s, ok := errorStatus[apiErr.Type()]; ok && pe.Status < 400 {
			pe.Status = s
		}
		pe.ContextLength = tooLong(apiErr)
	}
	return pe
}

// tooLong reports whether a call was refused for its length. Anthropic has no error type of
// its own for that: it is an invalid_request_error whose message begins "prompt is too long"
// ("prompt is too long: 208656 tokens > 200000 maximum").
func tooLong(apiErr *anthropic.Error) bool {
	if apiErr.Type() != anthropic.ErrorTypeInvalidRequestError {
		return false
	}
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	return json.Unmarshal([]byte(apiErr.RawJSON()), &body) == nil && strings.HasPrefix(body.Error.Message, "prompt is too long")
}
