package crawl

import (
	"context"
	"sync"
	"time"

	"crawlq/internal/runlog"
)

// What happens to a run's pages goes into the run's log (Config.RunLog) as it happens, with the
// time it happened, besides the process log: `crawlq logs RUN` then shows, for a declarative
// spider as for a command one, which pages died and why, and when a host was paused and lifted.
// A line that cannot be written is logged and costs the page nothing.

func (c *Crawler) pageLog() runlog.Pages { return runlog.Pages{Store: c.cfg.RunLog, Logger: c.log} }

// logPageDied records in run runID's log that the page at url died after attempts, with err,
// its last error.
func (c *Crawler) logPageDied(ctx context.Context, runID int64, url string, attempts int, err error) {
	c.pageLog().PageDied(ctx, runID, c.clk.Now(), url, attempts, err)
}

// logHostPaused records in run runID's log that host was paused until until because of cause
// (what failed, in words), and the down limit after which its pages die. Pages failing together
// may each start the same pause: it is written once.
func (c *Crawler) logHostPaused(ctx context.Context, runID int64, host, cause string, until time.Time, downLimit time.Duration) {
	if c.pauses.first(pauseKey{host, until.UnixNano()}) {
		c.pageLog().HostPaused(ctx, runID, c.clk.Now(), host, cause, until, downLimit)
	}
}

// pauseKey is one pause of a host: until when.
type pauseKey struct {
	host  string
	until int64 // UnixNano
}

// onceSet remembers the keys it was asked about, so what a run log says once is said once
// (bounded, not an LRU: such lines are few; past the bound they may be said again).
type onceSet[K comparable] struct {
	mu   sync.Mutex
	seen map[K]bool
}

// first reports whether k was not seen yet, and remembers it.
func (o *onceSet[K]) first(k K) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil || len(o.seen) >= 10000 {
		o.seen = map[K]bool{}
	}
	if o.seen[k] {
		return false
	}
	o.seen[k] = true
	return true
}

// logHostResumed records in run runID's log that host answers again: its pause is lifted.
func (c *Crawler) logHostResumed(ctx context.Context, runID int64, host string) {
	c.pageLog().HostResumed(ctx, runID, c.clk.Now(), host)
}
