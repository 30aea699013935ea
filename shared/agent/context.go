package agent

// Context budgets and compaction: before each model request the loop estimates its input
// tokens, and when they would pass the agent's budget (or the provider refused the request as
// too long) the oldest turns before the current one become a summary the model writes. The
// summary is stored as a message of its own (model.KindSummary) and the request sends it, then
// the messages it does not cover.

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/agentharness/harness/shared/model"
	"github.com/tiktoken-go/tokenizer/codec"
)

// Context keeps the requests of a turn within the agent's input budget.
type Context struct {
	// MaxInputTokens is the budget of one request's input; 0: none is known, and only a
	// provider's refusal of a request as too long compacts.
	MaxInputTokens int
	// Summarizer writes the summaries; nil: the agent's model.
	Summarizer Model
	// Save stores a summary before any request sends it.
	Save func(ctx context.Context, summary model.Message) error
}

// ContextError ends a turn whose own messages alone pass the budget: there is nothing before
// the turn left to summarize.
type ContextError struct {
	Tokens, Budget int
}

func (e *ContextError) Error() string {
	return fmt.Sprintf("context.maxInputTokens: this turn's own messages come to about %d tokens, more than the agent's budget of %d; raise context.maxInputTokens or begin a new conversation", e.Tokens, e.Budget)
}

// Bounds of a compaction.
const (
	// keepShare: a compaction keeps, of the turns before the current one, the latest that fit
	// in this share of the budget, so the next turns add to it for a while before the next.
	keepShare = 2
	// maxSummaryBytes bounds the stored summary.
	maxSummaryBytes = 32 << 10
	// maxTranscriptTokens bounds what a summary request shows of the messages it summarizes when
	// no budget is known; the earliest are left out first.
	maxTranscriptTokens = 100_000
	// maxRenderedPart bounds each tool input or result in the transcript a summary is written
	// from.
	maxRenderedPart = 2000
	// fileTokens is what a file part counts for: providers count images and documents in
	// their own ways, none of them by the bytes.
	fileTokens = 1500
)

// SummaryPrompt is the system prompt of a summary request.
const SummaryPrompt = `You compact conversations. The user message holds a conversation between a user and an assistant that uses tools, earliest first, possibly beginning with a summary of what came before it. Write a summary that lets the assistant carry on without the original: what the user wants and asked for, facts, names, numbers, identifiers and file paths (exactly), decisions made, what the assistant did and what its tools found, and what is open or next. Write plain text, at most 400 words. Write only the summary.`

// SummaryPrefix opens a summary where a request sends it.
const SummaryPrefix = "[Summary of the conversation before this message, written when it was compacted]\n"

// tokens counts tokens with OpenAI's o200k encoding, scaled up by what the provider reported
// for the requests of the turn so far: other providers' tokenizers count more for the same text.
type tokens struct {
	scale float64
}

var (
	encOnce sync.Once
	enc     interface {
		Count(string) (int, error)
	}
	// counted caches messages' counts by id (ids are unique, and a stored message never
	// changes), so a warm function counts each message once.
	countedMu sync.Mutex
	counted   = map[string]int{}
)

const maxCounted = 100_000

func count(s string) int {
	if s == "" {
		return 0
	}
	encOnce.Do(func() { enc = codec.NewO200kBase() })
	n, err := enc.Count(s)
	if err != nil {
		return len(s) // no token is shorter than a byte
	}
	return n
}

// messageTokens counts m: its text, reasoning, tool inputs and outputs, files, and a few tokens
// of framing.
func messageTokens(m model.Message) int {
	if m.ID != "" {
		countedMu.Lock()
		n, ok := counted[m.ID]
		countedMu.Unlock()
		if ok {
			return n
		}
	}
	n := messageSize(m, count)
	if m.ID != "" {
		countedMu.Lock()
		if len(counted) >= maxCounted {
			clear(counted)
		}
		counted[m.ID] = n
		countedMu.Unlock()
	}
	return n
}

// messageSize is m's size with its strings measured by size.
func messageSize(m model.Message, size func(string) int) int {
	n := 4
	for _, p := range m.Parts {
		switch p.Type {
		case model.PartText, model.PartReasoning:
			n += size(p.Text)
		case model.PartToolCall:
			n += 4 + size(p.ToolName) + size(string(p.Input))
		case model.PartToolResult:
			n += 4 + size(string(p.Output))
		case model.PartFile:
			n += fileTokens
		}
	}
	return n
}

// requestSize is what a request sends besides its messages, its strings measured by size.
func requestSize(req *model.Request, size func(string) int) int {
	n := size(req.System) + size(string(req.Output))
	for _, t := range req.Tools {
		n += 8 + size(t.Name) + size(t.Description) + size(string(t.InputSchema))
	}
	return n
}

func bytesOf(s string) int { return len(s) }

func (t *tokens) of(n int) int {
	if t.scale > 1 {
		return int(float64(n)*t.scale + 0.5)
	}
	return n
}

// observe learns from what the provider reported for a request estimated at estimate.
func (t *tokens) observe(estimate, reported int) {
	if estimate > 0 && reported > estimate {
		t.scale = max(t.scale, float64(reported)/float64(estimate))
	}
}

// compactor is one pass's compaction state.
type compactor struct {
	c      *Context
	model  Model
	newID  func() string
	tokens tokens
	// counted is the estimate of the request fit last let through, when it counted one.
	counted int
}

func newCompactor(cfg Config) *compactor {
	if cfg.Context == nil || cfg.Context.Save == nil {
		return nil
	}
	m := cfg.Context.Summarizer
	if m == nil {
		m = cfg.Model
	}
	return &compactor{c: cfg.Context, model: m, newID: cfg.NewID}
}

// estimate is req's input in tokens, fixed part and messages.
func (c *compactor) estimate(req *model.Request, msgs []model.Message) int {
	n := requestSize(req, count)
	for _, m := range msgs {
		n += messageTokens(m)
	}
	return c.tokens.of(n)
}

// bound is more than estimate, and needs no tokenizer: no token is shorter than a byte. A
// request within the budget by its bytes is never counted, so a function that serves short
// conversations never loads the tokenizer's vocabulary.
func (c *compactor) bound(req *model.Request, msgs []model.Message) int {
	n := requestSize(req, bytesOf)
	for _, m := range msgs {
		n += messageSize(m, bytesOf)
	}
	return c.tokens.of(n)
}

// fit returns msgs as the request may send them: unchanged while within the budget, and
// otherwise (or when force, after the provider refused the request as too long) with the turns
// before the current one summarized, the latest that fit half the budget kept. usage is what
// the summary cost.
func (c *compactor) fit(ctx context.Context, req *model.Request, msgs []model.Message, force bool, yield func(Event, error) bool) ([]model.Message, model.Usage, bool) {
	budget := c.c.MaxInputTokens
	c.counted = 0
	if !force && (budget == 0 || c.bound(req, msgs) <= budget) {
		return msgs, model.Usage{}, true
	}
	before := c.estimate(req, msgs)
	c.counted = before
	if !force && before <= budget {
		return msgs, model.Usage{}, true
	}
	start := turnStart(msgs)
	if own := c.estimate(req, msgs[start:]); budget > 0 && own > budget {
		yield(Event{}, &ContextError{Tokens: own, Budget: budget})
		return nil, model.Usage{}, false
	}
	target := budget / keepShare
	if force && (budget == 0 || before/keepShare < target) {
		// The provider refused what was sent, which the estimate put within the budget: keep
		// at most half of it.
		target = before / keepShare
	}
	// The earliest turn from which the rest fits the target; else the latest, which keeps
	// least. Only a turn's first message begins what is kept: a call is never cut from its
	// result, and nothing of the current turn is summarized.
	cut := -1
	for i := 1; i <= start; i++ {
		if !msgs[i].StartsTurn() || msgs[i].ID == "" {
			continue
		}
		cut = i
		if c.estimate(req, msgs[i:]) <= target {
			break
		}
	}
	if cut < 0 || (cut == 1 && msgs[0].IsSummary()) {
		// Nothing before the turn is left to summarize.
		if budget > 0 && before > budget {
			yield(Event{}, &ContextError{Tokens: before, Budget: budget})
			return nil, model.Usage{}, false
		}
		return msgs, model.Usage{}, true // the provider's own refusal will say why
	}
	text, usage, err := c.summarize(ctx, msgs[:cut])
	if err != nil {
		yield(Event{}, fmt.Errorf("compacting the conversation: %w", err))
		return nil, usage, false
	}
	covered := 0
	for _, m := range msgs[:cut] {
		if m.IsSummary() && m.Compaction != nil {
			covered += m.Compaction.Messages
		} else {
			covered++
		}
	}
	sm := model.Message{ID: newID(c.newID), Role: model.RoleUser, Kind: model.KindSummary,
		Parts: []model.Part{{Type: model.PartText, Text: text}}, Usage: &usage}
	out := append([]model.Message{sm}, msgs[cut:]...)
	after := c.estimate(req, out)
	if budget > 0 && after > budget {
		yield(Event{}, &ContextError{Tokens: after, Budget: budget})
		return nil, usage, false
	}
	out[0].Compaction = &model.Compaction{KeptFrom: msgs[cut].ID, Messages: covered, TokensBefore: before, TokensAfter: after}
	c.counted = after
	if err := c.c.Save(ctx, out[0]); err != nil {
		yield(Event{}, fmt.Errorf("saving the conversation's summary: %w", err))
		return nil, usage, false
	}
	if !yield(Event{Type: Compacted, ID: out[0].ID, Text: text, Compaction: out[0].Compaction}, nil) {
		return nil, usage, false
	}
	return out, usage, true
}

// summarize asks the summarizer for a summary of msgs.
func (c *compactor) summarize(ctx context.Context, msgs []model.Message) (string, model.Usage, error) {
	limit := maxTranscriptTokens
	if c.c.MaxInputTokens > 0 {
		limit = c.c.MaxInputTokens - count(SummaryPrompt) - 100
	}
	req := &model.Request{System: SummaryPrompt, Summary: true,
		Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: transcript(msgs, limit)}}}}}
	var text strings.Builder
	var usage model.Usage
	for ev, err := range c.model.Stream(ctx, req) {
		if err != nil {
			return "", usage, err
		}
		switch ev.Type {
		case model.EventTextDelta:
			text.WriteString(ev.Text)
		case model.EventFinish:
			usage = ev.Usage
		}
	}
	s := strings.TrimSpace(text.String())
	if s == "" {
		return "", usage, fmt.Errorf("the model wrote an empty summary")
	}
	if len(s) > maxSummaryBytes {
		s = strings.ToValidUTF8(s[:maxSummaryBytes], "") + "…"
	}
	return s, usage, nil
}

// transcript renders msgs as the text a summary is written from, within limit tokens: an
// earlier summary first, then the latest messages that fit, the earliest left out first.
func transcript(msgs []model.Message, limit int) string {
	var head string
	if len(msgs) > 0 && msgs[0].IsSummary() {
		head = "Summary of what came before:\n" + msgs[0].Text() + "\n\n"
		msgs = msgs[1:]
	}
	left := limit - count(head)
	var lines []string
	i := len(msgs) - 1
	for ; i >= 0; i-- {
		line := render(msgs[i])
		if line == "" {
			continue
		}
		n := count(line)
		if n > left {
			break
		}
		left -= n
		lines = append(lines, line)
	}
	var b strings.Builder
	b.WriteString(head)
	if i >= 0 {
		fmt.Fprintf(&b, "[%d earlier messages are left out]\n\n", i+1)
	}
	for j := len(lines) - 1; j >= 0; j-- {
		b.WriteString(lines[j])
		b.WriteString("\n\n")
	}
	return strings.TrimSpace(b.String())
}

// render is one message of a transcript; "" for one with nothing to show.
func render(m model.Message) string {
	var parts []string
	for _, p := range m.Parts {
		switch p.Type {
		case model.PartText:
			parts = append(parts, p.Text)
		case model.PartToolCall:
			parts = append(parts, fmt.Sprintf("[calls %s with %s]", p.ToolName, clip(string(p.Input))))
		case model.PartToolResult:
			parts = append(parts, fmt.Sprintf("[%s returned %s]", p.ToolName, clip(string(p.Output))))
		case model.PartFile:
			parts = append(parts, fmt.Sprintf("[file %s, %s]", p.Filename, p.MediaType))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	who := map[model.Role]string{model.RoleUser: "User", model.RoleAssistant: "Assistant", model.RoleTool: "Tool results"}[m.Role]
	if m.IsSummary() {
		who = "Summary"
	}
	return who + ": " + strings.Join(parts, "\n")
}

// clip is s, cut to maxRenderedPart bytes.
func clip(s string) string {
	if len(s) <= maxRenderedPart {
		return s
	}
	return strings.ToValidUTF8(s[:maxRenderedPart], "") + "…"
}

// turnStart is the index of the message that began the current turn: the last a person sent.
func turnStart(msgs []model.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].StartsTurn() {
			return i
		}
	}
	return 0
}

// requestMessages are msgs as a request sends them: a summary goes at the head of the message
// after it (a turn's first, by how compaction cuts), so no provider sees two user messages in a
// row and the request's prefix stays the same from one compaction to the next.
func requestMessages(msgs []model.Message) []model.Message {
	if len(msgs) == 0 || !msgs[0].IsSummary() {
		return msgs
	}
	summary := model.Part{Type: model.PartText, Text: SummaryPrefix + msgs[0].Text()}
	if len(msgs) > 1 && msgs[1].Role == model.RoleUser {
		first := msgs[1]
		first.Parts = append([]model.Part{summary}, first.Parts...)
		return append([]model.Message{first}, msgs[2:]...)
	}
	return append([]model.Message{{ID: msgs[0].ID, Role: model.RoleUser, Parts: []model.Part{summary}}}, msgs[1:]...)
}

// step runs one model step over msgs, the budget's (fit) already: when the provider refuses the
// request as too long, it compacts msgs once more, then tries again. It returns the messages the
// turn goes on with. A nil c runs the step as it is.
func (c *compactor) step(ctx context.Context, m Model, req *model.Request, msgs []model.Message, step int, yield func(Event, error) bool) ([]model.Message, stepResult, bool) {
	var spent model.Usage
	for retried := false; ; retried = true {
		req.Messages = msgs
		if c != nil {
			req.Messages = requestMessages(msgs)
		}
		res, ok := runStep(ctx, m, req, step, yield)
		res.compaction = spent
		if res.tooLong != nil && c != nil && !retried {
			fitted, used, ok := c.fit(ctx, req, msgs, true, yield)
			spent = spent.Add(used)
			if !ok {
				return msgs, stepResult{compaction: spent}, false
			}
			msgs = fitted
			continue
		}
		if res.tooLong != nil {
			yield(Event{}, res.tooLong)
		}
		if ok && c != nil && c.counted > 0 {
			c.tokens.observe(c.counted, res.usage.InputTokens)
		}
		return msgs, res, ok
	}
}
