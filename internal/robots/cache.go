package robots

import (
	"container/list"
	"sync"
)

// DefaultCacheSize is the number of policies a Cache holds when asked for a
// non-positive size.
const DefaultCacheSize = 1024

type cacheKey struct {
	runID int64
	host  string
}

type cacheEntry struct {
	key    cacheKey
	policy *Policy
}

// Cache is a bounded, least-recently-used, concurrency-safe map from (run, site) to
// Policy, so a worker parses each site's robots.txt once per run rather than once
// per page. Keying by run means a new run sees a fresh robots.txt. host should name
// the robots.txt origin; RobotsURL's result is a good key.
type Cache struct {
	mu      sync.Mutex
	max     int
	order   *list.List // front = most recently used
	entries map[cacheKey]*list.Element
}

// NewCache returns a Cache holding at most size policies (DefaultCacheSize when
// size <= 0).
func NewCache(size int) *Cache {
	if size <= 0 {
		size = DefaultCacheSize
	}
	return &Cache{max: size, order: list.New(), entries: make(map[cacheKey]*list.Element)}
}

// Get returns the cached policy for (runID, host).
func (c *Cache) Get(runID int64, host string) (*Policy, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[cacheKey{runID, host}]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).policy, true
}

// Put stores p for (runID, host), evicting the least recently used entry when full.
func (c *Cache) Put(runID int64, host string, p *Policy) {
	k := cacheKey{runID, host}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		el.Value.(*cacheEntry).policy = p
		c.order.MoveToFront(el)
		return
	}
	c.entries[k] = c.order.PushFront(&cacheEntry{key: k, policy: p})
	for c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry).key)
	}
}

// Len is the number of cached policies.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
