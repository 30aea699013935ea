package model

// KindSummary marks the message that stands, for the model, for the part of a conversation a
// compaction summarized: its text is the summary, and Compaction says what it covers. It is
// stored where the compaction happened and kept with every other message; a turn's view of the
// conversation begins with the latest one and leaves earlier ones out.
const KindSummary = "summary"

// Compaction is what a KindSummary message records of the compaction that wrote it.
type Compaction struct {
	// KeptFrom is the id of the first message the summary does not cover: the view of the
	// conversation is the summary, then that message and every later one.
	KeptFrom string `json:"keptFrom"`
	// Messages is how many messages the summary covers, those of earlier summaries included.
	Messages int `json:"messages"`
	// TokensBefore and TokensAfter are the next request's input tokens as estimated before and
	// after the compaction.
	TokensBefore int `json:"tokensBefore"`
	TokensAfter  int `json:"tokensAfter"`
}

// IsSummary reports whether m is a compaction's summary.
func (m Message) IsSummary() bool { return m.Kind == KindSummary }
