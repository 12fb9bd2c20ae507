// Package queue is crawlq's PostgreSQL job queue: it owns the crawlq_job, crawlq_job_count*,
// crawlq_job_once and crawlq_worker tables and every query on them: the statements are in
// internal/dbsqlc (crawlq_job.sql, crawlq_job_once.sql, crawlq_job_count.sql, crawlq_worker.sql),
// compiled by sqlc into typed Go, and this package is the only caller of them.
//
// Jobs have a queue, a kind, JSON args, a priority (higher first), a run_at time, an optional
// unique key that is unique per queue among unfinished jobs, and an optional once key that a
// parent can use only once, ever. Workers claim due jobs in batches with FOR UPDATE SKIP LOCKED;
// each claim takes a lease (an expiry and a random token). Heartbeat, Complete, Fail, Snooze
// and Release are fenced by the token: once a lease has been rescued and the job claimed
// again, the old holder gets ErrLeaseLost and changes nothing. Failed attempts are retried
// with exponential backoff and jitter until max_attempts, then the job is dead until redriven.
//
// A process can also insert jobs already leased to one of its own workers (Reservation), and
// complete jobs, enqueue new ones and run statements of its own in one transaction sent in one
// round trip (Tx).
//
// The queue needs no LISTEN/NOTIFY and no session state (no session advisory locks, no
// prepared statements that must outlive a transaction), so it works through RDS Proxy.
package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// State is a job's state.
type State string

// Job states. StateScheduled is an available job whose run_at is still in the future; counts
// and the API treat it as available.
const (
	StateAvailable State = "available"
	StateScheduled State = "scheduled"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateCancelled State = "cancelled"
	StateDead      State = "dead"
)

// Finished reports whether s is a final state.
func (s State) Finished() bool {
	return s == StateSucceeded || s == StateCancelled || s == StateDead
}

// ParseState parses a state name.
func ParseState(s string) (State, error) {
	switch st := State(s); st {
	case StateAvailable, StateScheduled, StateRunning, StateSucceeded, StateCancelled, StateDead:
		return st, nil
	}
	return "", fmt.Errorf("%w: state %q: want available, scheduled, running, succeeded, cancelled or dead", ErrInvalid, s)
}

// Errors callers branch on.
var (
	// ErrLeaseLost means the caller no longer holds the job: its lease was rescued (and the job
	// perhaps claimed by another worker), or the job was finished or cancelled. Nothing changed.
	ErrLeaseLost = errors.New("queue: lease lost")
	// ErrNotFound means no job has the given id.
	ErrNotFound = errors.New("queue: job not found")
	// ErrInvalid wraps every validation failure; nothing was written.
	ErrInvalid = errors.New("queue: invalid input")
	// ErrFinished means the job is already in a final state (cancel of a finished job).
	ErrFinished = errors.New("queue: job already finished")
)

// Limits on input.
const (
	MaxArgsBytes    = 256 << 10
	MinPriority     = -1000
	MaxPriority     = 1000
	MaxUniqueKeyLen = 512
	MaxOnceKeyLen   = 64 << 10
	MaxMaxAttempts  = 1000
	// DefaultMaxAttempts is used when EnqueueParams.MaxAttempts is 0.
	DefaultMaxAttempts = 25
	maxErrorLen        = 2000
	maxKeptErrors      = 20
)

var (
	queueName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	kindName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`)
)

// ValidateQueue checks a queue name: 1-64 of a-z, 0-9, '_', '.', '-', starting with a letter or digit.
func ValidateQueue(q string) error {
	if !queueName.MatchString(q) {
		return fmt.Errorf("%w: queue %q: want 1-64 characters of a-z 0-9 _ . - starting with a letter or digit", ErrInvalid, q)
	}
	return nil
}

// DuplicateMode says what Enqueue does when an unfinished job of the queue already has the unique key.
type DuplicateMode int

const (
	// Keep ignores the new job; the existing one is unchanged.
	Keep DuplicateMode = iota
	// Replace moves the existing job's run_at and priority to the new values (reschedule).
	Replace
	// Earliest keeps whichever run_at is earlier.
	Earliest
)

// ParseDuplicateMode parses "keep", "replace" or "earliest".
func ParseDuplicateMode(s string) (DuplicateMode, error) {
	switch s {
	case "", "keep":
		return Keep, nil
	case "replace":
		return Replace, nil
	case "earliest":
		return Earliest, nil
	}
	return 0, fmt.Errorf("%w: duplicate mode %q: want keep, replace or earliest", ErrInvalid, s)
}

func (m DuplicateMode) String() string {
	switch m {
	case Replace:
		return "replace"
	case Earliest:
		return "earliest"
	}
	return "keep"
}

// EnqueueParams describes a job to add.
type EnqueueParams struct {
	Queue string // required; see ValidateQueue
	Kind  string // required: 1-128 of A-Z a-z 0-9 _ . : / -
	// Args is a JSON object or other JSON value, at most MaxArgsBytes. Nil means {}.
	Args json.RawMessage
	// Priority: higher runs first, MinPriority..MaxPriority. Default 0.
	Priority int
	// RunAt delays the job until then. Zero means now (plus Delay). Set RunAt or Delay, not both.
	RunAt time.Time
	// Delay delays the job by this much from now (database time). Must not be negative.
	Delay time.Duration
	// MaxAttempts before the job is dead. 0 means DefaultMaxAttempts; at most MaxMaxAttempts.
	MaxAttempts int
	// UniqueKey, when set, is unique per queue among unfinished jobs (at most MaxUniqueKeyLen bytes).
	UniqueKey string
	// OnDuplicate says what happens when UniqueKey is taken. Default Keep.
	OnDuplicate DuplicateMode
	// ParentID links the job to a spider run (0 = none).
	ParentID int64
	// OnceKey, when set, makes the job enqueued at most once per (ParentID, OnceKey), ever: unlike
	// a unique key it still holds after the job has finished. The job carries its key, so it is kept
	// (retention passes it over) until its parent's keys are deleted (DeleteOnceKeys). A later enqueue
	// with the same pair is a no-op, reported as Duplicate with ID 0. Not with UniqueKey; at most
	// MaxOnceKeyLen bytes.
	OnceKey string
}

// names remembers queue and kind names already checked in one batch: a batch usually repeats
// one or two, and matching a regexp per job is most of the cost of validating it.
type names map[string]bool

func (n names) queue(q string) error {
	if n["q:"+q] {
		return nil
	}
	if err := ValidateQueue(q); err != nil {
		return err
	}
	n["q:"+q] = true
	return nil
}

func (n names) kind(k string) error {
	if n["k:"+k] {
		return nil
	}
	if !kindName.MatchString(k) {
		return fmt.Errorf("%w: kind %q: want 1-128 characters of A-Z a-z 0-9 _ . : / -", ErrInvalid, k)
	}
	n["k:"+k] = true
	return nil
}

func (p *EnqueueParams) validate(seen names) error {
	var errs []error
	if err := seen.queue(p.Queue); err != nil {
		errs = append(errs, err)
	}
	if err := seen.kind(p.Kind); err != nil {
		errs = append(errs, err)
	}
	if len(p.Args) > MaxArgsBytes {
		errs = append(errs, fmt.Errorf("%w: args: %d bytes, more than the %d byte limit", ErrInvalid, len(p.Args), MaxArgsBytes))
	} else if len(p.Args) > 0 && !json.Valid(p.Args) {
		errs = append(errs, fmt.Errorf("%w: args: not valid JSON", ErrInvalid))
	}
	if p.Priority < MinPriority || p.Priority > MaxPriority {
		errs = append(errs, fmt.Errorf("%w: priority %d: want %d..%d", ErrInvalid, p.Priority, MinPriority, MaxPriority))
	}
	if p.Delay < 0 {
		errs = append(errs, fmt.Errorf("%w: delay %s: must not be negative", ErrInvalid, p.Delay))
	}
	if p.Delay != 0 && !p.RunAt.IsZero() {
		errs = append(errs, fmt.Errorf("%w: set run_at or delay, not both", ErrInvalid))
	}
	if p.MaxAttempts < 0 || p.MaxAttempts > MaxMaxAttempts {
		errs = append(errs, fmt.Errorf("%w: max_attempts %d: want 1..%d (0 for the default %d)", ErrInvalid, p.MaxAttempts, MaxMaxAttempts, DefaultMaxAttempts))
	}
	if len(p.UniqueKey) > MaxUniqueKeyLen {
		errs = append(errs, fmt.Errorf("%w: unique_key: %d bytes, more than %d", ErrInvalid, len(p.UniqueKey), MaxUniqueKeyLen))
	}
	if len(p.OnceKey) > MaxOnceKeyLen {
		errs = append(errs, fmt.Errorf("%w: once_key: %d bytes, more than %d", ErrInvalid, len(p.OnceKey), MaxOnceKeyLen))
	}
	if p.OnceKey != "" && p.UniqueKey != "" {
		errs = append(errs, fmt.Errorf("%w: set unique_key or once_key, not both", ErrInvalid))
	}
	if p.OnDuplicate < Keep || p.OnDuplicate > Earliest {
		errs = append(errs, fmt.Errorf("%w: duplicate mode %d", ErrInvalid, p.OnDuplicate))
	}
	if p.ParentID < 0 {
		errs = append(errs, fmt.Errorf("%w: parent id %d: must not be negative", ErrInvalid, p.ParentID))
	}
	return errors.Join(errs...)
}

// EnqueueResult is the outcome of one enqueue.
type EnqueueResult struct {
	ID int64 `json:"id"`
	// Duplicate is true when an unfinished job with the same unique key already existed (ID is
	// then that job's id, changed according to the duplicate mode), or when the once key had been
	// used (ID is then 0).
	Duplicate bool `json:"duplicate"`
}

// Lease identifies one claim of a job: the job id and the token of that claim.
type Lease struct {
	ID    int64
	Token int64
}

// Job is a job as claimed or listed.
type Job struct {
	ID              int64           `json:"id"`
	Queue           string          `json:"queue"`
	Kind            string          `json:"kind"`
	State           State           `json:"state"`
	Args            json.RawMessage `json:"args"`
	Priority        int             `json:"priority"`
	RunAt           time.Time       `json:"run_at"`
	Attempt         int             `json:"attempt"`
	MaxAttempts     int             `json:"max_attempts"`
	LeaseUntil      *time.Time      `json:"lease_until,omitempty"`
	LeaseToken      int64           `json:"-"` // the holder's secret: never printed
	Worker          string          `json:"worker,omitempty"`
	UniqueKey       string          `json:"unique_key,omitempty"`
	ParentID        int64           `json:"parent_id,omitempty"`
	CancelRequested bool            `json:"cancel_requested"`
	Errors          []AttemptError  `json:"errors"`
	CreatedAt       time.Time       `json:"created_at"`
	StartedAt       *time.Time      `json:"started_at,omitempty"`
	FinishedAt      *time.Time      `json:"finished_at,omitempty"`
}

// Lease returns the job's current lease.
func (j *Job) Lease() Lease { return Lease{ID: j.ID, Token: j.LeaseToken} }

// Redriven reports whether a claimed job was redriven (made available again after it died, with
// a fresh attempt budget) and has failed no attempt since: its last recorded error is of an
// attempt it has already counted again. Any other claimed job is on a later attempt than its last
// error's (a snooze takes back the attempt its claim counted).
func (j *Job) Redriven() bool {
	return len(j.Errors) > 0 && j.Attempt <= j.Errors[len(j.Errors)-1].Attempt
}

// AttemptError is one failed attempt in a job's error history.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
}
