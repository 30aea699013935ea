package workspaces

import (
	"bytes"
	"fmt"
	"testing"
)

// The cache keeps what fits, drops the least recently used first, and keeps no blob too large
// for it.
func TestBlobCache(t *testing.T) {
	c := newBlobCache()
	quarter := blobCacheBytes / 4
	for i := range 4 {
		c.put(fmt.Sprint(i), bytes.Repeat([]byte{byte(i)}, quarter))
	}
	if _, ok := c.get("0"); !ok { // 0 is now the most recently used
		t.Fatal("a blob that fits was dropped")
	}
	c.put("4", make([]byte, quarter))
	if _, ok := c.get("1"); ok {
		t.Error("the least recently used blob was kept past the bound")
	}
	for _, k := range []string{"0", "2", "3", "4"} {
		if _, ok := c.get(k); !ok {
			t.Errorf("blob %s was dropped, want it kept", k)
		}
	}
	if c.bytes > blobCacheBytes {
		t.Errorf("the cache holds %d bytes, more than %d", c.bytes, blobCacheBytes)
	}
	c.put("big", make([]byte, quarter+1))
	if _, ok := c.get("big"); ok {
		t.Error("a blob larger than a quarter of the cache was kept")
	}
}
