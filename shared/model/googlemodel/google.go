// Package googlemodel adapts Gemini, through the Gemini API (not Vertex AI), to the agent loop's
// streaming model interface, using the official google.golang.org/genai SDK. It also runs
// Gemini's provider-defined Google Search grounding and reports the pages it cites as sources.
// A block's reasoning asks for thought summaries, which stream as reasoning; thought signatures
// go back to Gemini with the parts they came on.
package googlemodel

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentharness/harness/shared/model/modelblock"
	"iter"
	"math"
	"net/http"
	"strings"

	"github.com/agentharness/harness/shared/model"
	"google.golang.org/genai"
)

// provider names this adapter in errors and configs.
const provider = "google"

// Config is the model block this adapter takes.
type Config = modelblock.Hosted

// Model calls one Gemini model.
type Model struct {
	client    *genai.Client
	name      string
	settings  model.Settings
	reasoning *model.Reasoning
}

// New returns a model for cfg. The API key falls back to envKey (the caller passes
// GOOGLE_API_KEY, else GEMINI_API_KEY) when the config names none.
func New(ctx context.Context, cfg Config, envKey string) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("model.model is required for the google provider")
	}
	key := cfg.APIKey
	if key == "" {
		key = envKey
	}
	if key == "" {
		return nil, errors.New("the google provider needs model.apiKey or GOOGLE_API_KEY (or GEMINI_API_KEY)")
	}
	var base http.RoundTripper = http.DefaultTransport
	if cfg.Transport != nil {
		base = cfg.Transport
	}
	client, err := genai.NewClient(ctx, &genai.ClientConfig{
		APIKey: key,
		// Explicit, so GOOGLE_GENAI_USE_VERTEXAI in the environment cannot switch backends.
		Backend: genai.BackendGeminiAPI,
		// The SDK's own RetryOptions neither honour Retry-After or Gemini's RetryInfo nor give
		// up before a wait that would outlast the deadline, so retries live in the transport.
		HTTPClient:  &http.Client{Transport: newRetryTransport(base)},
		HTTPOptions: genai.HTTPOptions{BaseURL: cfg.BaseURL},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the gemini client: %w", err)
	}
	// cfg.Cache has nothing to turn off: Gemini 2.5 and later cache prompts implicitly, with no
	// request field to opt in or out (Gemini's context caching docs); explicit caches are a
	// separate cachedContents resource the harness does not create.
	return &Model{client: client, name: cfg.Model, settings: cfg.Settings, reasoning: cfg.Reasoning}, nil
}

// Stream runs one streaming generateContent call.
func (m *Model) Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		contents, config, err := m.request(req)
		if err != nil {
			yield(model.Event{}, err)
			return
		}
		meta := &responseMeta{}
		ctx := context.WithValue(ctx, metaKey{}, meta)

		var (
			usage   model.Usage
			finish  genai.FinishReason
			blocked bool
			calls   int
			sources = map[string]bool{}
			ids     = map[string]bool{}
			// thinking: reasoning deltas were streamed that no EventReasoningEnd ended yet.
			thinking bool
		)
		// endReasoning ends the reasoning piece in progress, or with a signature makes one of
		// its own; it reports whether the consumer wants more.
		endReasoning := func(sig string) bool {
			if !thinking && sig == "" {
				return true
			}
			thinking = false
			return yield(model.Event{Type: model.EventReasoningEnd, Signature: sig, Provider: provider}, nil)
		}
		for resp, err := range recovered(m.client.Models.GenerateContentStream(ctx, m.name, contents, config)) {
			if err != nil {
				yield(model.Event{}, providerError(err, meta))
				return
			}
			if resp == nil {
				continue
			}
			if u := resp.UsageMetadata; u != nil {
				// Each chunk's usage is the running total, so the last one is the call's.
				// promptTokenCount counts the cached ones too (implicit caching reads, never writes).
				// candidatesTokenCount leaves out thoughtsTokenCount, which is billed as output
				// too (Gemini's thinking docs), so the output is their sum.
				thoughts := int(u.ThoughtsTokenCount)
				usage = model.Cached(int(u.PromptTokenCount), int(u.CandidatesTokenCount)+thoughts, int(u.CachedContentTokenCount), 0).WithReasoning(thoughts)
			}
			if pf := resp.PromptFeedback; pf != nil && pf.BlockReason != "" {
				blocked = true
			}
			if len(resp.Candidates) == 0 || resp.Candidates[0] == nil {
				continue
			}
			// The request never asks for more than one candidate.
			cand := resp.Candidates[0]
			if cand.Content != nil {
				for _, p := range cand.Content.Parts {
					if p == nil {
						continue
					}
					sig := signature(p.ThoughtSignature)
					switch {
					case p.Thought:
						// Thought summaries are the model's reasoning, not its answer.
						if p.Text != "" {
							thinking = true
							if !yield(model.Event{Type: model.EventReasoningDelta, Text: p.Text}, nil) {
								return
							}
						}
						if sig != "" && !endReasoning(sig) {
							return
						}
					case p.FunctionCall != nil:
						// The call's signature is the call's own (Gemini's thought signatures
						// docs), so the reasoning before it ends unsigned.
						if !endReasoning("") {
							return
						}
						id := p.FunctionCall.ID
						if id == "" {
							id = callID(len(req.Messages), calls)
						}
						calls++
						if err := model.CheckToolCallID(ids, id); err != nil {
							yield(model.Event{}, providerError(err, meta))
							return
						}
						args := []byte("{}")
						if len(p.FunctionCall.Args) > 0 {
							if args, err = json.Marshal(p.FunctionCall.Args); err != nil {
								yield(model.Event{}, fmt.Errorf("encoding the arguments of gemini's %s call: %w", p.FunctionCall.Name, err))
								return
							}
						}
						name := p.FunctionCall.Name
						call := model.Event{Type: model.EventToolCall, ToolCallID: id, ToolName: name, Input: json.RawMessage(args)}
						if sig != "" {
							call.Signature, call.Provider = sig, provider
						}
						if !yield(model.Event{Type: model.EventToolInputStart, ToolCallID: id, ToolName: name}, nil) ||
							!yield(model.Event{Type: model.EventToolInputDelta, ToolCallID: id, Text: string(args)}, nil) ||
							!yield(call, nil) {
							return
						}
					default:
						// A signature on any other part (Gemini 3 puts it on the answer's last
						// part, often an empty text part) is kept as a reasoning piece of its own,
						// or as the end of the thoughts it follows.
						if (sig != "" || (thinking && p.Text != "")) && !endReasoning(sig) {
							return
						}
						if p.Text != "" && !yield(model.Event{Type: model.EventTextDelta, Text: p.Text}, nil) {
							return
						}
					}
				}
			}
			if gm := cand.GroundingMetadata; gm != nil {
				for _, c := range gm.GroundingChunks {
					// Grounding metadata may come on more than one chunk; cite each page once.
					if c == nil || c.Web == nil || c.Web.URI == "" || sources[c.Web.URI] {
						continue
					}
					sources[c.Web.URI] = true
					src := &model.Source{ID: fmt.Sprintf("src-%d", len(sources)), URL: c.Web.URI, Title: c.Web.Title}
					if !yield(model.Event{Type: model.EventSource, Source: src}, nil) {
						return
					}
				}
			}
			if cand.FinishReason != "" {
				finish = cand.FinishReason
			}
		}
		if !endReasoning("") {
			return
		}
		yield(model.Event{Type: model.EventFinish, Finish: finishReason(finish, calls > 0, blocked), Usage: usage}, nil)
	}
}

// signature is a thought signature as a reasoning part keeps it: base64, as the API sends it.
func signature(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return base64.StdEncoding.EncodeToString(b)
}

// recovered passes seq on, turning a panic of seq itself into its last error: the SDK panics
// on some malformed chunks (a null candidate), which must fail the call, not the process. A
// panic of the consumer's loop body is not caught.
func recovered[V any](seq iter.Seq2[V, error]) iter.Seq2[V, error] {
	return func(yield func(V, error) bool) {
		next, stop := iter.Pull2(seq)
		defer stop()
		for {
			v, err, ok := pull(next)
			if !ok || !yield(v, err) || err != nil {
				return
			}
		}
	}
}

func pull[V any](next func() (V, error, bool)) (v V, err error, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			err, ok = fmt.Errorf("reading the stream: %v", r), true
		}
	}()
	return next()
}

// callIDPrefix marks the ids this adapter makes up for calls Gemini sent without one.
const callIDPrefix = "gemini_"

// callID names the call-th function call of the answer that will be message number pos of the
// conversation. Gemini usually sends calls without ids, and the loop and the client key tool
// calls by id across all the steps of a turn, so the id must be unique in the conversation and
// the same whenever the answer is replayed: the answer's position and the call's position in it
// are both. Gemini never sees these ids: it matches a functionResponse to its functionCall by
// name and order, and the loop returns results in the order of the calls.
func callID(pos, call int) string {
	return fmt.Sprintf("%s%d_%d", callIDPrefix, pos, call)
}

func finishReason(r genai.FinishReason, calledTools, blocked bool) model.FinishReason {
	switch r {
	case genai.FinishReasonStop:
		if calledTools {
			return model.FinishToolCalls
		}
		return model.FinishStop
	case genai.FinishReasonMaxTokens:
		return model.FinishLength
	case genai.FinishReasonSafety, genai.FinishReasonRecitation, genai.FinishReasonBlocklist,
		genai.FinishReasonProhibitedContent, genai.FinishReasonSPII, genai.FinishReasonImageSafety,
		genai.FinishReasonImageProhibitedContent, genai.FinishReasonImageRecitation:
		return model.FinishFilter
	case "":
		// A prompt Gemini refuses to answer arrives as promptFeedback with no candidate.
		if blocked {
			return model.FinishFilter
		}
	}
	return model.FinishOther
}

func (m *Model) request(req *model.Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	config := &genai.GenerateContentConfig{}
	if s := m.settings; s.Temperature != nil {
		config.Temperature = genai.Ptr(float32(*s.Temperature))
	}
	if s := m.settings; s.TopP != nil {
		config.TopP = genai.Ptr(float32(*s.TopP))
	}
	if s := m.settings; s.MaxTokens != nil {
		config.MaxOutputTokens = int32(min(*s.MaxTokens, math.MaxInt32))
	}
	if r := m.reasoning; r != nil {
		config.ThinkingConfig = thinking(m.name, *r)
	}
	if req.System != "" {
		config.SystemInstruction = &genai.Content{Parts: []*genai.Part{{Text: req.System}}}
	}
	tools, err := tools(req.Tools)
	if err != nil {
		return nil, nil, err
	}
	config.Tools = tools
	if len(req.Output) > 0 {
		// JSON mode under the schema as JSON schema (responseJsonSchema, not the OpenAPI subset
		// responseSchema takes): the answer's text is the object.
		var schema map[string]any
		if err := json.Unmarshal(req.Output, &schema); err != nil {
			return nil, nil, fmt.Errorf("decoding the output schema: %w", err)
		}
		config.ResponseMIMEType, config.ResponseJsonSchema = "application/json", schema
	}

	loopStart := activeLoopStart(req.Messages)
	var contents []*genai.Content
	for i, msg := range req.Messages {
		c, err := content(msg, i > loopStart)
		if err != nil {
			return nil, nil, err
		}
		if len(c.Parts) > 0 {
			contents = append(contents, c)
		}
	}
	return contents, config, nil
}

// thinking is the thinkingConfig for r (Gemini's thinking docs): Gemini 3 models take a
// thinkingLevel, Gemini 2.5 models a thinkingBudget in tokens. Thought summaries are asked for,
// so the reasoning streams.
func thinking(name string, r model.Reasoning) *genai.ThinkingConfig {
	name = strings.TrimPrefix(name, "models/")
	if !strings.HasPrefix(name, "gemini-3") {
		return &genai.ThinkingConfig{IncludeThoughts: true, ThinkingBudget: genai.Ptr(int32(min(r.Budget(), math.MaxInt32)))}
	}
	level := map[string]genai.ThinkingLevel{
		model.EffortLow: genai.ThinkingLevelLow, model.EffortMedium: genai.ThinkingLevelMedium, model.EffortHigh: genai.ThinkingLevelHigh,
	}[r.Level()]
	if level == genai.ThinkingLevelMedium && strings.HasPrefix(name, "gemini-3-pro") {
		// Gemini 3 Pro takes only low and high; high is its default, so medium does not think
		// less than it would unasked.
		level = genai.ThinkingLevelHigh
	}
	return &genai.ThinkingConfig{IncludeThoughts: true, ThinkingLevel: level}
}

// tools declares the harness's tools as one function-calling tool, and adds the provider-defined
// tools the adapter supports.
func tools(specs []model.ToolSpec) ([]*genai.Tool, error) {
	var decls []*genai.FunctionDeclaration
	var provided []*genai.Tool
	for _, t := range specs {
		switch t.ProviderTool {
		case "":
			var schema any
			if len(t.InputSchema) > 0 {
				if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
					return nil, fmt.Errorf("tool %s: decoding its input schema: %w", t.Name, err)
				}
			}
			decls = append(decls, &genai.FunctionDeclaration{Name: t.Name, Description: t.Description, ParametersJsonSchema: schema})
		case model.ProviderGoogleSearch:
			provided = append(provided, &genai.Tool{GoogleSearch: &genai.GoogleSearch{}})
		default:
			return nil, fmt.Errorf("tool %s: the google provider does not support the provider tool %q", t.Name, t.ProviderTool)
		}
	}
	if len(decls) == 0 {
		return provided, nil
	}
	return append([]*genai.Tool{{FunctionDeclarations: decls}}, provided...), nil
}

// activeLoopStart returns the index of the last user message with text: the model messages
// after it form the turn Gemini validates thought signatures in. -1 means none.
func activeLoopStart(msgs []model.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == model.RoleUser && msgs[i].Text() != "" {
			return i
		}
	}
	return -1
}

// skipSignature is the thought signature Gemini documents for function calls whose real
// signature is not available (Gemini's thought signatures docs): calls another provider's model
// wrote, or that came without one. Gemini 3 rejects the current turn's function calls without
// one. On the wire it must read "skip_thought_signature_validator", which the SDK, encoding
// bytes, writes in the standard base64 alphabet that decodes to the same bytes.
var skipSignature, _ = base64.URLEncoding.DecodeString("skip_thought_signature_validator")

// decoded is a kept signature as the SDK sends it (bytes it encodes in base64 again); nil for
// none, or for one that is not base64 (never one Gemini sent), which Gemini would refuse.
func decoded(sig string) []byte {
	b, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(b) == 0 {
		return nil
	}
	return b
}

// inlineType reports whether Gemini takes a file of this media type inline: images, audio,
// video, PDFs and text; it refuses the request for any other, so those stay notes.
func inlineType(mediaType string) bool {
	for _, prefix := range []string{"image/", "audio/", "video/", "text/", "application/pdf"} {
		if strings.HasPrefix(mediaType, prefix) {
			return true
		}
	}
	return false
}

// content converts one stored message. inLoop says whether msg belongs to the turn in progress.
func content(msg model.Message, inLoop bool) (*genai.Content, error) {
	switch msg.Role {
	case model.RoleUser:
		c := &genai.Content{Role: genai.RoleUser}
		for _, p := range msg.Parts {
			switch {
			case p.Type == model.PartText && p.Text != "":
				c.Parts = append(c.Parts, &genai.Part{Text: p.Text})
			case p.Type == model.PartFile && p.Data != nil && inlineType(p.MediaType):
				c.Parts = append(c.Parts, &genai.Part{Text: model.FileNote(p)}, &genai.Part{InlineData: &genai.Blob{MIMEType: p.MediaType, Data: p.Data}})
			case p.Type == model.PartFile:
				c.Parts = append(c.Parts, &genai.Part{Text: model.FileNote(p)})
			}
		}
		return c, nil
	case model.RoleAssistant:
		c := &genai.Content{Role: genai.RoleModel}
		// A signature Gemini put on a part other than a call comes back on the answer's text
		// (Gemini's thought signatures docs: return each signature with its part). The thought
		// summaries themselves are not sent back, nor another provider's reasoning.
		var reasoningSig []byte
		for _, p := range msg.Parts {
			if p.Type == model.PartReasoning && p.SentTo(provider) && reasoningSig == nil {
				reasoningSig = decoded(p.Signature)
			}
		}
		called := false
		for _, p := range msg.Parts {
			switch p.Type {
			case model.PartText:
				if p.Text != "" {
					c.Parts = append(c.Parts, &genai.Part{Text: p.Text, ThoughtSignature: reasoningSig})
					reasoningSig = nil
				}
			case model.PartToolCall:
				args, err := object(p.Input)
				if err != nil {
					return nil, fmt.Errorf("the arguments of the %s call %s: %w", p.ToolName, p.ToolCallID, err)
				}
				part := &genai.Part{FunctionCall: &genai.FunctionCall{ID: sentID(p.ToolCallID), Name: p.ToolName, Args: args}}
				if p.Provider == provider {
					part.ThoughtSignature = decoded(p.Signature)
				}
				// Gemini 3 refuses the turn in progress unless each step's first call carries a
				// signature (parallel calls after it carry none); a call without Gemini's own,
				// which another provider wrote, takes the placeholder.
				if inLoop && !called && part.ThoughtSignature == nil {
					part.ThoughtSignature = skipSignature
				}
				called = true
				c.Parts = append(c.Parts, part)
			}
		}
		// With no text to carry it, the signature is dropped: the SDK leaves an empty text out,
		// and Gemini refuses a part with no data. Only calls' signatures are required.
		return c, nil
	case model.RoleTool:
		// Gemini takes function results as a user message of functionResponse parts.
		c := &genai.Content{Role: genai.RoleUser}
		for _, p := range msg.Parts {
			if p.Type != model.PartToolResult {
				continue
			}
			c.Parts = append(c.Parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{
				ID: sentID(p.ToolCallID), Name: p.ToolName, Response: response(p),
			}})
		}
		return c, nil
	default:
		return nil, fmt.Errorf("message with unknown role %q", msg.Role)
	}
}

// sentID returns the call id to send back: Gemini's own, never one the adapter made up.
func sentID(id string) string {
	if strings.HasPrefix(id, callIDPrefix) {
		return ""
	}
	return id
}

// object decodes a call's JSON arguments, keeping numbers exact.
func object(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// response is the functionResponse.response object for a tool result. Gemini reads an "output"
// key as the result and an "error" key as a failure, and a whole object as the result.
func response(p model.Part) map[string]any {
	var v any
	dec := json.NewDecoder(bytes.NewReader(p.Output))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		// Not JSON: pass the bytes on as text rather than lose them.
		v = string(p.Output)
	}
	obj, isObject := v.(map[string]any)
	if p.IsError {
		// The loop already reports failures as {"error": message}; do not wrap them twice.
		if _, ok := obj["error"]; ok {
			return obj
		}
		return map[string]any{"error": v}
	}
	if isObject {
		return obj
	}
	return map[string]any{"output": v}
}

// metaKey carries a *responseMeta from Stream to the transport, which sees the response headers
// that the SDK's errors drop.
type metaKey struct{}

type responseMeta struct {
	requestID string
}

// requestIDHeaders are the headers a request id may come in. Gemini sends none today; a
// gateway in front of it (a model.baseURL) may.
var requestIDHeaders = []string{"X-Request-Id", "Request-Id"}

// providerError keeps the status and request id of a failed call for the client and the log.
func providerError(err error, meta *responseMeta) error {
	pe := &model.ProviderError{Provider: provider, RequestID: meta.requestID, Err: err}
	var apiErr genai.APIError
	var apiErrPtr *genai.APIError
	switch {
	case errors.As(err, &apiErr):
	case errors.As(err, &apiErrPtr):
		apiErr = *apiErrPtr
	default:
		return pe
	}
	pe.Status = apiErr.Code
	pe.ContextLength = tooLong(apiErr)
	return pe
}

// tooLong reports whether a call was refused for its length. Gemini has no status or reason of
// its own for that: it is a 400 INVALID_ARGUMENT saying "The input token count (N) exceeds the
// maximum number of tokens allowed (M)." (the count is sometimes left out).
func tooLong(apiErr genai.APIError) bool {
	return apiErr.Code == http.StatusBadRequest && apiErr.Status == "INVALID_ARGUMENT" &&
		strings.HasPrefix(apiErr.Message, "The input token count") &&
		strings.Contains(apiErr.Message, "exceeds the maximum number of tokens allowed")
}
