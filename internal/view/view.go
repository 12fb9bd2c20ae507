// Package view holds crawlq's output types: what the CLI's --json outputs and the api's
// responses show of runs, queue jobs, queue stats and spiders. Both build them here from the
// domain types (crawl, queue, spiderstore, events), so the same thing looks the same in either
// place, every key is snake_case (checked by reflection in view_test.go), and a change inside a
// domain package does not change an output by accident. Nothing here holds a secret: a job's
// lease token is not part of Job.
package view

import (
	"encoding/json"
	"slices"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/events"
	"crawlq/internal/queue"
	"crawlq/internal/spiderstore"
)

// Run is a spider run: `crawlq run`, `crawlq runs --json`, and the core of the api's status and
// listjobs jobs (api.Job adds Scrapyd's fields).
type Run struct {
	ID     int64  `json:"id"`
	Spider string `json:"spider"`
	// Version is the spider version the run pinned or ran ("" when none is recorded: a spec
	// loaded in-process, or a run not started). It is the spider store's record of the run, which
	// its reader sets (crawlq run; the api's Job has it as its own version).
	Version         string            `json:"version,omitempty"`
	Args            map[string]string `json:"args"`
	Settings        crawl.Overrides   `json:"settings"`
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
	// DeadPages counts the pages that died; FailedPages lists up to ten with their last error.
	DeadPages   int64        `json:"dead_pages"`
	FailedPages []FailedPage `json:"failed_pages"`
	// Outcome is how a finished run ended: its state, or "monitors_failed" once judged with a
	// failed monitor (events.Outcome); empty while the run is pending or running.
	Outcome string `json:"outcome,omitempty"`
	// Report is the run's judgement (monitors' verdict and results, field coverage), once judged.
	Report *events.Report `json:"report,omitempty"`
	// Events are the run's recorded state changes and whether each reached EventBridge
	// (crawlq run only).
	Events []events.Recorded `json:"events,omitempty"`
}

// Stats are a run's figures so far.
type Stats struct {
	Pages           int64            `json:"pages"`
	Items           int64            `json:"items"`
	Bytes           int64            `json:"bytes"`
	Errors          int64            `json:"errors"`
	Retries         int64            `json:"retries"`
	HostPauses      int64            `json:"host_pauses"` // waits for a host that was down, not errors
	ErrorsByKind    map[string]int64 `json:"errors_by_kind"`
	DurationSeconds float64          `json:"duration_seconds"`
}

// FailedPage is a page of a run that died, with the error of its last attempt.
type FailedPage struct {
	URL      string `json:"url"`
	Error    string `json:"error"`
	Attempts int    `json:"attempts"`
}

// NewRun is r as shown, with its report when it has one for the way the run ended last (nil
// before it is judged, and after a redrive until it is judged again).
func NewRun(r *crawl.Run, rep *events.Report) Run {
	if !rep.Current(r.State, r.FinishedAt) {
		rep = nil
	}
	v := Run{ID: r.ID, Spider: r.Spider, Args: r.Args, Settings: r.Settings, Priority: r.Priority, Queue: r.Queue, State: r.State,
		IdempotencyKey: r.IdempotencyKey, CancelRequested: r.CancelRequested, Error: r.Error, CreatedAt: r.CreatedAt, RunAt: r.RunAt,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, DeadPages: r.DeadPages, FailedPages: []FailedPage{}, Report: rep,
		Stats: Stats{Pages: r.Stats.Pages, Items: r.Stats.Items, Bytes: r.Stats.Bytes, Errors: r.Stats.Errors, Retries: r.Stats.Retries,
			HostPauses: r.Stats.HostPauses, ErrorsByKind: r.Stats.ErrorsByKind, DurationSeconds: r.Stats.Duration}}
	if v.Args == nil {
		v.Args = map[string]string{}
	}
	for _, p := range r.FailedPages {
		v.FailedPages = append(v.FailedPages, FailedPage{URL: p.URL, Error: p.Error, Attempts: p.Attempts})
	}
	if r.Finished() {
		v.Outcome = r.State
	}
	if rep != nil {
		v.Outcome = events.Outcome(r.State, rep.Monitors)
	}
	return v
}

// Job is a queue job: `crawlq jobs --json`. It has no lease token: that is its holder's secret.
type Job struct {
	ID          int64           `json:"id"`
	Queue       string          `json:"queue"`
	Kind        string          `json:"kind"`
	State       string          `json:"state"`
	Args        json.RawMessage `json:"args"`
	Priority    int             `json:"priority"`
	RunAt       time.Time       `json:"run_at"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	LeaseUntil  *time.Time      `json:"lease_until,omitempty"`
	Worker      string          `json:"worker,omitempty"`
	UniqueKey   string          `json:"unique_key,omitempty"`
	// ParentID is the spider run the job belongs to (page and run jobs).
	ParentID        int64      `json:"parent_id,omitempty"`
	CancelRequested bool       `json:"cancel_requested"`
	Errors          []JobError `json:"errors"`
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
}

// JobError is one failed attempt in a job's error history.
type JobError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
}

// NewJob is j as shown.
func NewJob(j *queue.Job) Job {
	v := Job{ID: j.ID, Queue: j.Queue, Kind: j.Kind, State: string(j.State), Args: j.Args, Priority: j.Priority, RunAt: j.RunAt,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, LeaseUntil: j.LeaseUntil, Worker: j.Worker, UniqueKey: j.UniqueKey,
		ParentID: j.ParentID, CancelRequested: j.CancelRequested, Errors: []JobError{}, CreatedAt: j.CreatedAt,
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt}
	for _, e := range j.Errors {
		v.Errors = append(v.Errors, JobError{Attempt: e.Attempt, At: e.At, Error: e.Error})
	}
	return v
}

// Jobs is NewJob of each, never nil (an empty list prints as []).
func Jobs(js []*queue.Job) []Job {
	out := make([]Job, 0, len(js))
	for _, j := range js {
		out = append(out, NewJob(j))
	}
	return out
}

// Enqueued is the result of adding a job: `crawlq enqueue --json`.
type Enqueued struct {
	ID int64 `json:"id"`
	// Duplicate says an unfinished job with the same unique key was there already; ID is its.
	Duplicate bool `json:"duplicate"`
}

// QueueStats are one queue's job counts: `crawlq stats --json` and the api's daemonstatus.
type QueueStats struct {
	Queue string `json:"queue"`
	// Available counts due jobs waiting to run; Scheduled counts delayed ones (not yet due).
	Available int64 `json:"available"`
	Scheduled int64 `json:"scheduled"`
	Running   int64 `json:"running"`
	Succeeded int64 `json:"succeeded"`
	Cancelled int64 `json:"cancelled"`
	Dead      int64 `json:"dead"`
	// PastDue counts jobs whose run time has passed and that no worker has started.
	PastDue int64 `json:"past_due"`
	// OldestPastDueNS is the age of the oldest past-due job in nanoseconds (0 when none).
	OldestPastDueNS int64 `json:"oldest_past_due_ns"`
}

// QueuesStats is each queue's counts, never nil.
func QueuesStats(st []queue.QueueStats) []QueueStats {
	out := make([]QueueStats, 0, len(st))
	for _, s := range st {
		out = append(out, QueueStats{Queue: s.Queue, Available: s.Available, Scheduled: s.Scheduled, Running: s.Running,
			Succeeded: s.Succeeded, Cancelled: s.Cancelled, Dead: s.Dead, PastDue: s.PastDue, OldestPastDueNS: int64(s.OldestPastDue)})
	}
	return out
}

// Spider is a stored spider: `crawlq spider list --json`.
type Spider struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"` // declarative, command or scrapy
	Project string `json:"project"`
	// LatestVersion is the version runs use; Versions counts the stored ones (spec spiders).
	LatestVersion string    `json:"latest_version"`
	Versions      int       `json:"versions"`
	CreatedAt     time.Time `json:"created_at,omitzero"`
}

// Spiders is each listed spider as shown, never nil.
func Spiders(ls []spiderstore.Listed) []Spider {
	out := make([]Spider, 0, len(ls))
	for _, l := range ls {
		out = append(out, Spider{Name: l.Name, Kind: l.Kind, Project: l.Project, LatestVersion: l.Latest, Versions: l.Versions, CreatedAt: l.CreatedAt})
	}
	return out
}

// Finished reports whether the run has ended (crawl.Run.Finished).
func (r *Run) Finished() bool { return slices.Contains(crawl.FinishedStates, r.State) }

// Item is one item of a run: a line of `crawlq items`.
type Item struct {
	Key  string          `json:"key"`
	URL  string          `json:"url"`
	Data json.RawMessage `json:"data"`
}
