package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/monitor"
	"crawlq/internal/runstat"
	"crawlq/internal/spider"
	"crawlq/internal/urlstate"
)

// DB is what this package's reads need: a pool, a connection or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Stats are a run's figures as of one of its state changes (final on its last).
type Stats struct {
	Pages     int64  `json:"pages"`
	Items     int64  `json:"items"`
	Bytes     int64  `json:"bytes"`
	Errors    int64  `json:"errors"`
	Retries   int64  `json:"retries"`
	DeadPages *int64 `json:"dead_pages,omitempty"` // when the run records them
	// HostPauses counts the times a host of the run was found down and paused: a wait, not an
	// error, so a counter apart from ErrorsByKind.
	HostPauses   int64            `json:"host_pauses"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind,omitempty"`
	// PagesByStatus splits Pages by the answer each page got, and sums to Pages: "304" the pages
	// a revisit found not modified, "not_requested" the pages an adaptive revisit reached but
	// did not ask for (not due), "2xx" the rest. A page that ended in a 4xx or 5xx answer is not
	// a page fetched but an error (ErrorsByKind's status_4xx, status_429, status_5xx).
	PagesByStatus map[string]int64 `json:"pages_by_status"`
	// Changes counts the run's items new, changed, unchanged and gone against the URL state
	// before it, for a spider that keeps one (revisit changed_only or adaptive; else absent).
	Changes  *urlstate.Counts `json:"changes,omitempty"`
	Duration float64          `json:"duration_seconds"`
}

// snapshot is the run row a state change left (crawlq_run_event.run, to_jsonb of the row): only
// the columns events use are read, and a column another migration adds (version, dead_pages,
// host_pauses) is picked up when it is there.
type snapshot struct {
	ID           int64            `json:"id"`
	Spider       string           `json:"spider"`
	State        string           `json:"state"`
	Version      any              `json:"version"`
	Error        *string          `json:"error"`
	StartedAt    *time.Time       `json:"started_at"`
	FinishedAt   *time.Time       `json:"finished_at"`
	Pages        int64            `json:"pages"`
	Items        int64            `json:"items"`
	Bytes        int64            `json:"bytes"`
	Errors       int64            `json:"errors"`
	Retries      int64            `json:"retries"`
	DeadPages    *int64           `json:"dead_pages"`
	HostPauses   int64            `json:"host_pauses"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
}

func (s *snapshot) stats() Stats {
	byKind := maps.Clone(s.ErrorsByKind)
	hostPauses := runstat.HostPauses(s.HostPauses, byKind)
	st := Stats{Pages: s.Pages, Items: s.Items, Bytes: s.Bytes, Errors: s.Errors, Retries: s.Retries,
		DeadPages: s.DeadPages, HostPauses: hostPauses, ErrorsByKind: byKind}
	if s.StartedAt != nil && s.FinishedAt != nil {
		st.Duration = s.FinishedAt.Sub(*s.StartedAt).Seconds()
	}
	st.PagesByStatus = map[string]int64{}
	left := s.Pages
	for _, k := range [...]struct{ kind, status string }{{notModified, "304"}, {notDue, "not_requested"}} {
		if n := min(byKind[k.kind], left); n > 0 {
			st.PagesByStatus[k.status] = n
			left -= n
		}
	}
	st.PagesByStatus["2xx"] = left
	st.Changes = urlstate.CountsOf(byKind)
	return st
}

// The crawl's stat kinds (internal/crawl) that Stats reads apart: pages a revisit found not
// modified (a 304 answer) or did not ask for (not due), both counted in pages.
const (
	notModified = "not_modified"
	notDue      = "not_due"
)

func (s *snapshot) version() string {
	switch v := s.Version.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// Report is how a finished run was judged: its monitors' verdict and results, its field
// coverage and its final figures. Written when the publisher first sees a final event of the
// run, and written again for a later final event (the run was redriven and finished again).
type Report struct {
	RunID  int64  `json:"run_id"`
	Spider string `json:"spider"`
	State  string `json:"state"`
	// Monitors is the verdict: passed, failed, none (no monitors declared) or skipped (the run
	// failed or was cancelled). A failed verdict does not change the run's state.
	Monitors string           `json:"monitors"`
	Results  []monitor.Result `json:"results"`
	// ItemsStored counts the run's items in Postgres; nil (and Coverage nil) when they went
	// elsewhere, so coverage is unknown.
	ItemsStored *int64           `json:"items_stored"`
	Coverage    map[string]int64 `json:"field_coverage"`
	Stats       Stats            `json:"stats"`
	EvaluatedAt time.Time        `json:"evaluated_at"`
	// EventID is the final event (its sequence) this report judged: a run that finishes again
	// after a redrive is judged again, and its report then names the newer event.
	EventID int64 `json:"event_id"`
}

// Current reports whether the report judged the run as it ended last: in state, at finishedAt
// (the run's). A run redriven since is live again, or finished again and not judged again yet:
// its report is then of the earlier finish, and not current. Both times are the database's.
func (r *Report) Current(state string, finishedAt *time.Time) bool {
	return r != nil && finishedAt != nil && r.State == state && !r.EvaluatedAt.Before(*finishedAt)
}

// IsFinal reports whether state is a run's final state.
func IsFinal(state string) bool {
	switch state {
	case "succeeded", "incomplete", "failed", "cancelled":
		return true
	}
	return false
}

// reportFrom decodes a stored report.
func reportFrom(row dbsqlc.CrawlqRunReport) (*Report, error) {
	r := &Report{RunID: row.RunID, Spider: row.Spider, State: row.State, Monitors: row.Monitors, EvaluatedAt: row.EvaluatedAt,
		EventID: row.EventID}
	if row.ItemsStored.Valid {
		r.ItemsStored = &row.ItemsStored.Int64
	}
	if err := json.Unmarshal(row.Results, &r.Results); err != nil {
		return nil, fmt.Errorf("report of run %d: results: %w", r.RunID, err)
	}
	if row.Coverage != nil {
		if err := json.Unmarshal(row.Coverage, &r.Coverage); err != nil {
			return nil, fmt.Errorf("report of run %d: coverage: %w", r.RunID, err)
		}
	}
	if err := json.Unmarshal(row.Stats, &r.Stats); err != nil {
		return nil, fmt.Errorf("report of run %d: stats: %w", r.RunID, err)
	}
	return r, nil
}

// Reports returns the reports of the given runs that have one (runs not yet finished, or
// finished before their final event was seen, have none).
func Reports(ctx context.Context, db DB, ids []int64) (map[int64]*Report, error) {
	out := map[int64]*Report{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := dbsqlc.New(db).RunReports(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read run reports: %w", err)
	}
	for _, row := range rows {
		r, err := reportFrom(row)
		if err != nil {
			return nil, fmt.Errorf("read run reports: %w", err)
		}
		out[r.RunID] = r
	}
	return out, nil
}

// judge returns the report of the run's final event ev, computing and storing it if this is the
// first time that event is judged (fresh is then true): a report of an earlier final event (the
// run finished, was redriven and finished again) is replaced, so the report, the monitor metrics
// and ev carry the verdict of the run as it ended this time. monitors is asked only when judging.
func judge(ctx context.Context, db DB, monitors func() (spider.Monitors, error), ev *event) (rep *Report, fresh bool, err error) {
	got, err := Reports(ctx, db, []int64{ev.RunID})
	if err != nil {
		return nil, false, err
	}
	if r := got[ev.RunID]; r != nil && r.EventID >= ev.ID {
		return r, false, nil
	}
	mons, err := monitors()
	if err != nil {
		return nil, false, err
	}
	st := ev.snap.stats()
	f := monitor.Facts{State: ev.State, Items: st.Items, Pages: st.Pages, Errors: st.Errors}
	if c := st.Changes; c != nil {
		f.Changes = &monitor.Changes{New: int64(c.New), Changed: int64(c.Changed), Unchanged: int64(c.Unchanged)}
	}
	stored, err := dbsqlc.New(db).CountRunItems(ctx, ev.RunID)
	if err != nil {
		return nil, false, fmt.Errorf("count items of run %d: %w", ev.RunID, err)
	}
	// Items counted by the run but none in Postgres: they went to another sink, and their
	// fields cannot be counted here.
	if stored > 0 || st.Items == 0 {
		f.ItemsStored = &stored
		if f.Coverage, err = coverage(ctx, db, ev.RunID); err != nil {
			return nil, false, err
		}
	}
	if md := mons.ItemsVsMedian; md != nil && (ev.State == "succeeded" || ev.State == "incomplete") {
		if f.History, err = goodItems(ctx, db, ev.Spider, ev.RunID, md.Runs); err != nil {
			return nil, false, err
		}
	}
	verdict, results := monitor.Judge(mons, f)
	if results == nil {
		results = []monitor.Result{}
	}
	resJSON, err := json.Marshal(results)
	if err != nil {
		return nil, false, fmt.Errorf("report of run %d: results: %w", ev.RunID, err)
	}
	var covJSON pgtype.Text // NULL: coverage unknown
	if f.Coverage != nil {
		b, err := json.Marshal(f.Coverage)
		if err != nil {
			return nil, false, fmt.Errorf("report of run %d: coverage: %w", ev.RunID, err)
		}
		covJSON = pgtype.Text{String: string(b), Valid: true}
	}
	stJSON, err := json.Marshal(st)
	if err != nil {
		return nil, false, fmt.Errorf("report of run %d: stats: %w", ev.RunID, err)
	}
	var itemsStored pgtype.Int8
	if f.ItemsStored != nil {
		itemsStored = pgtype.Int8{Int64: *f.ItemsStored, Valid: true}
	}
	row, err := dbsqlc.New(db).InsertRunReport(ctx, dbsqlc.InsertRunReportParams{
		RunID: ev.RunID, Spider: ev.Spider, State: ev.State, Monitors: string(verdict), Results: string(resJSON),
		ItemsStored: itemsStored, Coverage: covJSON, Stats: string(stJSON), EventID: ev.ID,
	})
	if err == nil {
		rep, err = reportFrom(row)
	}
	if errors.Is(err, pgx.ErrNoRows) { // this event (or a later one) judged meanwhile by another publisher: use its verdict
		got, err := Reports(ctx, db, []int64{ev.RunID})
		if err != nil {
			return nil, false, err
		}
		if r := got[ev.RunID]; r != nil {
			return r, false, nil
		}
		return nil, false, fmt.Errorf("report of run %d vanished", ev.RunID)
	}
	if err != nil {
		return nil, false, fmt.Errorf("store report of run %d: %w", ev.RunID, err)
	}
	return rep, true, nil
}

func coverage(ctx context.Context, db DB, runID int64) (map[string]int64, error) {
	rows, err := dbsqlc.New(db).RunFieldCoverage(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("field coverage of run %d: %w", runID, err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Field] = r.Items
	}
	return out, nil
}

func goodItems(ctx context.Context, db DB, spiderName string, before int64, n int) ([]int64, error) {
	out, err := dbsqlc.New(db).GoodRunItems(ctx, dbsqlc.GoodRunItemsParams{Spider: spiderName, BeforeRun: before, MaxRuns: int32(n)})
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", spiderName, err)
	}
	return out, nil
}
