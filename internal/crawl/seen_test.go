package crawl

import (
	"crypto/md5"
	"fmt"
	"strings"
	"testing"
)

func TestSeenCacheKnowsCommittedLinksWithinItsBound(t *testing.T) {
	c := newSeenCache(4)
	pages := func(urls ...string) []pageArgs {
		ps := make([]pageArgs, len(urls))
		for i, u := range urls {
			ps[i] = pageArgs{URL: u}
		}
		return ps
	}
	commit := func(run int64, urls ...string) {
		var keys []seenKey
		for _, u := range urls {
			keys = append(keys, seenKeyOf(run, u))
		}
		c.add(keys)
	}
	commit(1, "http://a/1", "http://a/2")
	got := c.unknown(1, pages("http://a/1", "http://a/3", "http://a/2"))
	if len(got) != 1 || got[0].URL != "http://a/3" {
		t.Fatalf("unknown = %v, want only http://a/3", got)
	}
	if got := c.unknown(2, pages("http://a/1")); len(got) != 1 {
		t.Fatalf("a link seen in run 1 is unknown in run 2; got %v", got)
	}
	// Filling the current generation twice over drops the oldest links, never more than 2*max.
	for i := range 8 {
		commit(1, fmt.Sprintf("http://b/%d", i))
	}
	if n := len(c.cur) + len(c.prev); n > 8 {
		t.Fatalf("cache holds %d links, bound 8", n)
	}
	if got := c.unknown(1, pages("http://a/1", "http://b/7")); len(got) != 1 || got[0].URL != "http://a/1" {
		t.Fatalf("after eviction unknown = %v, want the oldest link only", got)
	}
}

// A link's seen key is its URL's MD5, computed without an allocation for a URL of usual length
// (every link a page finds or a walk marks is hashed), and the same for a longer one.
func TestURLHashIsMD5WithoutAllocating(t *testing.T) {
	for _, u := range []string{"", "http://127.0.0.1:8090/catalogue/item-40.html", strings.Repeat("http://a.test/", 19), strings.Repeat("x", 256), strings.Repeat("y", 257)} {
		if urlHash(u) != md5.Sum([]byte(u)) {
			t.Errorf("urlHash(%q) is not its MD5", u)
		}
	}
	u := "http://127.0.0.1:8090/catalogue/category/books/travel_2/item-00040.html"
	if n := testing.AllocsPerRun(100, func() { urlHash(u) }); n != 0 {
		t.Errorf("urlHash of a %d-byte URL: %.0f allocations, want none", len(u), n)
	}
}
