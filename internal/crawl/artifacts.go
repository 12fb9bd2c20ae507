package crawl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"crawlq/internal/artifact"
	"crawlq/internal/browser"
	"crawlq/internal/queue"
)

// A rendered page that fails (a timeout waiting for its selector, a status >= 400, a script
// that never settles) keeps what it looked like, its screenshot and HTML, for the operator
// (internal/artifact, bounded per run), named in the run's log line of the failure. Keeping
// them costs the page nothing: a write that fails is said in the process log and the run's log.

// keepFailedPage keeps page job job's failed render r of url (run runID) and says so in the run's log.
func (c *Crawler) keepFailedPage(ctx context.Context, runID int64, job *queue.Job, url string, r *browser.Result, perr error) {
	if r == nil || (len(r.Screenshot) == 0 && r.HTML == "") {
		return
	}
	at := c.clk.Now()
	// The page's own context may be ending (a lease lost, a stop): what it looked like is still the run's.
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	info, err := c.cfg.Artifacts.Keep(kctx, artifact.Page{RunID: runID, JobID: job.ID, Attempt: job.Attempt, URL: url, Err: perr.Error(),
		At: at, Screenshot: r.Screenshot, HTML: []byte(r.HTML)})
	switch {
	case errors.Is(err, artifact.ErrFull):
		if c.full.first(runID) {
			c.log.Warn("failed rendered pages not kept: the run keeps the most it may", "run", runID, "max_pages", artifact.MaxPages)
			c.pageLog().PageKept(ctx, runID, at, url, job.Attempt, perr, nil,
				fmt.Sprintf("the run keeps %d failed pages already (the bound); no more are kept", artifact.MaxPages))
		}
	case err != nil:
		c.log.Warn("failed rendered page not kept", "run", runID, "url", url, "err", err)
		c.pageLog().PageKept(ctx, runID, at, url, job.Attempt, perr, nil, err.Error())
	default:
		c.log.Info("failed rendered page kept", "run", runID, "url", url, "artifact", info.Name, "png_bytes", info.PNGBytes, "html_bytes", info.HTMLBytes)
		c.pageLog().PageKept(ctx, runID, at, url, job.Attempt, perr, info.Files(), "")
	}
}

// fullRuns remembers the runs this process found keeping the most failed pages they may, so
// that is said once per run, not at each further failure.
type fullRuns struct {
	mu   sync.Mutex
	runs map[int64]bool
}

// first reports whether run is not yet known full, and remembers it.
func (f *fullRuns) first(run int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs == nil || len(f.runs) >= 10000 { // a bound, not an LRU
		f.runs = map[int64]bool{}
	}
	if f.runs[run] {
		return false
	}
	f.runs[run] = true
	return true
}
