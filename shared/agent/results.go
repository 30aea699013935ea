package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/model"
)

// Tool results are bounded here, where the loop makes them, whatever ran the call (a built-in
// tool, an MCP server's, a prompt tool, a subagent): the model, the client and the
// conversation's record get the same result, and one too large is cut, with a note of how much
// was left out, while Config.KeepResult keeps the whole.
const (
	// MaxResultBytes bounds one tool result as the model gets it and the conversation keeps it
	// (its JSON).
	MaxResultBytes = 48 << 10
	// StepResultBytes bounds a step's results together: they are stored as one message, which
	// holds at most 384 KiB, so in a step of more than five calls each is cut at its share.
	StepResultBytes = 256 << 10
	// minResultBytes leaves room for the note and some of the result in a step of very many
	// calls.
	minResultBytes = 1 << 10
)

// stepResults bounds the results of one step's calls, each at its share of the step's bound.
type stepResults struct {
	cfg   Config
	limit int
}

func newStepResults(cfg Config, calls int) stepResults {
	return stepResults{cfg: cfg, limit: max(minResultBytes, min(MaxResultBytes, StepResultBytes/max(calls, 1)))}
}

// output is the result of call c that returned out. A result larger than the step's share is
// cut: a JSON string result to its text, any other to its JSON text, then the note.
func (s stepResults) output(ctx context.Context, c model.Part, out json.RawMessage) model.Part {
	r := model.Part{Type: model.PartToolResult, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Output: out}
	if len(out) <= s.limit {
		return r
	}
	text := string(out)
	var str string
	if json.Unmarshal(out, &str) == nil {
		text = str
	}
	r.Output, _ = json.Marshal(Truncate(text, s.limit))
	s.keep(ctx, &r, out)
	return r
}

// failure is the result of call c that failed with msg, and msg as the result carries it: cut,
// like an output, when it is larger than the step's share.
func (s stepResults) failure(ctx context.Context, c model.Part, msg string) (model.Part, string) {
	r := model.Part{Type: model.PartToolResult, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Output: errorOutput(msg), IsError: true}
	if len(r.Output) <= s.limit {
		return r, msg
	}
	whole := r.Output
	// The object around the message takes len(`{"error":}`) bytes.
	msg = Truncate(msg, s.limit-10)
	r.Output = errorOutput(msg)
	s.keep(ctx, &r, whole)
	return r, msg
}

// keep records the size of r's whole result and, through Config.KeepResult, where it is kept.
func (s stepResults) keep(ctx context.Context, r *model.Part, whole json.RawMessage) {
	r.OutputBytes = len(whole)
	if s.cfg.KeepResult != nil {
		r.OutputKey = s.cfg.KeepResult(ctx, whole)
	}
}

// Truncate returns text when its JSON encoding fits limit bytes; otherwise its longest prefix,
// cut on a UTF-8 boundary, that encodes in at most limit bytes followed by a note of how much
// of text was left out.
func Truncate(text string, limit int) string {
	if jsonLen(text) <= limit {
		return text
	}
	// Every byte kept adds at least one to the encoding, so the prefix is shorter than limit;
	// a longer prefix never encodes shorter, so the longest one that fits is searched for.
	lo, hi := 0, min(len(text), limit)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if jsonLen(cut(text, mid)) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return cut(text, lo)
}

// cut is text's first n bytes, less a partial character, and the note of what was left out.
func cut(text string, n int) string {
	for n > 0 && n < len(text) && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n] + fmt.Sprintf("\n\n[truncated: this result is %d bytes; only its first %d are shown and the other %d were left out. Ask for a smaller part if you need more of it.]",
		len(text), n, len(text)-n)
}

// jsonLen is the size of s encoded as a JSON string, as a stored message holds it.
func jsonLen(s string) int {
	b, _ := json.Marshal(s) // a string always encodes
	return len(b)
}
