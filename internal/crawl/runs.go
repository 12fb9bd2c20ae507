package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/spider"
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
	// DeadPages counts the run's pages that died (their retries exhausted); FailedPages lists a
	// few of them with their last error. Both are set when the run finishes.
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
	Pages        int64            `json:"pages"`
	Items        int64            `json:"items"`
	Bytes        int64            `json:"bytes"`
	Errors       int64            `json:"errors"`
	Retries      int64            `json:"retries"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
	Duration     float64          `json:"duration_seconds"`
}

func scanRun(row pgx.Row) (*Run, error) {
	r := &Run{}
	var args, settings, byKind, failed []byte
	var prio int16
	err := row.Scan(&r.ID, &r.Spider, &args, &settings, &prio, &r.Queue, &r.State, &r.IdempotencyKey, &r.CancelRequested,
		&r.Error, &r.CreatedAt, &r.RunAt, &r.StartedAt, &r.FinishedAt, &r.Stats.Pages, &r.Stats.Items, &r.Stats.Bytes,
		&r.Stats.Errors, &r.Stats.Retries, &byKind, &r.DeadPages, &failed)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(failed, &r.FailedPages); err != nil {
		return nil, fmt.Errorf("run %d failed pages: %w", r.ID, err)
	}
	r.Priority = int(prio)
	if err := json.Unmarshal(args, &r.Args); err != nil {
		return nil, fmt.Errorf("run %d args: %w", r.ID, err)
	}
	if err := json.Unmarshal(settings, &r.Settings); err != nil {
		return nil, fmt.Errorf("run %d settings: %w", r.ID, err)
	}
	if err := json.Unmarshal(byKind, &r.Stats.ErrorsByKind); err != nil {
		return nil, fmt.Errorf("run %d stats: %w", r.ID, err)
	}
	return r, nil
}

// Get reads a run, with its stats so far when it is still live.
func (c *Crawler) Get(ctx context.Context, id int64) (*Run, error) {
	r, err := scanRun(c.cfg.Pool.QueryRow(ctx, sqlGetRun, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %d: %w", id, ErrRunNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get run %d: %w", id, err)
	}
	if !r.Finished() {
		if err := c.liveStats(ctx, r); err != nil {
			return nil, err
		}
	}
	r.Stats.Duration = duration(r)
	return r, nil
}

func duration(r *Run) float64 {
	if r.StartedAt == nil {
		return 0
	}
	end := time.Now()
	if r.FinishedAt != nil {
		end = *r.FinishedAt
	}
	return end.Sub(*r.StartedAt).Seconds()
}

func (c *Crawler) liveStats(ctx context.Context, r *Run) error {
	var byKind []byte
	s := &r.Stats
	if err := c.cfg.Pool.QueryRow(ctx, sqlLiveStats, r.ID).Scan(&s.Pages, &s.Items, &s.Bytes, &s.Errors, &s.Retries, &byKind); err != nil {
		return fmt.Errorf("run %d stats: %w", r.ID, err)
	}
	if c.cfg.CountItems != nil {
		n, err := c.cfg.CountItems(ctx, r.ID)
		if err != nil {
			return fmt.Errorf("run %d items: %w", r.ID, err)
		}
		s.Items = n
	}
	return json.Unmarshal(byKind, &s.ErrorsByKind)
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
	rows, err := c.cfg.Pool.Query(ctx, sqlListRuns, p.Spider, states, p.Limit, p.Before)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []*Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	for _, r := range out {
		if !r.Finished() {
			if err := c.liveStats(ctx, r); err != nil {
				return nil, err
			}
		}
		r.Stats.Duration = duration(r)
	}
	return out, nil
}

// SpiderStat sums one spider's runs that finished since a time.
type SpiderStat struct {
	Spider                                    string
	Pages, Items, Errors, DeadPages           int64
	RunsSucceeded, RunsIncomplete, RunsFailed int64
}

// SpiderStats sums pages, items, errors and finished/failed runs per spider since t.
func (c *Crawler) SpiderStats(ctx context.Context, since time.Time) ([]SpiderStat, error) {
	rows, err := c.cfg.Pool.Query(ctx, sqlSpiderStats, since)
	if err != nil {
		return nil, fmt.Errorf("spider stats: %w", err)
	}
	defer rows.Close()
	var out []SpiderStat
	for rows.Next() {
		var s SpiderStat
		if err := rows.Scan(&s.Spider, &s.Pages, &s.Items, &s.Errors, &s.DeadPages, &s.RunsSucceeded, &s.RunsIncomplete, &s.RunsFailed); err != nil {
			return nil, fmt.Errorf("spider stats: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// runInfo is what a page job needs of its run; it does not change while the run lives.
type runInfo struct {
	id       int64
	name     string
	spider   spider.Spider // bound to the run's args; nil for command spiders
	settings spider.Settings
	queue    string
	priority int
	run      *Run
}

// runInfo returns the facts of a run, cached for the life of the run in this process.
func (c *Crawler) runInfo(ctx context.Context, id int64) (*runInfo, error) {
	c.mu.Lock()
	ri := c.runs[id]
	c.mu.Unlock()
	if ri != nil {
		return ri, nil
	}
	r, err := scanRun(c.cfg.Pool.QueryRow(ctx, sqlGetRun, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %d: %w", id, ErrRunNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get run %d: %w", id, err)
	}
	sp, settings, err := c.spiderSettings(r.Spider)
	if err != nil {
		return nil, err
	}
	if sp != nil {
		if sp, err = spider.WithArgs(sp, r.Args); err != nil {
			return nil, fmt.Errorf("%w: run %d args: %v", ErrInvalid, id, err)
		}
		settings = sp.Settings().WithDefaults()
	}
	if settings, err = r.Settings.apply(settings); err != nil {
		return nil, err
	}
	ri = &runInfo{id: id, name: r.Spider, spider: sp, settings: settings, queue: r.Queue, priority: r.Priority, run: r}
	c.mu.Lock()
	if len(c.runs) > 10000 { // a bound, not an LRU: live runs are few and reload cheaply
		clear(c.runs)
	}
	c.runs[id] = ri
	c.mu.Unlock()
	return ri, nil
}
