package store

import (
	"maps"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// usageAdd is the ADD clause that counts u into an item's token totals, and its values:
// inputTokens and outputTokens, and the prompt cache's reads and writes among the input
// (cacheReadTokens, cacheWriteTokens) and the reasoning among the output (reasoningTokens),
// which usageOf reads back.
func usageAdd(u model.Usage, values map[string]types.AttributeValue) string {
	maps.Copy(values, map[string]types.AttributeValue{
		":i": ddb.N(int64(u.InputTokens)), ":o": ddb.N(int64(u.OutputTokens)),
		":cr": ddb.N(int64(u.InputTokenDetails.CacheReadTokens)), ":cw": ddb.N(int64(u.InputTokenDetails.CacheWriteTokens)),
		":rt": ddb.N(int64(u.OutputTokenDetails.ReasoningTokens)),
	})
	return "inputTokens :i, outputTokens :o, cacheReadTokens :cr, cacheWriteTokens :cw, reasoningTokens :rt"
}

// usageOf reads the token totals usageAdd counted; an item from before the cache's and the
// reasoning's counts has none, as if it read and wrote nothing of the cache and did not reason.
func usageOf(item map[string]types.AttributeValue) model.Usage {
	n := func(k string) int {
		v, _ := ddb.Int(item, k)
		return int(v)
	}
	return model.Cached(n("inputTokens"), n("outputTokens"), n("cacheReadTokens"), n("cacheWriteTokens")).WithReasoning(n("reasoningTokens"))
}
