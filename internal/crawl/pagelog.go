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
	if c.pauses.first(host, until) {
		c.pageLog().HostPaused(ctx, runID, c.clk.Now(), host, cause, until, downLimit)
	}
}

// pauseLog remembers the last pause of each host written to a run log.
type pauseLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// first reports whether host's pause until until is not written yet, and remembers it.
func (p *pauseLog) first(host string, until time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil || len(p.last) >= 10000 { // a bound, not an LRU: failing hosts are few
		p.last = map[string]time.Time{}
	}
	if p.last[host].Equal(until) {
		return false
	}
	p.last[host] = until
	return true
}

// logHostResumed records in run runID's log that host answers again: its pause is lifted.
func (c *Crawler) logHostResumed(ctx context.Context, runID int64, host string) {
	c.pageLog().HostResumed(ctx, runID, c.clk.Now(), host)
}
