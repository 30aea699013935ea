package workspaces

import (
	"container/list"
	"sync"
)

// blobCacheBytes bounds the blobs a warm function keeps in memory.
const blobCacheBytes = 64 << 20

// blobCache keeps blobs read recently, least recently used first out. A blob's key names its
// account and its content's hash, so a cached blob is never stale: a later call (the next bash
// of a turn) reads from S3 only the files that changed since.
type blobCache struct {
	mu    sync.Mutex
	bytes int
	order *list.List // of *cachedBlob, most recent first
	byKey map[string]*list.Element
}

type cachedBlob struct {
	key  string
	data []byte
}

func newBlobCache() *blobCache {
	return &blobCache{order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *blobCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedBlob).data, true
}

// put keeps data under key, dropping the least recently used blobs past the bound; a blob
// larger than a quarter of it is not kept.
func (c *blobCache) put(key string, data []byte) {
	if len(data) > blobCacheBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return
	}
	c.byKey[key] = c.order.PushFront(&cachedBlob{key: key, data: data})
	c.bytes += len(data)
	for c.bytes > blobCacheBytes {
		last := c.order.Back()
		b := last.Value.(*cachedBlob)
		c.order.Remove(last)
		delete(c.byKey, b.key)
		c.bytes -= len(b.data)
	}
}
