// Package lru is a cache bounded by the bytes it holds, least recently used out first: what a
// warm function keeps of what never changes under its key (a blob under its hash, a stored
// message under its conversation and place), so a later invocation reads only what is new.
package lru

import (
	"container/list"
	"sync"
)

// Cache keeps values by key within a bound of bytes; safe for concurrent use.
type Cache[V any] struct {
	max  int
	size func(V) int

	mu    sync.Mutex
	bytes int
	order *list.List // of *entry[V], most recent first
	byKey map[string]*list.Element
}

type entry[V any] struct {
	key   string
	value V
	size  int
}

// New returns a cache of at most maxBytes, a value's bytes being size(value).
func New[V any](maxBytes int, size func(V) int) *Cache[V] {
	return &Cache[V]{max: maxBytes, size: size, order: list.New(), byKey: map[string]*list.Element{}}
}

// Get returns the value under key, if the cache holds one.
func (c *Cache[V]) Get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry[V]).value, true
}

// Put keeps value under key, dropping the least recently used values past the bound; a value
// larger than a quarter of the bound is not kept, nor is one under a key already held.
func (c *Cache[V]) Put(key string, value V) {
	n := c.size(value)
	if n > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return
	}
	c.byKey[key] = c.order.PushFront(&entry[V]{key: key, value: value, size: n})
	c.bytes += n
	for c.bytes > c.max {
		last := c.order.Back()
		e := last.Value.(*entry[V])
		c.order.Remove(last)
		delete(c.byKey, e.key)
		c.bytes -= e.size
	}
}

// Bytes is what the cache holds.
func (c *Cache[V]) Bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
