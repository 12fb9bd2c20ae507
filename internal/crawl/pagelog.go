package crawl

import (
	"context"
	"time"

	"crawlq/internal/runlog"
)

// What happens to a run's pages goes into the run's log (Config.RunLog) as it happens, with the
// time it happened, besides the process log: `crawlq logs RUN` then shows, for a declarative
// spider as for a command one, which pages died and why, and when a host was paused and lifted.
// A line that cannot be written is logged and costs the page nothing.

func (c *Crawler) pageLog() runlog.Pages { return runlog.Pages{Store: c.cfg.RunLog, Logger: c.log} }

// clock is the time of a run log line: Config.Now when set (tests), else this process's clock.
func (c *Crawler) clock() time.Time {
	if c.cfg.Now != nil {
		return c.cfg.Now()
	}
	return time.Now()
}

// logPageDied records in run runID's log that the page at url died after attempts, with err,
// its last error.
func (c *Crawler) logPageDied(ctx context.Context, runID int64, url string, attempts int, err error) {
	c.pageLog().PageDied(ctx, runID, c.clock(), url, attempts, err)
}

// logHostPaused records in run runID's log that host was paused until until because of cause
// (what failed, in words), and the down limit after which its pages die.
func (c *Crawler) logHostPaused(ctx context.Context, runID int64, host, cause string, until time.Time, downLimit time.Duration) {
	c.pageLog().HostPaused(ctx, runID, c.clock(), host, cause, until, downLimit)
}

// logHostResumed records in run runID's log that host answers again after downFor down.
func (c *Crawler) logHostResumed(ctx context.Context, runID int64, host string, downFor time.Duration) {
	c.pageLog().HostResumed(ctx, runID, c.clock(), host, downFor)
}
