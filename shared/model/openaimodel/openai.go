// Package openaimodel adapts OpenAI Chat Completions (and any server that speaks it, through a
// configurable base URL) to the agent loop's streaming model interface, using the official
// openai-go SDK.
package openaimodel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentharness/harness/shared/model/modelblock"
	"github.com/agentharness/harness/shared/wire/egress"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/wire/retryafter"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// Config is the model block this adapter takes.
type Config = modelblock.Hosted

// DefaultBaseURL is where calls go when the config names no baseURL.
const DefaultBaseURL = "https://api.openai.com/v1/"

// provider names this adapter in reasoning events and errors.
const provider = "openai"

// Model calls one OpenAI-compatible chat model.
type Model struct {
	chat      openai.ChatCompletionService
	name      string
	settings  model.Settings
	reasoning *model.Reasoning
	// cacheKey: the calls go to OpenAI's own API with caching left on, so a request's CacheKey
	// is sent as a prompt_cache_key.
	cacheKey bool
	// compatible: the calls go to another server than OpenAI's, which may stream reasoning and
	// want it back.
	compatible bool
}

// New returns a model for cfg. The API key falls back to envKey when the config names none;
// a server that needs no key (a local one) may leave both empty. Calls go to cfg.BaseURL, or
// DefaultBaseURL.
func New(cfg Config, envKey string) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("model.model is required for the openai provider")
	}
	key := cfg.APIKey
	if key == "" {
		key = envKey
	}
	if key == "" && cfg.BaseURL == "" {
		return nil, errors.New("the openai provider needs model.apiKey or OPENAI_API_KEY (or a model.baseURL of a server without keys)")
	}
	base := DefaultBaseURL
	if cfg.BaseURL != "" {
		base = strings.TrimSuffix(cfg.BaseURL, "/") + "/"
	}
	// The config and envKey alone say where calls go and what they carry. openai.NewClient
	// would also apply the process environment (OPENAI_BASE_URL, OPENAI_ORG_ID,
	// OPENAI_PROJECT_ID, OPENAI_CUSTOM_HEADERS, ...), so that a variable set for something else
	// could reroute an agent, with its key, or add headers to its calls; the SDK offers no
	// public way to turn that off. The chat service is built from explicit options instead:
	// the same defaults NewClient has, minus the environment.
	chat := openai.NewChatCompletionService(
		option.WithHTTPClient(egress.ModelClient(cfg.Transport)),
		option.WithBaseURL(base),
		option.WithAPIKey(key),
		// The SDK retries connection errors, 408, 409, 429 and 5xx, honouring Retry-After(-Ms)
		// and giving up when ctx is done; retryafter.WithinDeadline keeps it from starting a wait
		// that would outlast the invocation's deadline.
		option.WithMaxRetries(2),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return retryafter.WithinDeadline(req, next)
		}),
	)
	return &Model{
		chat: chat, name: cfg.Model, settings: cfg.Settings, reasoning: cfg.Reasoning,
		cacheKey: (cfg.Cache == nil || *cfg.Cache) && isOpenAI(base), compatible: !isOpenAI(base),
	}, nil
}

// isOpenAI reports whether base is OpenAI's own API. prompt_cache_key is OpenAI's field: other
// servers that speak Chat Completions may refuse a request that carries it.
func isOpenAI(base string) bool {
	u, err := url.Parse(base)
	return err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}

// promptCacheKey is the prompt_cache_key for a request's CacheKey: a hash, so that the agent's
// name never leaves the harness; 128 bits of it keep agents apart.
func promptCacheKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// Stream runs one streaming Chat Completions call.
func (m *Model) Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		params, err := m.params(req)
		if err != nil {
			yield(model.Event{}, err)
			return
		}
		stream := m.chat.NewStreaming(ctx, params)
		defer stream.Close()

		calls := map[int64]*pendingCall{}
		ids := map[string]bool{}
		finish := model.FinishReason("")
		var usage model.Usage
		// reasoning: a piece of reasoning is streaming, which the next text, tool call or the
		// end of the answer closes.
		reasoning := false
		endReasoning := func() bool {
			if !reasoning {
				return true
			}
			reasoning = false
			return yield(model.Event{Type: model.EventReasoningEnd, Provider: provider}, nil)
		}
		for stream.Next() {
			chunk := stream.Current()
			if chunk.Usage.PromptTokens > 0 || chunk.Usage.CompletionTokens > 0 {
				// prompt_tokens counts the cached ones too; OpenAI's cache writes cost nothing.
				// completion_tokens counts the reasoning ones too.
				u := chunk.Usage
				usage = model.Cached(int(u.PromptTokens), int(u.CompletionTokens), int(u.PromptTokensDetails.CachedTokens), 0).
					WithReasoning(int(u.CompletionTokensDetails.ReasoningTokens))
			}
			for _, choice := range chunk.Choices {
				if text := reasoningText(choice.Delta); text != "" {
					reasoning = true
					if !yield(model.Event{Type: model.EventReasoningDelta, Text: text}, nil) {
						return
					}
				}
				if choice.Delta.Content != "" || len(choice.Delta.ToolCalls) > 0 {
					if !endReasoning() {
						return
					}
				}
				if choice.Delta.Content != "" {
					if !yield(model.Event{Type: model.EventTextDelta, Text: choice.Delta.Content}, nil) {
						return
					}
				}
				for _, tc := range choice.Delta.ToolCalls {
					c, ok := calls[tc.Index]
					if !ok {
						if err := model.CheckToolCallID(ids, tc.ID); err != nil {
							yield(model.Event{}, providerError(err))
							return
						}
						c = &pendingCall{index: tc.Index, id: tc.ID, name: tc.Function.Name}
						calls[tc.Index] = c
						if !yield(model.Event{Type: model.EventToolInputStart, ToolCallID: c.id, ToolName: c.name}, nil) {
							return
						}
					}
					if tc.Function.Arguments != "" {
						c.args.WriteString(tc.Function.Arguments)
						if !yield(model.Event{Type: model.EventToolInputDelta, ToolCallID: c.id, Text: tc.Function.Arguments}, nil) {
							return
						}
					}
				}
				if choice.FinishReason != "" {
					finish = finishReason(choice.FinishReason)
				}
			}
		}
		if err := stream.Err(); err != nil {
			yield(model.Event{}, providerError(err))
			return
		}
		if !endReasoning() {
			return
		}
		ordered := make([]*pendingCall, 0, len(calls))
		for _, c := range calls {
			ordered = append(ordered, c)
		}
		sort.Slice(ordered, func(i, j int) bool { return ordered[i].index < ordered[j].index })
		for _, c := range ordered {
			args := c.args.String()
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			if !yield(model.Event{Type: model.EventToolCall, ToolCallID: c.id, ToolName: c.name, Input: json.RawMessage(args)}, nil) {
				return
			}
		}
		if finish == "" {
			finish = model.FinishOther
		}
		yield(model.Event{Type: model.EventFinish, Finish: finish, Usage: usage}, nil)
	}
}

// reasoningText is the reasoning a chunk's delta carries. OpenAI's own API streams none (its
// reasoning stays hidden); servers that speak Chat Completions send it beside content, as
// reasoning_content (DeepSeek's reasoning model docs; vLLM, Qwen) or as reasoning (OpenRouter,
// Ollama). A server that sends both sends the same text twice: reasoning_content is taken.
func reasoningText(delta openai.ChatCompletionChunkChoiceDelta) string {
	for _, name := range []string{"reasoning_content", "reasoning"} {
		var text string
		if f, ok := delta.JSON.ExtraFields[name]; ok && json.Unmarshal([]byte(f.Raw()), &text) == nil && text != "" {
			return text
		}
	}
	return ""
}

type pendingCall struct {
	index    int64
	id, name string
	args     strings.Builder
}

func finishReason(r string) model.FinishReason {
	switch r {
	case "stop":
		return model.FinishStop
	case "length":
		return model.FinishLength
	case "tool_calls", "function_call":
		return model.FinishToolCalls
	case "content_filter":
		return model.FinishFilter
	default:
		return model.FinishOther
	}
}

func (m *Model) params(req *model.Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{
		Model:         m.name,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if s := m.settings; s.Temperature != nil {
		p.Temperature = openai.Float(*s.Temperature)
	}
	if s := m.settings; s.TopP != nil {
		p.TopP = openai.Float(*s.TopP)
	}
	if s := m.settings; s.MaxTokens != nil {
		// max_completion_tokens, not max_tokens: reasoning models take only it, and it bounds
		// their reasoning tokens too (OpenAI's reasoning models docs).
		p.MaxCompletionTokens = openai.Int(*s.MaxTokens)
	}
	if m.reasoning != nil {
		p.ReasoningEffort = shared.ReasoningEffort(m.reasoning.Level())
	}
	if m.cacheKey && req.CacheKey != "" {
		// OpenAI caches prompts by itself; the key routes an agent's calls to the same cache
		// (OpenAI's prompt caching docs).
		p.PromptCacheKey = openai.String(promptCacheKey(req.CacheKey))
	}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for _, msg := range req.Messages {
		converted, err := messages(msg, m.compatible)
		if err != nil {
			return p, err
		}
		p.Messages = append(p.Messages, converted...)
	}
	for _, t := range req.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
			return p, fmt.Errorf("tool %s: decoding its input schema: %w", t.Name, err)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        t.Name,
			Description: openai.String(t.Description),
			Parameters:  shared.FunctionParameters(schema),
		}))
	}
	if len(req.Output) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(req.Output, &schema); err != nil {
			return p, fmt.Errorf("decoding the output schema: %w", err)
		}
		// Not strict: strict mode takes a subset of JSON schema only, and the loop checks the
		// answer against the whole schema anyway.
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "output", Schema: schema},
		}}
	}
	return p, nil
}

// messages converts one stored message; a tool message becomes one OpenAI message per result.
// For a compatible server, an assistant message that made tool calls carries the reasoning that
// server streamed with them (see below).
func messages(msg model.Message, compatible bool) ([]openai.ChatCompletionMessageParamUnion, error) {
	switch msg.Role {
	case model.RoleUser:
		if !slices.ContainsFunc(msg.Parts, func(p model.Part) bool { return p.Type == model.PartFile }) {
			return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(msg.Text())}, nil
		}
		var parts []openai.ChatCompletionContentPartUnionParam
		for _, p := range msg.Parts {
			switch {
			case p.Type == model.PartText && p.Text != "":
				parts = append(parts, openai.TextContentPart(p.Text))
			case p.Type != model.PartFile:
			case p.Data != nil && slices.Contains(model.ImageTypes, p.MediaType):
				parts = append(parts, openai.TextContentPart(model.FileNote(p)), openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: model.DataURL(p)}))
			case p.Data != nil && p.MediaType == "application/pdf":
				parts = append(parts, openai.TextContentPart(model.FileNote(p)),
					openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{FileData: openai.String(model.DataURL(p)), Filename: openai.String(p.Filename)}))
			default:
				parts = append(parts, openai.TextContentPart(model.FileNote(p)))
			}
		}
		return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(parts)}, nil
	case model.RoleAssistant:
		// OpenAI keeps its reasoning hidden, and takes none back. A compatible server's reasoning
		// goes back only on a message that made tool calls: DeepSeek's thinking mode guide
		// refuses the next request of a tool loop without it, while its reasoning model docs
		// refuse reasoning_content on a plain answer.
		a := openai.ChatCompletionAssistantMessageParam{}
		if text := msg.Text(); text != "" {
			a.Content.OfString = openai.String(text)
		}
		for _, p := range msg.Parts {
			if p.Type != model.PartToolCall {
				continue
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       p.ToolCallID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: p.ToolName, Arguments: string(p.Input)},
				},
			})
		}
		if compatible && len(a.ToolCalls) > 0 {
			var reasoning strings.Builder
			for _, p := range msg.Parts {
				if p.Type == model.PartReasoning && p.SentTo(provider) {
					reasoning.WriteString(p.Text)
				}
			}
			if reasoning.Len() > 0 {
				a.SetExtraFields(map[string]any{"reasoning_content": reasoning.String()})
			}
		}
		return []openai.ChatCompletionMessageParamUnion{{OfAssistant: &a}}, nil
	case model.RoleTool:
		var out []openai.ChatCompletionMessageParamUnion
		for _, p := range msg.Parts {
			if p.Type == model.PartToolResult {
				out = append(out, openai.ToolMessage(string(p.Output), p.ToolCallID))
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("message with unknown role %q", msg.Role)
	}
}

// providerError keeps the status and request id of an API error for the client and the log.
func providerError(err error) error {
	pe := &model.ProviderError{Provider: provider, Err: err}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		pe.Status = apiErr.StatusCode
		if apiErr.Response != nil {
			pe.RequestID = apiErr.Response.Header.Get("x-request-id")
		}
		pe.ContextLength = tooLong(apiErr)
	}
	return pe
}

// tooLong reports whether a call was refused for its length. OpenAI says so by its error code,
// whatever the message. An OpenAI-compatible server (vLLM, LiteLLM) sends no such code, or its
// HTTP status as one, and keeps OpenAI's old wording: "This model's maximum context length is N
// tokens. However, ...".
func tooLong(apiErr *openai.Error) bool {
	if apiErr.Code == "context_length_exceeded" {
		return true
	}
	noCode := apiErr.Code == "" || apiErr.Code == strconv.Itoa(apiErr.StatusCode)
	return apiErr.StatusCode == http.StatusBadRequest && noCode && strings.Contains(apiErr.Message, "maximum context length")
}
