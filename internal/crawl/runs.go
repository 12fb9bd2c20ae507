package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/runstat"
	"crawlq/internal/spider"
	"crawlq/internal/urlstate"
)

// Run is a spider run as stored.
type Run struct {
	ID              int64             `json:"id"`
	Spider          string            `json:"spider"`
	Args            map[string]string `json:"args"`
	Settings        Overrides         `json:"settings"`
	Priority        int               `json:"priority"`
	Queue           string            `json:"queue"`
	State           string            `json:"state"`
	IdempotencyKey  string            `json:"idempotency_key,omitempty"`
	CancelRequested bool              `json:"cancel_requested"`
	Error           string            `json:"error,omitempty"`
	CreatedAt       time.Time         `json:"created_at"`
	RunAt           time.Time         `json:"run_at"`
	StartedAt       *time.Time        `json:"started_at,omitempty"`
	FinishedAt      *time.Time        `json:"finished_at,omitempty"`
	Stats           Stats             `json:"stats"`
	// DeadPages counts the run's pages that are dead (their retries exhausted, their host down
	// past its limit or their address refused, and not redriven since), so far while it runs;
	// FailedPages lists a few of them with their last error, set when the run finishes.
	DeadPages   int64        `json:"dead_pages"`
	FailedPages []FailedPage `json:"failed_pages"`
}

// FailedPage is a page of a run that died, with the error of its last attempt.
type FailedPage struct {
	URL      string `json:"url"`
	Error    string `json:"error"`
	Attempts int    `json:"attempts"`
}

// Run states. A run ends in one of the last four:
//   - succeeded: every page ended well (fetched, or a recorded 4xx, robots.txt refusal, ...);
//   - incomplete: some pages died; what the run got is kept, and redrive retries the dead pages;
//   - failed: the run could not start, nothing was fetched, or more pages died than the spider's
//     retry.max_dead_share allows;
//   - cancelled.
const (
	StatePending    = "pending"
	StateRunning    = "running"
	StateSucceeded  = "succeeded"
	StateIncomplete = "incomplete"
	StateFailed     = "failed"
	StateCancelled  = "cancelled"
)

// States lists every run state, live ones first.
var States = []string{StatePending, StateRunning, StateSucceeded, StateIncomplete, StateFailed, StateCancelled}

// FinishedStates lists the final run states.
var FinishedStates = []string{StateSucceeded, StateIncomplete, StateFailed, StateCancelled}

// Finished reports whether the run is in a final state.
func (r *Run) Finished() bool { return slices.Contains(FinishedStates, r.State) }

// Stats are a run's counters: final once it finished, so far while it runs.
type Stats struct {
	Pages   int64 `json:"pages"`
	Items   int64 `json:"items"`
	Bytes   int64 `json:"bytes"`
	Errors  int64 `json:"errors"`
	Retries int64 `json:"retries"`
	// HostPauses counts the times a host of the run was found down and paused: a wait, not an
	// error (its pages were put back without an attempt counted), so a counter apart from
	// ErrorsByKind.
	HostPauses   int64            `json:"host_pauses"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
	// Changes counts the run's items new, changed, unchanged and gone against the URL state
	// before it, for a spider that keeps one (revisit changed_only or adaptive; else nil).
	Changes  *urlstate.Counts `json:"changes,omitempty"`
	Duration float64          `json:"duration_seconds"`
}

// runFromRow decodes a stored run.
func runFromRow(row dbsqlc.CrawlqRun) (*Run, error) {
	r := &Run{
		ID: row.ID, Spider: row.Spider, Priority: int(row.Priority), Queue: row.Queue, State: string(row.State),
		IdempotencyKey: row.IdempotencyKey.String, CancelRequested: row.CancelRequested, Error: row.Error.String,
		CreatedAt: row.CreatedAt, RunAt: row.RunAt, StartedAt: row.StartedAt, FinishedAt: row.FinishedAt,
		Stats:     Stats{Pages: row.Pages, Items: row.Items, Bytes: row.Bytes, Errors: row.Errors, Retries: row.Retries},
		DeadPages: row.DeadPages,
	}
	if err := json.Unmarshal(row.FailedPages, &r.FailedPages); err != nil {
		return nil, fmt.Errorf("run %d failed pages: %w", r.ID, err)
	}
	if err := json.Unmarshal(row.Args, &r.Args); err != nil {
		return nil, fmt.Errorf("run %d args: %w", r.ID, err)
	}
	if err := json.Unmarshal(row.Settings, &r.Settings); err != nil {
		return nil, fmt.Errorf("run %d settings: %w", r.ID, err)
	}
	if err := r.Stats.setKinds(row.HostPauses, row.ErrorsByKind); err != nil {
		return nil, fmt.Errorf("run %d stats: %w", r.ID, err)
	}
	return r, nil
}

// getRun reads a stored run as it is (no live stats).
func (c *Crawler) getRun(ctx context.Context, id int64) (*Run, error) {
	row, err := c.db.GetRun(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %d: %w", id, ErrRunNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get run %d: %w", id, err)
	}
	return runFromRow(row)
}

// Get reads a run, with its stats so far when it is still live.
func (c *Crawler) Get(ctx context.Context, id int64) (*Run, error) {
	r, err := c.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if !r.Finished() {
		if err := c.liveStats(ctx, r); err != nil {
			return nil, err
		}
	}
	r.Stats.Duration = duration(r, c.clk.Now())
	return r, nil
}

// duration is how long r has run, in seconds: until it finished, or until now.
func duration(r *Run, now time.Time) float64 {
	if r.StartedAt == nil {
		return 0
	}
	end := now
	if r.FinishedAt != nil {
		end = *r.FinishedAt
	}
	return end.Sub(*r.StartedAt).Seconds()
}

func (c *Crawler) liveStats(ctx context.Context, r *Run) error {
	row, err := c.db.LiveRunStats(ctx, r.ID)
	if err != nil {
		return fmt.Errorf("run %d stats: %w", r.ID, err)
	}
	// The run's pages dead so far are among its errors (FinishRun counts them so at the end).
	dead, _, err := c.cfg.Queue.DeadChildrenTx(ctx, c.cfg.Pool, r.ID, KindPage, 0)
	if err != nil {
		return fmt.Errorf("run %d stats: %w", r.ID, err)
	}
	s := &r.Stats
	s.Pages, s.Items, s.Bytes, s.Errors, s.Retries = row.Pages, row.Items, row.Bytes, row.Errors+dead, row.Retries
	r.DeadPages = dead
	if err := s.setKinds(row.HostPauses, row.ErrorsByKind); err != nil {
		return fmt.Errorf("run %d stats: %w", r.ID, err)
	}
	if c.cfg.CountItems != nil {
		n, err := c.cfg.CountItems(ctx, r.ID)
		if err != nil {
			return fmt.Errorf("run %d items: %w", r.ID, err)
		}
		// Items written that the sink holds as an earlier item's (their key repeated), as
		// FinishRun counts them at the end.
		if d := row.Items - n; d > 0 {
			if s.ErrorsByKind == nil {
				s.ErrorsByKind = map[string]int64{}
			}
			s.ErrorsByKind[kindDuplicate] += d
		}
		s.Items = n
	}
	return nil
}

// setKinds reads the run's host pauses and outcome counts by kind (JSON) as runstat reads them,
// and the item changes of a spider that keeps URL state.
func (s *Stats) setKinds(hostPauses int64, byKind []byte) error {
	if err := json.Unmarshal(byKind, &s.ErrorsByKind); err != nil {
		return err
	}
	s.HostPauses = runstat.HostPauses(hostPauses, s.ErrorsByKind)
	s.Changes = urlstate.CountsOf(s.ErrorsByKind)
	return nil
}

// ListParams filter a run listing.
type ListParams struct {
	Spider string
	States []string // any of States
	Limit  int      // default 100, at most 1000
	Before int64    // ids below this (paging)
}

// List returns runs newest first.
func (c *Crawler) List(ctx context.Context, p ListParams) ([]*Run, error) {
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 0 || p.Limit > 1000 {
		return nil, fmt.Errorf("%w: limit %d: want 1..1000", ErrInvalid, p.Limit)
	}
	for _, s := range p.States {
		if !slices.Contains(States, s) {
			return nil, fmt.Errorf("%w: run state %q: want one of %v", ErrInvalid, s, States)
		}
	}
	states := p.States
	if states == nil {
		states = []string{}
	}
	rows, err := c.db.ListRuns(ctx, dbsqlc.ListRunsParams{Spider: p.Spider, States: states, BeforeID: p.Before, MaxRuns: int32(p.Limit)})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var out []*Run
	for _, row := range rows {
		r, err := runFromRow(row)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, r)
	}
	for _, r := range out {
		if !r.Finished() {
			if err := c.liveStats(ctx, r); err != nil {
				return nil, err
			}
		}
		r.Stats.Duration = duration(r, c.clk.Now())
	}
	return out, nil
}

// SpiderStat sums one spider's runs that finished since a time.
type SpiderStat struct {
	Spider                                    string
	Pages, Items, Errors, DeadPages           int64
	Bans, ProxyFailures                       int64 // errors_by_kind "banned" and "proxy"
	RunsSucceeded, RunsIncomplete, RunsFailed int64
}

// SpiderStats sums pages, items, errors, bans, proxy failures and finished/failed runs per
// spider since t.
func (c *Crawler) SpiderStats(ctx context.Context, since time.Time) ([]SpiderStat, error) {
	rows, err := c.db.SpiderStats(ctx, since)
	if err != nil {
		return nil, fmt.Errorf("spider stats: %w", err)
	}
	out := make([]SpiderStat, len(rows))
	for i, s := range rows {
		out[i] = SpiderStat(s)
	}
	return out, nil
}

// runInfo is what a page job needs of its run; it does not change while the run lives.
type runInfo struct {
	id   int64
	name string
	// version is the stored version of the spider the run runs: the one pinned at schedule, or
	// the one it started with ("" for a spider known only in-process, or before it started).
	version  string
	spider   spider.Spider // bound to the run's args; nil for command spiders
	command  *spider.CommandSpec
	settings spider.Settings
	queue    string
	priority int
	run      *Run
	// fetched: a page of the run has been fetched (see runFetched).
	fetched atomic.Bool
}

// RunSettings returns the settings run id crawls with: its spider version's, with its arguments
// and per-run overrides applied.
func (c *Crawler) RunSettings(ctx context.Context, id int64) (spider.Settings, error) {
	ri, err := c.runInfo(ctx, id)
	if err != nil {
		return spider.Settings{}, err
	}
	return ri.settings, nil
}

// runInfo returns the facts of a run, cached for the life of the run in this process. The spider
// is the version the run has on record (crawlq_spider_run: pinned at schedule, or recorded when
// the run started), so every page of a run, in whichever process, runs one version; a run with
// none on record takes the newest.
func (c *Crawler) runInfo(ctx context.Context, id int64) (*runInfo, error) {
	c.mu.Lock()
	ri := c.runs[id]
	c.mu.Unlock()
	if ri != nil {
		return ri, nil
	}
	r, err := c.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	version, err := c.db.SpiderRunVersion(ctx, id)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %d version: %w", id, err)
	}
	res, settings, err := c.spiderAt(r.Spider, version)
	if err != nil {
		return nil, fmt.Errorf("run %d: %w", id, err)
	}
	sp := res.Spider
	if sp != nil {
		if sp, err = spider.WithArgs(sp, r.Args); err != nil {
			return nil, fmt.Errorf("%w: run %d args: %v", ErrInvalid, id, err)
		}
		settings = sp.Settings().WithDefaults()
	}
	if settings, err = r.Settings.apply(settings); err != nil {
		return nil, err
	}
	ri = &runInfo{id: id, name: r.Spider, version: res.Version, spider: sp, command: res.Command, settings: settings,
		queue: r.Queue, priority: r.Priority, run: r}
	c.mu.Lock()
	if len(c.runs) > 10000 { // a bound, not an LRU: live runs are few and reload cheaply
		clear(c.runs)
	}
	c.runs[id] = ri
	c.mu.Unlock()
	return ri, nil
}
