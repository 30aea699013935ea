// Package toolresults keeps the whole of tool results too large for a conversation's record:
// the record keeps the cut result its model got (agent.MaxResultBytes) and the key of the whole,
// an object of the results bucket under its account and conversation, which the account's purge
// deletes (and the bucket's lifecycle after 30 days).
package toolresults

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/agentharness/harness/shared/wire/ids"
)

// Blobs is where the results go (blobstore.S3 on the results bucket).
type Blobs interface {
	Put(ctx context.Context, key string, body []byte) error
	Keys(ctx context.Context, prefix string) ([]string, error)
	Delete(ctx context.Context, keys ...string) error
}

// Store keeps tool results.
type Store struct{ blobs Blobs }

// New returns a store over blobs.
func New(blobs Blobs) *Store { return &Store{blobs: blobs} }

// accountPrefix is where an account's results live; the account id is the harness's, never a
// client's input, so no input reaches another account's keys.
func accountPrefix(accountID string) string { return "tool-results/" + accountID + "/" }

// Put keeps whole, a result of a tool call in the conversation, and returns its key. The key is
// the content's digest, so a retried invocation writes the same object again, not another.
func (s *Store) Put(ctx context.Context, accountID, conversationID string, whole []byte) (string, error) {
	sum := sha256.Sum256(whole)
	key := conversationPrefix(accountID, conversationID) + hex.EncodeToString(sum[:]) + ".json"
	if err := s.blobs.Put(ctx, key, whole); err != nil {
		return "", fmt.Errorf("keeping a tool result of %d bytes: %w", len(whole), err)
	}
	return key, nil
}

// conversationPrefix is where a conversation's results live.
func conversationPrefix(accountID, conversationID string) string {
	return accountPrefix(accountID) + conversationID + "/"
}

// DeleteAll deletes every result the account keeps, for the purge of a deleted account.
// Deleting twice is harmless.
func (s *Store) DeleteAll(ctx context.Context, accountID string) error {
	return s.deleteUnder(ctx, accountID, accountPrefix(accountID))
}

// DeleteConversation deletes every result the conversation keeps, for its deletion. Deleting
// twice is harmless.
func (s *Store) DeleteConversation(ctx context.Context, accountID, conversationID string) error {
	if p := ids.Problem(conversationID); p != "" {
		return fmt.Errorf("conversation id %s", p)
	}
	return s.deleteUnder(ctx, accountID, conversationPrefix(accountID, conversationID))
}

// deleteUnder deletes the results under prefix, one of the account's.
func (s *Store) deleteUnder(ctx context.Context, accountID, prefix string) error {
	if p := ids.Problem(accountID); p != "" {
		return fmt.Errorf("account id %s", p)
	}
	keys, err := s.blobs.Keys(ctx, prefix)
	if err != nil {
		return err
	}
	return s.blobs.Delete(ctx, keys...)
}
