package asynctools

import (
	"context"
	"fmt"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// byConversation is the index of rows and groups by their conversation.
const byConversation = "ByConversation"

// putConversationKey puts a row or a group in ByConversation, where deleting its conversation
// finds it.
func putConversationKey(item map[string]types.AttributeValue, accountID, conversationID string) {
	if accountID != "" && conversationID != "" {
		item["conversationKey"] = ddb.S(accountID + "#" + conversationID)
	}
}

// blobDeleter is the optional capability of Blobs that deleting a conversation uses; without
// it offloaded responses are left to the bucket's lifecycle.
type blobDeleter interface {
	Delete(ctx context.Context, keys ...string) error
}

// DeleteConversation deletes the rows and dispatch groups of the conversation's async calls,
// and the responses they offloaded to Blobs first, so a deletion cut short finds them again. A
// completion that comes after it finds no row (ErrNotFound), and the sweeper finds nothing to
// time out, seal or re-drive. Deleting twice is harmless.
func (s *Store) DeleteConversation(ctx context.Context, accountID, conversationID string) error {
	items, err := ddb.Indexed(ctx, s.db, s.table, byConversation, "conversationKey", accountID+"#"+conversationID)
	if err != nil {
		return err
	}
	var blobs []string
	for _, it := range items {
		if k := ddb.String(it, "responseKey"); k != "" {
			blobs = append(blobs, k)
		}
	}
	if d, ok := s.blobs.(blobDeleter); ok && len(blobs) > 0 {
		if err := d.Delete(ctx, blobs...); err != nil {
			return fmt.Errorf("deleting the async results of conversation %s: %w", conversationID, err)
		}
	}
	return ddb.Delete(ctx, s.db, s.table, ddb.Keys(items, "pk", "sk"))
}

// forget deletes a response Settle offloaded for a row that turned out not to exist (its
// conversation was deleted), so a late completion leaves nothing behind.
func (s *Store) forget(ctx context.Context, blobKey string) error {
	d, ok := s.blobs.(blobDeleter)
	if !ok {
		return nil
	}
	return d.Delete(ctx, blobKey)
}
