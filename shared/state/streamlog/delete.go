package streamlog

import (
	"context"
	"fmt"
	"slices"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// byGroup is the index of items by their stream's group (Options.Group).
const byGroup = "ByGroup"

// grouped puts an item of stream in ByGroup, when the log groups streams.
func (l *Log) grouped(stream string, item map[string]types.AttributeValue) {
	if l.opts.Group == nil {
		return
	}
	if g := l.opts.Group(stream); g != "" {
		item["groupKey"] = ddb.S(g)
	}
}

// blobDeleter is what DeleteGroup needs of Blobs; without it the payloads a group's streams
// kept there are left to the bucket's lifecycle.
type blobDeleter interface {
	Keys(ctx context.Context, prefix string) ([]string, error)
	Delete(ctx context.Context, keys ...string) error
}

// Streams are the names of group's streams, sorted. Streams written before the log grouped
// them are not among them.
func (l *Log) Streams(ctx context.Context, group string) ([]string, error) {
	items, err := ddb.Indexed(ctx, l.db, l.table, byGroup, "groupKey", group)
	if err != nil {
		return nil, err
	}
	var streams []string
	for _, it := range items {
		streams = append(streams, ddb.String(it, "streamKey"))
	}
	slices.Sort(streams)
	return slices.Compact(streams), nil
}

// DeleteGroup deletes every stream of group, whose names all begin with prefix (the payloads
// they kept in Blobs are found by it). Items written before the log grouped streams are left to
// TTL. A writer still writing to one of them writes again behind it: stop its turn first.
// Deleting twice is harmless.
func (l *Log) DeleteGroup(ctx context.Context, group, prefix string) error {
	if d, ok := l.opts.Blobs.(blobDeleter); ok {
		keys, err := d.Keys(ctx, blobPrefix(prefix))
		if err == nil {
			err = d.Delete(ctx, keys...)
		}
		if err != nil {
			return fmt.Errorf("deleting the payloads of streams %s: %w", group, err)
		}
	}
	items, err := ddb.Indexed(ctx, l.db, l.table, byGroup, "groupKey", group)
	if err != nil {
		return err
	}
	return ddb.Delete(ctx, l.db, l.table, ddb.Keys(items, "streamKey", "seq"))
}

// blobPrefix is where the payloads of streams whose names begin with prefix are kept.
func blobPrefix(prefix string) string { return "streams/" + prefix }
