package lru_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/agentharness/harness/shared/state/lru"
)

// The cache keeps what fits, drops the least recently used first, and keeps no value too large
// for it.
func TestCache(t *testing.T) {
	const max = 1 << 20
	c := lru.New(max, func(b []byte) int { return len(b) })
	quarter := max / 4
	for i := range 4 {
		c.Put(fmt.Sprint(i), bytes.Repeat([]byte{byte(i)}, quarter))
	}
	if _, ok := c.Get("0"); !ok { // 0 is now the most recently used
		t.Fatal("a blob that fits was dropped")
	}
	c.Put("4", make([]byte, quarter))
	if _, ok := c.Get("1"); ok {
		t.Error("the least recently used blob was kept past the bound")
	}
	for _, k := range []string{"0", "2", "3", "4"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("blob %s was dropped, want it kept", k)
		}
	}
	if c.Bytes() > max {
		t.Errorf("the cache holds %d bytes, more than %d", c.Bytes(), max)
	}
	c.Put("big", make([]byte, quarter+1))
	if _, ok := c.Get("big"); ok {
		t.Error("a blob larger than a quarter of the cache was kept")
	}
}
