package crawl

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// A spider's concurrency bounds the requests in flight to one domain from each worker process
// (as Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN does per process). A page waits a while for a slot,
// holding its lease, since slots free up within a request's time; past hostWait it is put back
// (snoozed) so one slow site cannot hold every handler. A delay, when set, is enforced across
// every worker through Postgres as well (see reserve), which makes a domain's requests serial; a
// page waits for its turn here too (awaitTurn), within hostWait.

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

// takeHost holds one of host's slots in this process and, for a spider with a delay, its
// politeness slot across every worker (reserve). It returns the function that frees both after
// the request, or a snooze while the host is busy.
func (c *Crawler) takeHost(ctx context.Context, host string, s spider.Settings) (release func(), err error) {
	return c.take(ctx, host, max(s.Concurrency, 1), s.Delay)
}

// take holds one of key's limit slots in this process (none to take when limit is 0) and, with a
// delay, its politeness slot across every worker (reserve): key is a host, or a proxy's row
// (proxies.go). It returns the function that frees both after the request, or a snooze while key
// is busy.
func (c *Crawler) take(ctx context.Context, key string, limit int, delay time.Duration) (release func(), err error) {
	free := func() {}
	if delay > 0 && limit > 1 {
		// With a delay the host's requests are serial anyway (reserve): its pages queue here, one
		// at a time asking Postgres for the host's turn, rather than each polling it.
		limit = 1
	}
	if limit > 0 {
		var ok bool
		free, ok = c.hosts.acquire(ctx, key, limit, hostWait)
		if !ok {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, queue.Snooze(jitter(time.Second)) // busy here: let other work run
		}
	}
	if delay <= 0 {
		return free, nil
	}
	r, err := c.awaitTurn(ctx, key, delay)
	if err != nil {
		free()
		return nil, err
	}
	return func() { free(); r() }, nil
}

// awaitTurn reserves key's politeness slot (reserve), waiting here for key's turn while the waits
// add up to at most hostWait, and returns the function that frees the slot after the request.
// A page put back (snoozed) for its turn is claimed again only at its worker's next claim, which
// made a delay cost about twice what it says; past hostWait (another process holds the host for
// long, or many pages queue for it) the page is put back with the wait.
func (c *Crawler) awaitTurn(ctx context.Context, key string, delay time.Duration) (func(), error) {
	budget := hostWait
	for {
		r, wait, err := c.reserve(ctx, key, delay)
		switch {
		case err != nil:
			return nil, err
		case wait == 0:
			return r, nil
		case wait > budget:
			return nil, queue.Snooze(wait)
		}
		budget -= wait
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// reserve takes key (a host, or a proxy's row) for one request. It returns the function that
// frees it after the request, or how long to wait when a request to it is in flight or its delay
// has not passed.
//
// With a delay, a domain's requests are serial, each starting at least the delay after the
// previous response (Scrapy's download delay). Without one, requests are not paced through here;
// worker concurrency bounds them.
func (c *Crawler) reserve(ctx context.Context, key string, delay time.Duration) (func(), time.Duration, error) {
	busyFor := c.fetchTimeout() + 5*time.Second
	token := randToken()
	_, err := c.db.ReserveSlot(ctx, dbsqlc.ReserveSlotParams{Host: key, BusyForUs: busyFor.Microseconds(), Token: token, Now: c.now()})
	if errors.Is(err, pgx.ErrNoRows) {
		secs, err := c.db.SlotWait(ctx, dbsqlc.SlotWaitParams{Host: key, DelayUs: delay.Microseconds(), Now: c.now()})
		if err != nil {
			return nil, 0, fmt.Errorf("politeness wait: %w", err)
		}
		wait := time.Duration(secs*float64(time.Second)) + time.Duration(mrand.Int64N(int64(delay/4)+1))
		return nil, max(wait, 10*time.Millisecond), nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("politeness: %w", err)
	}
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := c.db.ReleaseSlot(rctx, dbsqlc.ReleaseSlotParams{Host: key, DelayUs: delay.Microseconds(), Token: token, Now: c.now()}); err != nil {
			c.log.Warn("release politeness slot; it frees when its busy window ends", "host", key, "err", err)
		}
	}
	return release, 0, nil
}

func (c *Crawler) fetchTimeout() time.Duration {
	if c.cfg.Fetch.ReadTimeout > 0 {
		return c.cfg.Fetch.ReadTimeout
	}
	return 30 * time.Second
}
