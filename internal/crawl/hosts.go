package crawl

import (
	"context"
	"sync"
	"time"
)

// A spider's concurrency bounds the requests in flight to one domain from each worker process
// (as Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN does per process). A page waits a while for a slot,
// holding its lease, since slots free up within a request's time; past hostWait it is put back
// (snoozed) so one slow site cannot hold every handler. A delay, when set, is enforced across
// every worker through Postgres as well (see reserve), which makes a domain's requests serial.

// hostWait is how long a page waits here for one of its domain's slots before it is put back.
const hostWait = 5 * time.Second

// hostSlots holds a semaphore per (host, limit): the requests in flight to that host from this
// process for spiders with that limit.
type hostSlots struct {
	mu    sync.Mutex
	slots map[hostKey]*hostSem
}

type hostKey struct {
	host  string
	limit int
}

type hostSem struct {
	ch    chan struct{}
	users int // pages holding or waiting for a slot; the entry goes when none do
}

func newHostSlots() *hostSlots { return &hostSlots{slots: map[hostKey]*hostSem{}} }

// acquire takes one of host's limit slots, waiting at most wait. It returns the release function,
// or ok false when none freed up in time (or ctx ended).
func (h *hostSlots) acquire(ctx context.Context, host string, limit int, wait time.Duration) (release func(), ok bool) {
	k := hostKey{host, max(limit, 1)}
	h.mu.Lock()
	s := h.slots[k]
	if s == nil {
		s = &hostSem{ch: make(chan struct{}, k.limit)}
		h.slots[k] = s
	}
	s.users++
	h.mu.Unlock()
	done := func() {
		h.mu.Lock()
		if s.users--; s.users == 0 {
			delete(h.slots, k)
		}
		h.mu.Unlock()
	}
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch; done() }, true
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch; done() }, true
	case <-t.C:
	case <-ctx.Done():
	}
	done()
	return nil, false
}
