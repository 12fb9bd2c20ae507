// Package events owns run events and run reports. A trigger (migration 0009) records every state
// change of a run in an outbox, crawlq_run_event, in the transaction that makes it; the Publisher
// drains that outbox to Amazon EventBridge (source "crawlq", detail-type "Run State Change") at
// least once and in order per run, retrying failures with backoff, and never touches the run.
// When it first meets a run's final event it judges the run against the monitors of the spider
// version the run ran (internal/monitor), stores the verdict with the run's field coverage and
// figures (crawlq_run_report), writes the monitor metrics (EMF), and only then publishes the
// event, so the event carries the verdict. A run redriven and finished again has a new final
// event, and is judged again by it: the report and metrics then say how it ended this time.
//
// Events go out as soon as the process that changed a run can publish them (PublishRuns, for
// the runs it changed): a long-running process (`crawlq worker`, `crawlq runner`, a worker
// Lambda's invocation) runs a Loop that its own state changes poke, and the api function
// publishes before it answers. The ticks (the dispatch function's, a worker's maintenance loop) drain
// what is left (Drain): changes made by processes that do not publish, and events whose publish
// failed. Concurrent publishers claim different events.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"

	"crawlq/internal/clock"
	"crawlq/internal/dbsqlc"
	"crawlq/internal/metrics"
	"crawlq/internal/monitor"
	"crawlq/internal/spider"
)

// Event vocabulary: what a rule matches on.
const (
	DefaultSource     = "crawlq"
	DetailType        = "Run State Change"
	DefaultBus        = "default"
	maxEntriesPerCall = 10 // PutEvents' limit
)

// Putter is the part of the EventBridge client the publisher uses; *eventbridge.Client is one.
type Putter interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// RunLog receives the lines of a run's published events (state changes, the final figures with
// the retries summary, monitor verdicts), to keep with the run's own log, each with the time it
// happened (the state change's, the verdict's). The per-run log store (internal/runlog) adapts
// to it; nil: none.
type RunLog interface {
	RunEvent(ctx context.Context, runID int64, at time.Time, line string) error
}

// Config wires a Publisher. Pool is required.
type Config struct {
	Pool DB
	// Putter publishes to EventBridge. Nil turns publishing off: runs are still judged, and each
	// event is marked done with last_error saying it was not published. Default nil.
	Putter Putter
	// Bus is the event bus name or ARN. Default "default".
	Bus string
	// Source is the events' source. Default "crawlq".
	Source string
	// Monitors returns the monitors a version of a spider declares (spider.Registry.Monitors): a
	// run is judged by those of the version it ran (crawlq_spider_run), "" when it has none on
	// record (a spider known only in-process). An error wrapping spider.ErrUnknownSpider or
	// spider.ErrUnknownVersion (the version was deleted since) judges the run without monitors,
	// with a warning; any other error puts the event back, to judge it later. Default: none.
	Monitors func(spiderName, version string) (spider.Monitors, error)
	// Metrics receives the monitor metrics as EMF lines (the dispatch function's stdout).
	// Default: none written.
	Metrics io.Writer
	// Namespace is the metrics' CloudWatch namespace. Default "crawlq".
	Namespace string
	// SpiderTotals writes the monitor metrics per monitor kind only, without the Spider
	// dimension (metrics.Writer.SpiderTotals). Default false.
	SpiderTotals bool
	// Log receives a line per event for the run's log. Default none.
	Log RunLog
	// Batch is events per PutEvents call, 1..10. Default 10.
	Batch int
	// MaxCalls bounds the PutEvents calls of one Drain or PublishRuns (so one publishes at most
	// 10x this many events; the rest go at the next). Default 200.
	MaxCalls int
	// Lease is how long a claimed event is kept from other publishers while this one publishes
	// it. Default 1m.
	Lease time.Duration
	// Backoff is the wait before retrying an event after its attempt'th failure. Default
	// 2^attempt seconds, at most 5m.
	Backoff func(attempt int) time.Duration
	// Retention is how long published events are kept. Default 7 days.
	Retention time.Duration
	// Clock dates the monitor metrics and measures Retention back from. Default the wall clock.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Pool == nil:
		return errors.New("events: Pool is required")
	case c.Batch < 0 || c.Batch > maxEntriesPerCall:
		return fmt.Errorf("events: Batch %d: want 1..%d", c.Batch, maxEntriesPerCall)
	case c.MaxCalls < 0:
		return errors.New("events: MaxCalls must not be negative")
	case c.Lease < 0:
		return errors.New("events: Lease must not be negative")
	case c.Retention < 0:
		return errors.New("events: Retention must not be negative")
	}
	return nil
}

// Publisher drains the run-event outbox. Safe for concurrent use; concurrent Drains and
// PublishRuns (ticks, and pokes in several processes) take different events.
type Publisher struct {
	cfg Config
	log *slog.Logger
}

// New returns a Publisher.
func New(cfg Config) (*Publisher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Bus == "" {
		cfg.Bus = DefaultBus
	}
	if cfg.Source == "" {
		cfg.Source = DefaultSource
	}
	if cfg.Monitors == nil {
		cfg.Monitors = func(string, string) (spider.Monitors, error) { return spider.Monitors{}, nil }
	}
	if cfg.Batch == 0 {
		cfg.Batch = maxEntriesPerCall
	}
	if cfg.MaxCalls == 0 {
		cfg.MaxCalls = 200
	}
	if cfg.Lease == 0 {
		cfg.Lease = time.Minute
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(attempt int) time.Duration {
			return time.Duration(math.Min(math.Pow(2, float64(attempt)), 300)) * time.Second
		}
	}
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Publisher{cfg: cfg, log: cfg.Logger}, nil
}

// event is one claimed outbox row.
type event struct {
	ID        int64
	RunID     int64
	Spider    string
	State     string
	PrevState string
	At        time.Time
	Attempts  int
	snap      snapshot
	// Version is the spider version the run pinned or started with (crawlq_spider_run), "" when
	// none is on record.
	Version string
}

// Detail is the detail of a "Run State Change" event.
type Detail struct {
	RunID         int64  `json:"run_id"`
	Spider        string `json:"spider"`
	Version       string `json:"version,omitempty"`
	State         string `json:"state"` // pending (scheduled), running, succeeded, incomplete, failed, cancelled
	PreviousState string `json:"previous_state,omitempty"`
	// Outcome is set on final events: the state, except "monitors_failed" for a run that
	// succeeded (or ended incomplete) while a monitor failed.
	Outcome string `json:"outcome,omitempty"`
	// Sequence increases with each event of a run (the outbox id): order by it, drop repeats.
	Sequence int64     `json:"sequence"`
	Time     time.Time `json:"time"`
	Error    string    `json:"error,omitempty"`
	Stats    Stats     `json:"stats"`
	// Monitors and FieldCoverage are set on final events.
	Monitors      *MonitorsDetail  `json:"monitors,omitempty"`
	FieldCoverage map[string]int64 `json:"field_coverage,omitempty"`
	ItemsStored   *int64           `json:"items_stored,omitempty"`
	// Truncated says parts were left out to keep the event within EventBridge's size limit
	// (the field coverage of a run with very many fields, a very long error); `crawlq run ID`
	// has them all.
	Truncated bool `json:"truncated,omitempty"`
	// judgedAt is when the run was judged (final events), for the run log.
	judgedAt time.Time
}

// bookkeepingTimeout bounds the statements that record a batch's outcome.
const bookkeepingTimeout = 10 * time.Second

// maxDetail bounds one event's detail; PutEvents takes at most 256 KB per call, all entries
// together, and put splits batches to stay under that.
const (
	maxDetail   = 64 << 10
	maxCallSize = 250_000
)

// encodeDetail encodes d, leaving out what does not fit in maxDetail.
func encodeDetail(d *Detail) ([]byte, error) {
	body, err := json.Marshal(d)
	if err != nil || len(body) <= maxDetail {
		return body, err
	}
	c := *d
	c.Truncated = true
	c.Error = truncate(c.Error)
	if body, err = json.Marshal(&c); err != nil || len(body) <= maxDetail {
		return body, err
	}
	c.FieldCoverage = nil
	if c.Monitors != nil {
		m := *c.Monitors
		m.Results = nil
		for _, r := range c.Monitors.Results {
			if r.Status == monitor.StatusFailed {
				r.Message = truncate(r.Message)
				m.Results = append(m.Results, r)
			}
		}
		c.Monitors = &m
	}
	c.Stats.ErrorsByKind = nil
	return json.Marshal(&c)
}

// MonitorsDetail is the monitors' verdict in an event.
type MonitorsDetail struct {
	Status  string           `json:"status"` // passed, failed, none, skipped
	Results []monitor.Result `json:"results"`
}

// Outcome is a final run's outcome as events and listings show it.
func Outcome(state, monitors string) string {
	if monitors == monitor.StatusFailed && (state == "succeeded" || state == "incomplete") {
		return "monitors_failed"
	}
	return state
}

// Result says what a Drain or PublishRuns did.
type Result struct {
	Published int `json:"published"`
	Failed    int `json:"failed"` // events whose publish failed this time (retried later)
	Judged    int `json:"judged"` // runs judged against their monitors
	Pruned    int `json:"pruned"`
}

// Drain publishes the due events, a batch at a time, until none is due or MaxCalls is reached,
// then deletes events published more than Retention ago: what a tick runs. A failed batch is put
// back with backoff and the error returned; the runs are never touched.
func (p *Publisher) Drain(ctx context.Context) (Result, error) {
	var res Result
	var err error
	for call := 0; call < p.cfg.MaxCalls; call++ {
		var evs []*event
		if evs, err = p.claim(ctx, nil); err != nil || len(evs) == 0 {
			break
		}
		if err = p.publish(ctx, evs, &res); err != nil {
			break // EventBridge is failing: the rest waits for the backoff
		}
	}
	n, perr := p.prune(ctx)
	res.Pruned = n
	return res, errors.Join(err, perr)
}

// PublishRuns publishes the due events of the given runs, in order per run, until none of them
// has one left or MaxCalls is reached: what a process runs right after it changed these runs.
// It takes no other run's events, so concurrent callers do not queue on each other's rows and
// none publishes a backlog it did not make; that is the ticks' (Drain). A run whose oldest
// unpublished event is not due (another publisher has it, or it waits for a retry) is left to
// them too. A failed batch is put back with backoff and the error returned.
func (p *Publisher) PublishRuns(ctx context.Context, runIDs []int64) (Result, error) {
	var res Result
	calls := 0
	for len(runIDs) > 0 && calls < p.cfg.MaxCalls {
		part := runIDs[:min(len(runIDs), p.cfg.Batch)] // one event per run per claim: a batch
		runIDs = runIDs[len(part):]
		for ; calls < p.cfg.MaxCalls; calls++ {
			evs, err := p.claim(ctx, part)
			if err != nil {
				return res, err
			}
			if len(evs) == 0 {
				break
			}
			if err := p.publish(ctx, evs, &res); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// claim leases a batch of due events: any run's (runIDs nil) or the oldest unpublished one of
// each of runIDs.
func (p *Publisher) claim(ctx context.Context, runIDs []int64) ([]*event, error) {
	q := dbsqlc.New(p.cfg.Pool)
	var rows []dbsqlc.ClaimRunEventsRow
	var err error
	if runIDs == nil {
		rows, err = q.ClaimRunEvents(ctx, dbsqlc.ClaimRunEventsParams{MaxEvents: int32(p.cfg.Batch), LeaseUs: p.cfg.Lease.Microseconds()})
	} else {
		var of []dbsqlc.ClaimRunEventsOfRow
		of, err = q.ClaimRunEventsOf(ctx, dbsqlc.ClaimRunEventsOfParams{RunIds: runIDs, LeaseUs: p.cfg.Lease.Microseconds()})
		for _, r := range of {
			rows = append(rows, dbsqlc.ClaimRunEventsRow(r))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("claim run events: %w", err)
	}
	out := make([]*event, 0, len(rows))
	for _, r := range rows {
		ev := &event{ID: r.ID, RunID: r.RunID, Spider: r.Spider, State: r.State, PrevState: r.PrevState, At: r.CreatedAt, Attempts: int(r.Attempts)}
		if err := json.Unmarshal(r.Run, &ev.snap); err != nil {
			return nil, fmt.Errorf("run event %d: %w", ev.ID, err)
		}
		out = append(out, ev)
	}
	return out, p.versions(ctx, out)
}

// versions fills in the version each event's run pinned or started with, in one query.
func (p *Publisher) versions(ctx context.Context, evs []*event) error {
	ids := make([]int64, 0, len(evs))
	for _, ev := range evs {
		if ev.Version = ev.snap.version(); ev.Version == "" {
			ids = append(ids, ev.RunID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	recs, err := dbsqlc.New(p.cfg.Pool).SpiderRuns(ctx, ids)
	if err != nil {
		return fmt.Errorf("run versions: %w", err)
	}
	byRun := make(map[int64]string, len(recs))
	for _, r := range recs {
		byRun[r.RunID] = r.Version
	}
	for _, ev := range evs {
		if ev.Version == "" {
			ev.Version = byRun[ev.RunID]
		}
	}
	return nil
}

// publish judges final runs, sends the batch and records each event's outcome.
func (p *Publisher) publish(ctx context.Context, evs []*event, res *Result) error {
	entries := make([]ebtypes.PutEventsRequestEntry, 0, len(evs))
	details := make([]*Detail, 0, len(evs))
	var ok, bad []int64
	var badErr []string
	for _, ev := range evs {
		d, err := p.detail(ctx, ev, res)
		if err != nil {
			// The run cannot be judged now (a database error): retry the event later rather
			// than publish it without its verdict.
			bad, badErr = append(bad, ev.ID), append(badErr, err.Error())
			continue
		}
		body, err := encodeDetail(d)
		if err != nil {
			return fmt.Errorf("encode run event %d: %w", ev.ID, err)
		}
		details = append(details, d)
		entries = append(entries, ebtypes.PutEventsRequestEntry{
			EventBusName: aws.String(p.cfg.Bus), Source: aws.String(p.cfg.Source), DetailType: aws.String(DetailType),
			Detail: aws.String(string(body)), Time: aws.Time(ev.At),
		})
	}
	var callErr error
	note := ""
	switch {
	case len(entries) == 0:
	case p.cfg.Putter == nil:
		note = notPublished + "publishing is off"
		for _, d := range details {
			ok = append(ok, d.Sequence)
		}
	default:
		results, err := p.put(ctx, entries)
		if err != nil {
			callErr = fmt.Errorf("put run events: %w", err)
			for _, d := range details {
				bad, badErr = append(bad, d.Sequence), append(badErr, err.Error())
			}
			break
		}
		for i, d := range details {
			if results[i] == "" {
				ok = append(ok, d.Sequence)
			} else {
				bad, badErr = append(bad, d.Sequence), append(badErr, results[i])
			}
		}
	}
	// What EventBridge answered is recorded even when ctx ends meanwhile (a prompt publish's
	// short timeout, a stopping process): an accepted event left unmarked would go out again
	// after its lease.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeepingTimeout)
	defer cancel()
	if len(ok) > 0 {
		if err := dbsqlc.New(p.cfg.Pool).MarkRunEventsPublished(bctx, dbsqlc.MarkRunEventsPublishedParams{Ids: ok, Note: note}); err != nil {
			// Published but not marked: they go out again after the lease (at least once).
			return fmt.Errorf("mark run events published: %w", err)
		}
		res.Published += len(ok)
		p.logEvents(bctx, details, ok)
	}
	if len(bad) > 0 {
		res.Failed += len(bad)
		byAttempt := map[int64]int{}
		for _, ev := range evs {
			byAttempt[ev.ID] = ev.Attempts
		}
		for i, id := range bad {
			wait := p.cfg.Backoff(byAttempt[id])
			if ctx.Err() != nil {
				// Our caller ran out of time, EventBridge refused nothing: due again at once.
				wait = 0
			}
			err := dbsqlc.New(p.cfg.Pool).RetryRunEvents(bctx, dbsqlc.RetryRunEventsParams{
				Ids: []int64{id}, WaitUs: wait.Microseconds(), LastError: truncate(badErr[i]),
			})
			if err != nil {
				return errors.Join(callErr, fmt.Errorf("put back run event %d: %w", id, err))
			}
		}
		p.log.Warn("events: run events not published; retrying with backoff", "events", len(bad), "first_error", badErr[0])
		if callErr == nil {
			callErr = fmt.Errorf("put run events: %d of %d failed: %s", len(bad), len(evs), badErr[0])
		}
	}
	return callErr
}

// put sends entries and returns, per entry, "" when it was accepted or why not. When EventBridge
// refuses the whole request (an API error such as a ValidationException, not a failure to reach
// it), the entries are sent one by one, so one bad event (too large, say) fails alone instead of
// holding back every event batched with it on each retry.
func (p *Publisher) put(ctx context.Context, entries []ebtypes.PutEventsRequestEntry) ([]string, error) {
	if n := fitting(entries); n < len(entries) {
		// Each part's failure is its entries' own: what one part published stays published.
		var results []string
		for _, part := range [][]ebtypes.PutEventsRequestEntry{entries[:n], entries[n:]} {
			r, err := p.put(ctx, part)
			if err != nil {
				r = make([]string, len(part))
				for i := range r {
					r[i] = err.Error()
				}
			}
			results = append(results, r...)
		}
		return results, nil
	}
	out, err := p.cfg.Putter.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
	var apiErr smithy.APIError
	if err != nil && len(entries) > 1 && errors.As(err, &apiErr) {
		results := make([]string, len(entries))
		for i := range entries {
			r, err := p.put(ctx, entries[i:i+1])
			if err != nil {
				results[i] = err.Error()
			} else {
				results[i] = r[0]
			}
		}
		return results, nil
	}
	if err != nil {
		return nil, err
	}
	results := make([]string, len(entries))
	for i := range entries {
		switch {
		case i >= len(out.Entries):
			results[i] = "no result for the entry"
		case out.Entries[i].ErrorCode != nil:
			results[i] = aws.ToString(out.Entries[i].ErrorCode) + ": " + aws.ToString(out.Entries[i].ErrorMessage)
		}
	}
	return results, nil
}

// fitting returns how many of the entries, from the first, one PutEvents call takes (at least
// one), counting sizes as EventBridge does (source, detail-type, detail, bus name, 14 for a time).
func fitting(entries []ebtypes.PutEventsRequestEntry) int {
	size := 0
	for i, e := range entries {
		size += len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail)) +
			len(aws.ToString(e.EventBusName)) + 14
		if size > maxCallSize && i > 0 {
			return i
		}
	}
	return len(entries)
}

// detail builds an event's detail, judging the run first when the event is its final one.
func (p *Publisher) detail(ctx context.Context, ev *event, res *Result) (*Detail, error) {
	d := &Detail{RunID: ev.RunID, Spider: ev.Spider, Version: ev.Version, State: ev.State, PreviousState: ev.PrevState,
		Sequence: ev.ID, Time: ev.At, Stats: ev.snap.stats()}
	if ev.snap.Error != nil {
		d.Error = *ev.snap.Error
	}
	if !IsFinal(ev.State) {
		return d, nil
	}
	rep, fresh, err := judge(ctx, p.cfg.Pool, func() (spider.Monitors, error) { return p.monitors(ev) }, ev)
	if err != nil {
		return nil, err
	}
	if fresh {
		res.Judged++
		p.recordVerdict(ctx, rep)
	}
	d.Outcome = Outcome(ev.State, rep.Monitors)
	d.Monitors = &MonitorsDetail{Status: rep.Monitors, Results: rep.Results}
	d.judgedAt = rep.EvaluatedAt
	d.FieldCoverage, d.ItemsStored = rep.Coverage, rep.ItemsStored
	return d, nil
}

// monitors returns the monitors of the version ev's run ran.
func (p *Publisher) monitors(ev *event) (spider.Monitors, error) {
	m, err := p.cfg.Monitors(ev.Spider, ev.Version)
	if errors.Is(err, spider.ErrUnknownSpider) || errors.Is(err, spider.ErrUnknownVersion) {
		// Deleted since the run (or never known to this process): a retry would not find it.
		p.log.Warn("events: the spider version a run ran is not known here; judging the run without monitors",
			"run", ev.RunID, "spider", ev.Spider, "version", ev.Version, "err", err)
		return spider.Monitors{}, nil
	}
	if err != nil {
		return spider.Monitors{}, fmt.Errorf("monitors of spider %s version %q: %w", ev.Spider, ev.Version, err)
	}
	return m, nil
}

// recordVerdict writes a freshly judged run's monitor metrics (its run log lines come with its
// final event's, logEvents). They report a verdict already stored, so their failure is logged,
// not retried.
func (p *Publisher) recordVerdict(ctx context.Context, rep *Report) {
	if p.cfg.Metrics != nil {
		var ms []metrics.MonitorStat
		for _, r := range rep.Results {
			if r.Status == monitor.StatusPassed || r.Status == monitor.StatusFailed {
				ms = append(ms, metrics.MonitorStat{Spider: rep.Spider, Monitor: r.Monitor, Failed: r.Status == monitor.StatusFailed})
			}
		}
		w := metrics.Writer{Namespace: p.cfg.Namespace, W: p.cfg.Metrics, SpiderTotals: p.cfg.SpiderTotals}
		if err := w.WriteMonitors(p.cfg.Clock.Now(), ms); err != nil {
			p.log.Error("events: write monitor metrics", "run", rep.RunID, "err", err)
		}
	}
	lvl := slog.LevelDebug
	if rep.Monitors == monitor.StatusFailed {
		lvl = slog.LevelWarn
	}
	p.log.Log(ctx, lvl, "events: run judged", "run", rep.RunID, "spider", rep.Spider, "state", rep.State, "monitors", rep.Monitors)
}

func (p *Publisher) logEvents(ctx context.Context, details []*Detail, ok []int64) {
	if p.cfg.Log == nil {
		return
	}
	done := map[int64]bool{}
	for _, id := range ok {
		done[id] = true
	}
	for _, d := range details {
		if !done[d.Sequence] {
			continue
		}
		line := "state " + d.State
		if d.Outcome != "" && d.Outcome != d.State {
			line += " (" + d.Outcome + ")"
		}
		if d.Error != "" {
			line += ": " + d.Error
		}
		type entry struct {
			at   time.Time
			line string
		}
		lines := []entry{{d.Time, line}}
		if IsFinal(d.State) {
			// The final state, the figures that got the run there, and how it was judged.
			lines = append(lines, entry{d.Time, summaryLine(d.Stats)})
			if d.Monitors != nil {
				for _, r := range d.Monitors.Results {
					l := "monitor " + r.Monitor
					if r.Field != "" {
						l += " " + r.Field
					}
					lines = append(lines, entry{d.judgedAt, l + ": " + r.Status + ": " + r.Message})
				}
			}
		}
		for _, e := range lines {
			if err := p.cfg.Log.RunEvent(ctx, d.RunID, e.at, e.line); err != nil {
				p.log.Error("events: write run log", "run", d.RunID, "err", err)
			}
		}
	}
}

// summaryLine is a finished run's figures for its log: pages, items, errors, and the retries,
// host pauses and dead pages that got it there, with the errors by kind.
func summaryLine(st Stats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pages %d, items %d, errors %d, retries %d", st.Pages, st.Items, st.Errors, st.Retries)
	if st.HostPauses > 0 {
		fmt.Fprintf(&b, ", host pauses %d", st.HostPauses)
	}
	if st.DeadPages != nil {
		fmt.Fprintf(&b, ", dead pages %d", *st.DeadPages)
	}
	kinds := slices.Collect(maps.Keys(st.ErrorsByKind))
	if len(kinds) > 0 {
		slices.Sort(kinds)
		b.WriteString(" (by kind, retries and errors:")
		for _, k := range kinds {
			fmt.Fprintf(&b, " %s %d", k, st.ErrorsByKind[k])
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " in %s", (time.Duration(st.Duration * float64(time.Second))).Round(time.Millisecond))
	return b.String()
}

func (p *Publisher) prune(ctx context.Context) (int, error) {
	n, err := dbsqlc.New(p.cfg.Pool).PruneRunEvents(ctx, dbsqlc.PruneRunEventsParams{Before: p.cfg.Clock.Now().Add(-p.cfg.Retention), MaxEvents: 1000})
	if err != nil {
		return 0, fmt.Errorf("prune run events: %w", err)
	}
	return int(n), nil
}

// Backlog returns how many events wait to be published and how old the oldest is.
func Backlog(ctx context.Context, db DB) (int64, time.Duration, error) {
	b, err := dbsqlc.New(db).RunEventBacklog(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("run event backlog: %w", err)
	}
	return b.Events, time.Duration(b.OldestSeconds * float64(time.Second)), nil
}

// notPublished starts the note an event is marked done with when it was not sent (publishing
// off): the outbox's published_at then says only that the event is done.
const notPublished = "not published: "

// Recorded is an outbox row as RunEvents lists it: published (PublishedAt), done without being
// published (NotPublished says why), or waiting (neither; LastError says why the last attempt
// failed, if one did). Never two of these at once.
type Recorded struct {
	ID        int64     `json:"id"`
	RunID     int64     `json:"run_id"`
	Spider    string    `json:"spider"`
	State     string    `json:"state"`
	PrevState string    `json:"previous_state,omitempty"`
	At        time.Time `json:"at"`
	// PublishedAt is when EventBridge accepted the event; nil when it was not sent.
	PublishedAt *time.Time `json:"published_at,omitempty"`
	// NotPublished says why the event was done with without being sent: "publishing is off"
	// (no event bus configured). Such an event is never sent later.
	NotPublished string `json:"not_published,omitempty"`
	Attempts     int    `json:"attempts"`
	// LastError is why the last attempt to publish a waiting event failed.
	LastError string `json:"last_error,omitempty"`
}

// Done reports whether the publisher is done with the event: published, or not to be.
func (r Recorded) Done() bool { return r.PublishedAt != nil || r.NotPublished != "" }

// RunEvents lists a run's recorded events in order, published or not.
func RunEvents(ctx context.Context, db DB, runID int64) ([]Recorded, error) {
	rows, err := dbsqlc.New(db).RunEvents(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("events of run %d: %w", runID, err)
	}
	var out []Recorded
	for _, r := range rows {
		e := Recorded{ID: r.ID, RunID: r.RunID, Spider: r.Spider, State: r.State, PrevState: r.PrevState.String,
			At: r.CreatedAt, PublishedAt: r.PublishedAt, Attempts: int(r.Attempts), LastError: r.LastError.String}
		// Marked done with a note (MarkRunEventsPublished): done, not published. A published
		// event's last_error is cleared when it is marked.
		if e.PublishedAt != nil && e.LastError != "" {
			e.NotPublished = strings.TrimPrefix(e.LastError, notPublished)
			e.PublishedAt, e.LastError = nil, ""
		}
		out = append(out, e)
	}
	return out, nil
}

func truncate(s string) string {
	if len(s) > 1000 {
		return s[:1000] + "..."
	}
	return s
}
