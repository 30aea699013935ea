package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/agentharness/harness/shared/state/lru"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// messageCacheBytes bounds the stored messages a warm function keeps.
const messageCacheBytes = 32 << 20

// newMessageCache keeps the messages a warm function read or wrote, as stored (JSON), by
// conversation, epoch and seq: a stored message never changes, and a conversation deleted and
// begun again under the same id has another epoch (newEpoch). So the next turn of a
// conversation this function served reads its head and only the messages written since.
func newMessageCache() *lru.Cache[[]byte] {
	return lru.New(messageCacheBytes, func(b []byte) int { return len(b) + 64 })
}

func messageKey(key, epoch string, seq int64) string {
	return key + "#" + epoch + "#" + strconv.FormatInt(seq, 10)
}

// newEpoch names a conversation begun now; its head keeps it (epoch) for its life.
func newEpoch() string { return randomToken(9) }

// epochUpdate sets a conversation's epoch when it has none, with the update's values.
const epochUpdate = "epoch = if_not_exists(epoch, :epoch)"

// readMessages returns the messages with first <= seq <= last of the conversation key, and
// their seqs: from the cache where it holds them under epoch (none when ""), and from one
// consistent query for the span it lacks, which it then keeps.
func (s *Store) readMessages(ctx context.Context, key, epoch string, first, last int64) ([]model.Message, []int64, error) {
	if epoch == "" || s.messages == nil {
		msgs, seqs, _, err := queryMessages(ctx, s, key, first, last)
		return msgs, seqs, err
	}
	stored := make([][]byte, last-first+1)
	lo, hi := int64(-1), int64(-1)
	for seq := first; seq <= last; seq++ {
		if b, ok := s.messages.Get(messageKey(key, epoch, seq)); ok {
			stored[seq-first] = b
		} else {
			if lo < 0 {
				lo = seq
			}
			hi = seq
		}
	}
	if lo >= 0 {
		_, seqs, raw, err := queryMessages(ctx, s, key, lo, hi)
		if err != nil {
			return nil, nil, err
		}
		for i, seq := range seqs {
			stored[seq-first] = raw[i]
			s.messages.Put(messageKey(key, epoch, seq), raw[i])
		}
	}
	var msgs []model.Message
	var seqs []int64
	for i, b := range stored {
		if b == nil {
			continue // gone (the conversation is being deleted): the caller sees the gap
		}
		var m model.Message
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, nil, fmt.Errorf("decoding stored message: %w", err)
		}
		msgs = append(msgs, m)
		seqs = append(seqs, first+int64(i))
	}
	return msgs, seqs, nil
}

// keepWritten caches the messages of items[:n], written from seq on.
func (s *Store) keepWritten(key, epoch string, seq int64, items []types.TransactWriteItem, n int) {
	if epoch == "" || s.messages == nil {
		return
	}
	for i := range n {
		if put := items[i].Put; put != nil {
			s.messages.Put(messageKey(key, epoch, seq+int64(i)), []byte(ddb.String(put.Item, "message")))
		}
	}
}
