package crawl

import (
	"context"
	"fmt"
	"sync"
	"time"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/spider"
)

// A host that is down pauses; its pages do not die. When a fetch fails at the connection level
// (refused, reset, a connect timeout) or a host fails several pages in a row (5xx, 429, read
// timeouts: one slow page is the page's failure, not the host's), the host is paused
// in its shared politeness row (crawlq_domain): every worker's pages of it then wait, without
// counting an attempt, until the pause ends, and the first page after it probes the host. Each
// failed probe doubles the pause (spider.Retry.HostPause up to MaxHostPause). Once the host has
// been failing for longer than Retry.HostDownLimit, its pages count attempts again, so a host that
// never comes back leaves its runs incomplete with the dead pages listed, rather than pending
// forever. A page of the host that succeeds ends the streak.
//
// Each process keeps what it learnt of a host's pause, so a page of a paused host is put back
// without a round trip; a process that has not seen the host fail learns of the pause from its own
// first failed fetch (each failure during a pause adds nothing to the streak).

// statusStreak is how many 5xx/429 answers or read timeouts in a row from one host, seen by one
// process, count as the host failing rather than the pages.
const statusStreak = 5

// hostHealth is this process's view of failing hosts.
type hostHealth struct {
	mu     sync.Mutex
	hosts  map[string]*hostState
	maxLen int
}

type hostState struct {
	pausedUntil time.Time
	failing     bool // this process saw the host fail since its last success: a success ends the streak
	statuses    int  // 5xx/429 answers in a row
}

func newHostHealth() *hostHealth { return &hostHealth{hosts: map[string]*hostState{}, maxLen: 100000} }

// paused returns how long pages of host must still wait, or 0.
func (h *hostHealth) paused(host string, now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.hosts[host]; s != nil && s.pausedUntil.After(now) {
		return s.pausedUntil.Sub(now)
	}
	return 0
}

func (h *hostHealth) state(host string) *hostState {
	s := h.hosts[host]
	if s == nil {
		if len(h.hosts) >= h.maxLen { // a bound, not an LRU: failing hosts are few
			clear(h.hosts)
		}
		s = &hostState{}
		h.hosts[host] = s
	}
	return s
}

// status notes an HTTP answer of host and reports whether it completes a streak of failing ones.
func (h *hostHealth) status(host string, failing bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.hosts[host]
	if !failing {
		if s != nil {
			s.statuses = 0
		}
		return false
	}
	s = h.state(host)
	s.statuses++
	if s.statuses >= statusStreak {
		s.statuses = 0
		return true
	}
	return false
}

// pause records the shared pause of host that a failure here led to.
func (h *hostHealth) pause(host string, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.state(host)
	s.pausedUntil, s.failing = until, true
}

// recovered reports whether host had been seen failing here, and forgets it.
func (h *hostHealth) recovered(host string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.hosts[host]
	if s == nil || !s.failing {
		return false
	}
	delete(h.hosts, host)
	return true
}

// hostPause is the shared state of a failing host after a failure was recorded.
type hostPause struct {
	until   time.Time
	streak  int
	downFor time.Duration
	started bool // this failure started a new pause (not one during a pause already running)
}

// hostFailed records a connection-level failure of host in its shared row and returns the pause.
func (c *Crawler) hostFailed(ctx context.Context, host string, r spider.Retry) (hostPause, error) {
	stale := max(2*r.MaxHostPause, time.Minute)
	row, err := c.db.HostFailed(ctx, dbsqlc.HostFailedParams{
		Host: host, FirstPauseUs: r.HostPause.Microseconds(), MaxPauseUs: r.MaxHostPause.Microseconds(),
		StaleAfterUs: stale.Microseconds(), Now: c.now(),
	})
	if err != nil {
		return hostPause{}, fmt.Errorf("pause host %s: %w", host, err)
	}
	p := hostPause{until: row.PausedUntil, streak: int(row.FailStreak), started: row.Started,
		downFor: time.Duration(row.DownSeconds * float64(time.Second))}
	c.health.pause(host, p.until)
	if p.started {
		c.log.Warn("host paused: it fails at the connection level; its pages wait without counting attempts",
			"host", host, "streak", p.streak, "until", p.until, "down_for", p.downFor.Round(time.Millisecond),
			"gives_up_after", r.HostDownLimit)
	}
	return p, nil
}

// hostAnswered ends host's failing streak after a fetch it answered, when this process saw it fail.
func (c *Crawler) hostAnswered(ctx context.Context, host string) {
	if !c.health.recovered(host) {
		return
	}
	if err := c.db.HostRecovered(context.WithoutCancel(ctx), host); err != nil {
		c.log.Warn("host answers again, but its pause could not be cleared; the next failure starts a new streak once it is stale", "host", host, "err", err)
		return
	}
	c.log.Info("host answers again", "host", host)
}
