// Package model defines the provider-neutral conversation and streaming types that the agent
// loop speaks. Provider adapters (scriptedmodel, openaimodel) translate to and from them, so no
// provider SDK type reaches the loop or the tools.
package model

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Role says who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool carries the results of the assistant's tool calls.
	RoleTool Role = "tool"
)

// PartType says what a Part holds.
type PartType string

const (
	PartText       PartType = "text"
	PartToolCall   PartType = "tool-call"
	PartToolResult PartType = "tool-result"
	// PartFile is a file a user message carries (an attachment of its thread).
	PartFile PartType = "file"
	// PartReasoning is the model's thinking before it answered, as its provider showed it.
	PartReasoning PartType = "reasoning"
)

// Message is one entry of a conversation, as stored and as sent to a model.
type Message struct {
	ID    string `json:"id,omitempty"`
	Role  Role   `json:"role"`
	Parts []Part `json:"parts"`
	// Usage is the token usage of the model call that wrote an assistant message or a summary.
	Usage *Usage `json:"usage,omitempty"`
	// Model names the model that wrote an assistant message when it was not the agent's own
	// but one of its fallbacks ("provider/model").
	Model string `json:"model,omitempty"`
	// Kind marks a message the harness wrote rather than a person or the model; empty for
	// ordinary messages.
	Kind string `json:"kind,omitempty"`
	// Nested names the tool call whose own model loop wrote a KindNested message.
	Nested *NestedCall `json:"nested,omitempty"`
	// Output marks the final answer of a turn whose agent asks for structured output: its text
	// is the JSON object that passed the agent's output schema.
	Output bool `json:"output,omitempty"`
	// Compaction is set on a KindSummary message.
	Compaction *Compaction `json:"compaction,omitempty"`
}

// KindNested marks a message of a tool's own model loop (a prompt tool's): kept in the
// conversation's record, never sent to the model of the conversation itself.
const KindNested = "nested"

// NestedCall is the tool call a nested message belongs to.
type NestedCall struct {
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
}

// IsNested reports whether m is a message of a tool's own model loop.
func (m Message) IsNested() bool { return m.Kind == KindNested }

// WithoutNested returns msgs less their nested messages; msgs itself when it has none.
func WithoutNested(msgs []Message) []Message {
	if !slices.ContainsFunc(msgs, Message.IsNested) {
		return msgs
	}
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if !m.IsNested() {
			out = append(out, m)
		}
	}
	return out
}

// KindAsyncResults marks the user-role message that brings async tool results back to the
// model: providers accept it anywhere, and it does not start a new turn.
const KindAsyncResults = "async-results"

// KindOutputRetry marks the user-role note that asks the model once more for an answer valid
// against the agent's output schema: it does not start a new turn.
const KindOutputRetry = "output-retry"

// StartsTurn reports whether m is a message a user wrote, which begins a turn.
func (m Message) StartsTurn() bool { return m.Role == RoleUser && m.Kind == "" }

// FinalText is the answer msgs end with: the text of the last assistant message that has any.
func FinalText(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant && !msgs[i].IsNested() && strings.TrimSpace(msgs[i].Text()) != "" {
			return msgs[i].Text()
		}
	}
	return ""
}

// FinalOutput is the structured output msgs end with: the text of the answer FinalText returns
// when it is marked as a turn's output (Message.Output); nil when it is not.
func FinalOutput(msgs []Message) json.RawMessage {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant && !msgs[i].IsNested() && strings.TrimSpace(msgs[i].Text()) != "" {
			if !msgs[i].Output {
				return nil
			}
			return json.RawMessage(strings.TrimSpace(msgs[i].Text()))
		}
	}
	return nil
}

// Part is one piece of a message: text, a tool call (assistant) or a tool result (tool).
type Part struct {
	Type       PartType        `json:"type"`
	Text       string          `json:"text,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	// IsError marks a tool result that reports a failure to the model.
	IsError bool `json:"isError,omitempty"`
	// OutputBytes, on a tool result cut to fit the conversation's record, is the size of the
	// whole result, and OutputKey where it is kept (empty when it could not be); Output is then
	// the cut result the model got, which ends with a note of what was left out.
	OutputBytes int    `json:"outputBytes,omitempty"`
	OutputKey   string `json:"outputKey,omitempty"`
	// A file part's media type and file name, and its attachment: the id of its bytes among
	// its thread's attachments (shared/state/attachments).
	MediaType  string `json:"mediaType,omitempty"`
	Filename   string `json:"filename,omitempty"`
	Attachment string `json:"attachment,omitempty"`
	// Data are a file's bytes while a model request carries them; never stored.
	Data []byte `json:"-"`
	// URL is a signed, short-lived address of a file's bytes, in answers only; never stored.
	URL string `json:"url,omitempty"`
	// ID is a reasoning part's id on the stream that showed it, which the AI SDK's reasoning
	// part keeps, so the conversation read back names it as the stream did.
	ID string `json:"id,omitempty"`
	// Signature is what a provider signed the model's reasoning with: on a reasoning part
	// (Anthropic, Bedrock), or on the tool call it came with (Gemini's thought signature). It is
	// sent back with the part, so tool use with reasoning goes on across steps, and only to the
	// provider that wrote it (Provider).
	Signature string `json:"signature,omitempty"`
	// Redacted, on a reasoning part, is reasoning its provider sent encrypted (Anthropic's
	// redacted thinking, Bedrock's redacted content): sent back as it came, never shown.
	Redacted string `json:"redacted,omitempty"`
	// Provider names the provider a reasoning part or a signature came from ("anthropic").
	Provider string `json:"provider,omitempty"`
	// Approval, on the result of a call that was held for the user's approval or refused by a
	// policy, is how it was decided: what a client was shown of the decision, kept so that it
	// can be shown again when the conversation is read back.
	Approval *Approval `json:"approval,omitempty"`
}

// Approval is the decision on a call that needed one, as its result keeps it.
type Approval struct {
	ID       string `json:"id"`
	Approved bool   `json:"approved"`
	// Reason is the decision's reason as the decider gave it: the user's own words, or the
	// text of a denial the harness or a policy made.
	Reason string `json:"reason,omitempty"`
	// RequestReason is why the policy asked; often empty.
	RequestReason string `json:"requestReason,omitempty"`
	// Automatic: a policy decided, not the user.
	Automatic bool `json:"automatic,omitempty"`
}

// SentTo reports whether p goes to provider's model: a reasoning part or a signature goes only
// to the provider that wrote it (a fallback of another provider cannot read it).
func (p Part) SentTo(provider string) bool {
	return p.Type != PartReasoning || p.Provider == provider
}

// Text returns the concatenated text parts of m.
func (m Message) Text() string {
	var s string
	for _, p := range m.Parts {
		if p.Type == PartText {
			s += p.Text
		}
	}
	return s
}

// ToolSpec is the model-facing description of a tool.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// ProviderTool names a provider-defined tool that the model's provider runs itself (such as
	// ProviderGoogleSearch); the harness never executes it. Empty for the harness's own tools.
	ProviderTool string `json:"providerTool,omitempty"`
}

// Provider-defined tools a model adapter may support.
const (
	// ProviderGoogleSearch is Gemini's grounding with Google Search.
	ProviderGoogleSearch = "google.google_search"
)

// Request is one model call.
type Request struct {
	System   string
	Messages []Message
	Tools    []ToolSpec
	// Output, when set, is the JSON schema (of an object) the final answer must be valid
	// against: an adapter asks for it in its provider's structured-output mode.
	Output json.RawMessage
	// CacheKey names the agent whose calls these are, the same for all of its calls: a
	// provider that routes requests to its prompt cache by a key (OpenAI's prompt_cache_key)
	// gets a hash of it.
	CacheKey string
	// Summary marks a request that asks for a summary of a conversation, to compact it; a
	// provider answers it like any other (the scripted model with a fixed summary).
	Summary bool
}

// Reasoning is a model block's "reasoning": how much a reasoning model thinks before it
// answers, as an effort or as a budget of tokens (one of them). Each adapter maps it onto its
// provider's own control.
type Reasoning struct {
	Effort       string `json:"effort,omitempty"`
	BudgetTokens int    `json:"budgetTokens,omitempty"`
}

// Reasoning efforts, and the budget each stands for where a provider takes a budget.
const (
	EffortLow    = "low"
	EffortMedium = "medium"
	EffortHigh   = "high"
)

var effortBudgets = map[string]int{EffortLow: 1024, EffortMedium: 8192, EffortHigh: 24576}

// MinReasoningBudget is the smallest budget a block may set (Anthropic's least), and
// MaxReasoningBudget the largest: a step's reasoning is kept in its stored message, which holds
// about 384 KiB, some 90,000 tokens of text.
const (
	MinReasoningBudget = 1024
	MaxReasoningBudget = 65536
)

// Budget is r's budget of tokens: the one it sets, or its effort's (low 1024, medium 8192,
// high 24576).
func (r Reasoning) Budget() int {
	if r.BudgetTokens > 0 {
		return r.BudgetTokens
	}
	return effortBudgets[r.Effort]
}

// Level is r's effort: the one it sets, or its budget's (below 4096 tokens low, below 16384
// medium, else high).
func (r Reasoning) Level() string {
	switch {
	case r.Effort != "":
		return r.Effort
	case r.BudgetTokens < 4096:
		return EffortLow
	case r.BudgetTokens < 16384:
		return EffortMedium
	default:
		return EffortHigh
	}
}

// Settings are the sampling options an agent's model block may set; nil leaves the provider's
// default.
type Settings struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"topP,omitempty"`
	MaxTokens   *int64   `json:"maxTokens,omitempty"`
}

// EventType says what an Event reports.
type EventType int

const (
	// EventTextDelta carries a piece of the answer's text.
	EventTextDelta EventType = iota + 1
	// EventToolInputStart announces a tool call whose input is about to stream.
	EventToolInputStart
	// EventToolInputDelta carries a piece of a tool call's JSON input.
	EventToolInputDelta
	// EventToolCall carries a complete tool call.
	EventToolCall
	// EventFinish ends the call with a reason and the token usage.
	EventFinish
	// EventSource cites a source a provider-defined tool used (Source is set).
	EventSource
	// EventModel opens an answer another model than the agent's own wrote (a fallback): Text
	// names it, "provider/model".
	EventModel
	// EventReasoningDelta carries a piece of the model's reasoning (Text).
	EventReasoningDelta
	// EventReasoningEnd ends a piece of reasoning: its Signature or its Redacted content, from
	// Provider, when the provider sent one. One without reasoning text before it is a piece of
	// its own (redacted reasoning).
	EventReasoningEnd
)

// Event is one streamed piece of a model's answer.
type Event struct {
	Type       EventType
	Text       string // EventTextDelta, EventToolInputDelta
	ToolCallID string // tool events
	ToolName   string // tool events
	Input      json.RawMessage
	Finish     FinishReason
	Usage      Usage
	Source     *Source // EventSource
	// Signature, Redacted and Provider: EventReasoningEnd's, and on EventToolCall the call's
	// thought signature (Gemini's), as model.Part has them.
	Signature string
	Redacted  string
	Provider  string
}

// CheckToolCallID refuses a tool call id that a model's answer sent without a value, or that
// another call of the same answer (seen) already has: the loop keys a call, its result and its
// approval by id. It records id in seen.
func CheckToolCallID(seen map[string]bool, id string) error {
	switch {
	case id == "":
		return errors.New("the stream sent a tool call without an id")
	case seen[id]:
		return fmt.Errorf("the stream sent tool call id %q twice", id)
	}
	seen[id] = true
	return nil
}

// Source is a web page a provider-defined tool consulted, as the AI SDK's source-url part.
type Source struct {
	ID    string `json:"sourceId"`
	URL   string `json:"url"`
	Title string `json:"title,omitempty"`
}

// ErrCredentials wraps a failure to read the credentials an agent's model or tools call with
// (a deployment's secret, an account's sealed key): the operator's to fix, not the request's, so
// it is answered as an internal error and logged in full, never shown.
var ErrCredentials = errors.New("the agent's credentials could not be read")

// ErrContextLength is a provider's refusal of a request longer than its model's context window:
// errors.Is(err, ErrContextLength) holds for a *ProviderError whose ContextLength is set, which
// a caller may answer by compacting the conversation and calling once more.
var ErrContextLength = errors.New("the request is longer than the model's context window")

// ProviderError is a failed call to a model provider. Its Error text is for logs; Public is
// what a client may see.
type ProviderError struct {
	Provider  string
	Status    int    // HTTP status; 0 when the call failed before a response
	RequestID string // the provider's request id, when it sent one
	// ContextLength: the provider refused the request for its length (ErrContextLength), as
	// its adapter read the provider's own error.
	ContextLength bool
	Err           error
}

func (e *ProviderError) Error() string {
	s := e.Provider + " model call failed"
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.RequestID != "" {
		s += " [request " + e.RequestID + "]"
	}
	return s + ": " + e.Err.Error()
}

func (e *ProviderError) Unwrap() error { return e.Err }

// Is makes errors.Is(e, ErrContextLength) report e.ContextLength.
func (e *ProviderError) Is(target error) bool { return target == ErrContextLength && e.ContextLength }

// Public describes the failure without the provider's own words, which may echo the prompt.
func (e *ProviderError) Public() string {
	switch {
	case e.ContextLength:
		return "the conversation is longer than the " + e.Provider + " model's context window"
	case e.Status == 429:
		return "the " + e.Provider + " model is rate limited; try again shortly"
	case e.Status == 401 || e.Status == 403:
		return "the " + e.Provider + " model refused the harness's credentials"
	case e.Status >= 500:
		return fmt.Sprintf("the %s model is unavailable (HTTP %d); try again shortly", e.Provider, e.Status)
	case e.Status >= 400:
		return fmt.Sprintf("the %s model rejected the request (HTTP %d)", e.Provider, e.Status)
	default:
		return "the " + e.Provider + " model could not be reached"
	}
}

// FinishReason says why a model call ended, in the AI SDK's vocabulary.
type FinishReason string

const (
	FinishStop      FinishReason = "stop"
	FinishLength    FinishReason = "length"
	FinishToolCalls FinishReason = "tool-calls"
	FinishFilter    FinishReason = "content-filter"
	FinishError     FinishReason = "error"
	FinishOther     FinishReason = "other"
)

// Usage counts tokens, in the AI SDK's usage shape: InputTokens counts every input token,
// cached or not, and InputTokenDetails splits them by the provider's prompt cache.
type Usage struct {
	InputTokens        int                `json:"inputTokens"`
	OutputTokens       int                `json:"outputTokens"`
	InputTokenDetails  InputTokenDetails  `json:"inputTokenDetails,omitzero"`
	OutputTokenDetails OutputTokenDetails `json:"outputTokenDetails,omitzero"`
}

// OutputTokenDetails are a call's output tokens by kind: its answer's and its reasoning's; zero
// when the provider reported no reasoning tokens.
type OutputTokenDetails struct {
	TextTokens      int `json:"textTokens"`
	ReasoningTokens int `json:"reasoningTokens"`
}

// WithReasoning returns u with reasoning of its output tokens spent on reasoning.
func (u Usage) WithReasoning(reasoning int) Usage {
	if reasoning > 0 {
		u.OutputTokenDetails = OutputTokenDetails{TextTokens: max(u.OutputTokens-reasoning, 0), ReasoningTokens: reasoning}
	}
	return u
}

// InputTokenDetails are a call's input tokens by the prompt cache: read from it, written to
// it, neither; zero when the provider reported no cache use.
type InputTokenDetails struct {
	NoCacheTokens    int `json:"noCacheTokens"`
	CacheReadTokens  int `json:"cacheReadTokens"`
	CacheWriteTokens int `json:"cacheWriteTokens"`
}

// Cached returns the usage of a call of input tokens in all, cacheRead of them read from the
// prompt cache and cacheWrite written to it.
func Cached(input, output, cacheRead, cacheWrite int) Usage {
	u := Usage{InputTokens: input, OutputTokens: output}
	if cacheRead > 0 || cacheWrite > 0 {
		u.InputTokenDetails = InputTokenDetails{NoCacheTokens: max(input-cacheRead-cacheWrite, 0), CacheReadTokens: cacheRead, CacheWriteTokens: cacheWrite}
	}
	return u
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	sum := Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
	if u.InputTokenDetails != (InputTokenDetails{}) || v.InputTokenDetails != (InputTokenDetails{}) {
		// A call that reported no cache use read and wrote nothing of it.
		d := func(x Usage) InputTokenDetails {
			if x.InputTokenDetails == (InputTokenDetails{}) {
				return InputTokenDetails{NoCacheTokens: x.InputTokens}
			}
			return x.InputTokenDetails
		}
		a, b := d(u), d(v)
		sum.InputTokenDetails = InputTokenDetails{
			NoCacheTokens: a.NoCacheTokens + b.NoCacheTokens, CacheReadTokens: a.CacheReadTokens + b.CacheReadTokens,
			CacheWriteTokens: a.CacheWriteTokens + b.CacheWriteTokens,
		}
	}
	if u.OutputTokenDetails != (OutputTokenDetails{}) || v.OutputTokenDetails != (OutputTokenDetails{}) {
		// A call that reported no reasoning tokens spent all of its output on its answer.
		d := func(x Usage) OutputTokenDetails {
			if x.OutputTokenDetails == (OutputTokenDetails{}) {
				return OutputTokenDetails{TextTokens: x.OutputTokens}
			}
			return x.OutputTokenDetails
		}
		a, b := d(u), d(v)
		sum.OutputTokenDetails = OutputTokenDetails{TextTokens: a.TextTokens + b.TextTokens, ReasoningTokens: a.ReasoningTokens + b.ReasoningTokens}
	}
	return sum
}

// FileNote is the text a model is given beside a file, or instead of one it cannot take: the
// file's attachment id (by which tools refer to it), name and media type.
func FileNote(p Part) string {
	name := p.Filename
	if name == "" {
		name = "unnamed"
	}
	return "[attachment " + p.Attachment + ": " + name + ", " + p.MediaType + "]"
}

// ImageTypes are the image media types every provider that takes images takes.
var ImageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// DataURL is a file's bytes as a data: URL.
func DataURL(p Part) string {
	return "data:" + p.MediaType + ";base64," + base64.StdEncoding.EncodeToString(p.Data)
}
