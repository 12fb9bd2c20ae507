package runlog

import (
	"context"
	"time"
)

// EventLog puts a run's published events (state changes, monitor verdicts) into its log, so
// `crawlq logs RUN` tells the whole story beside the command's own output. It is the
// events.RunLog a publisher writes to.
type EventLog struct{ Store Store }

// OwnPrefix starts the lines crawlq itself writes into a run's log (its events here, and the
// command runner's lines about the command), telling them from the command's own output: the
// Scrapyd API serves them in Scrapy's log format ("<time> [crawlq] INFO: ...").
const OwnPrefix = "crawlq: "

// RunEvent appends line to run runID's log, at the time at it happened.
func (l EventLog) RunEvent(ctx context.Context, runID int64, at time.Time, line string) error {
	return AppendAt(ctx, l.Store, runID, []Entry{{At: at, Text: OwnPrefix + line}})
}
