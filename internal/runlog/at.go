package runlog

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"

	"crawlq/internal/dbsqlc"
)

// Entry is a line with the time what it says happened: a run log shows that time, not when the
// line was written (a state change is written when its event is published, a page's death
// after its last attempt).
type Entry struct {
	At   time.Time
	Text string
}

// TimedStore is a Store that keeps each line's own time. Postgres and CloudWatch are.
type TimedStore interface {
	AppendAt(ctx context.Context, runID int64, entries []Entry) error
}

// AppendAt adds entries to a run's log with their times when s keeps them (TimedStore), else
// each line with its time in front.
func AppendAt(ctx context.Context, s Store, runID int64, entries []Entry) error {
	if ts, ok := s.(TimedStore); ok {
		return ts.AppendAt(ctx, runID, entries)
	}
	lines := make([]string, len(entries))
	for i, e := range entries {
		lines[i] = e.At.UTC().Format(time.RFC3339Nano) + " " + e.Text
	}
	return s.Append(ctx, runID, lines)
}

// AppendAt implements TimedStore.
func (p Postgres) AppendAt(ctx context.Context, runID int64, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	arg := dbsqlc.AppendRunLogAtParams{RunID: runID, Ats: make([]time.Time, len(entries)), Lines: make([]string, len(entries))}
	for i, e := range entries {
		arg.Ats[i], arg.Lines[i] = e.At, clean(e.Text)
	}
	if err := dbsqlc.New(p.Pool).AppendRunLogAt(ctx, arg); err != nil {
		return fmt.Errorf("append run %d log: %w", runID, err)
	}
	return nil
}

// AppendAt implements TimedStore. CloudWatch wants a call's events in time order: they are sent
// so (stable, so lines of one instant keep theirs).
func (c CloudWatch) AppendAt(ctx context.Context, runID int64, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	sorted := slices.Clone(entries)
	slices.SortStableFunc(sorted, func(a, b Entry) int { return a.At.Compare(b.At) })
	ev := make([]types.InputLogEvent, len(sorted))
	for i, e := range sorted {
		ev[i] = types.InputLogEvent{Message: aws.String(clean(e.Text)), Timestamp: aws.Int64(e.At.UnixMilli())}
	}
	return c.put(ctx, runID, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String(c.Group), LogStreamName: aws.String(stream(runID)), LogEvents: ev})
}

// Pages writes what happens to a run's pages into the run's log, for `crawlq logs RUN`: a page
// that died (its URL and last error), a host paused (why, until when) and answering again. The
// crawler calls it as these happen; a failed write is logged (Logger) and does not fail the page.
// Its lines start with OwnPrefix, as crawlq's other lines in a run log do.
type Pages struct {
	Store  Store
	Logger *slog.Logger // default slog.Default()
}

func (p Pages) write(ctx context.Context, runID int64, at time.Time, line string) {
	if p.Store == nil {
		return
	}
	// The page's own context may be ending (a lease lost, a stop): the line is still the run's.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := AppendAt(wctx, p.Store, runID, []Entry{{At: at, Text: OwnPrefix + line}}); err != nil {
		l := p.Logger
		if l == nil {
			l = slog.Default()
		}
		l.Warn("run log: line not written", "run", runID, "line", line, "err", err)
	}
}

// PageDied says a page died at at: its URL, the attempts it used and its last error.
func (p Pages) PageDied(ctx context.Context, runID int64, at time.Time, url string, attempts int, err error) {
	p.write(ctx, runID, at, PageDiedLine(url, attempts, err))
}

// HostPaused says host was paused at at until until, because of cause (the failure, in words:
// connection refused, a streak of HTTP 5xx, 429 Too Many Requests, timeouts), and how long it may
// stay down before its pages die.
func (p Pages) HostPaused(ctx context.Context, runID int64, at time.Time, host, cause string, until time.Time, downLimit time.Duration) {
	p.write(ctx, runID, at, HostPausedLine(host, cause, at, until, downLimit))
}

// HostResumed says host answered again at at: its pause is lifted.
func (p Pages) HostResumed(ctx context.Context, runID int64, at time.Time, host string) {
	p.write(ctx, runID, at, HostResumedLine(host))
}

// Note writes line, something the run's log must say about its pages, as it happened at at.
func (p Pages) Note(ctx context.Context, runID int64, at time.Time, line string) {
	p.write(ctx, runID, at, line)
}

// HostPauseCleared says a redrive at at ended host's pause (it had been down since since):
// its pages are fetched at once and, if it is still down, it has its whole down limit again.
func (p Pages) HostPauseCleared(ctx context.Context, runID int64, at time.Time, host string, since time.Time) {
	p.write(ctx, runID, at, HostPauseClearedLine(host, at, since))
}

// HostPauseClearedLine is the log line of a host's pause a redrive cleared.
func HostPauseClearedLine(host string, at, since time.Time) string {
	return fmt.Sprintf("redrive: host %s's pause cleared (down since %s, %s before): its pages are fetched now; if it still fails, its down limit starts again",
		host, since.UTC().Format("15:04:05.000"), at.Sub(since).Round(time.Millisecond))
}

// ProxyRested says a spider's proxy (its URL, password redacted) was rested at at for d,
// because of cause (it failed, or a page through it was banned).
func (p Pages) ProxyRested(ctx context.Context, runID int64, at time.Time, proxy, cause string, d time.Duration) {
	p.write(ctx, runID, at, ProxyRestedLine(proxy, cause, d))
}

// PageKept says a rendered page failed at at and what it looked like was kept for the operator:
// files (its screenshot and HTML), which `crawlq artifacts RUN` lists and saves. note, when not
// empty, says why they were not kept instead.
func (p Pages) PageKept(ctx context.Context, runID int64, at time.Time, url string, attempt int, err error, files []string, note string) {
	p.write(ctx, runID, at, PageKeptLine(runID, url, attempt, err, files, note))
}

// PageKeptLine is the log line of a failed rendered page and its kept screenshot and HTML.
func PageKeptLine(runID int64, url string, attempt int, err error, files []string, note string) string {
	head := fmt.Sprintf("rendered page failed (attempt %d): %s: %v; ", attempt, url, err)
	if note != "" {
		return head + "its screenshot and HTML not kept: " + note
	}
	return head + fmt.Sprintf("kept what it looked like: %s (crawlq artifacts %d)", strings.Join(files, ", "), runID)
}

// ProxyRestedLine is the log line of a proxy rested.
func ProxyRestedLine(proxy, cause string, d time.Duration) string {
	return fmt.Sprintf("proxy %s rested for %s: %s; its pages go through the other proxies without counting attempts", proxy, d.Round(time.Millisecond), cause)
}

// PageDiedLine is the log line of a page that died.
func PageDiedLine(url string, attempts int, err error) string {
	return fmt.Sprintf("page died after %d attempt%s: %s: %v", attempts, plural(attempts), url, err)
}

// HostPausedLine is the log line of a host paused at at until until.
func HostPausedLine(host, cause string, at, until time.Time, downLimit time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "host %s paused until %s", host, until.UTC().Format("15:04:05.000"))
	if d := until.Sub(at); d > 0 {
		fmt.Fprintf(&b, " (%s)", d.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, ": %s; its pages wait without counting attempts", cause)
	if downLimit > 0 {
		fmt.Fprintf(&b, ", and die once it has been down %s", downLimit)
	}
	return b.String()
}

// HostResumedLine is the log line of a host that answers again.
func HostResumedLine(host string) string {
	return fmt.Sprintf("host %s answers again: its pause is lifted, its pages go on", host)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
