package queue

import "crawlq/internal/testwait"

// WorkerTestSignals are what a Worker tells a waiting test (testwait.Signal: off unless Init'ed),
// so that a test waits for a job's outcome instead of polling the job's row.
type WorkerTestSignals struct {
	// Outcome is sent once for each job a handler ran (or a stopping worker handed back), when
	// what became of it is written, or when the worker gave up writing it.
	Outcome testwait.Signal[Outcome]
}

// Outcome is what became of one job a worker held, as WorkerTestSignals.Outcome tells it.
type Outcome struct {
	Job int64
	// What the worker did with the job: one of the Outcome* constants.
	What string
	// State is a failed job's new state: StateScheduled (to be retried) or StateDead.
	// Empty for the other outcomes.
	State State
	// Err is the handler's error; nil for a job that succeeded.
	Err error
}

// The values of Outcome.What.
const (
	// OutcomeCompleted: the job succeeded and its completion is written.
	OutcomeCompleted = "completed"
	// OutcomeFailed: the attempt failed and is written; Outcome.State says whether it retries.
	OutcomeFailed = "failed"
	// OutcomeSnoozed: the job waits to run again, its attempt not counted (Snooze).
	OutcomeSnoozed = "snoozed"
	// OutcomeDeferred: put back after a fault that was not its own (Defer).
	OutcomeDeferred = "deferred"
	// OutcomeCancelled: the job ended cancelled.
	OutcomeCancelled = "cancelled"
	// OutcomeReleased: handed back unfinished, as the worker stopped.
	OutcomeReleased = "released"
	// OutcomeLost: its lease was lost; it is someone else's now and nothing was written.
	OutcomeLost = "lost"
	// OutcomeUnrecorded: the write never landed (the database stayed away); the rescue returns it.
	OutcomeUnrecorded = "unrecorded"
)

// signal sends a job's outcome to a test that asked for it.
func (w *Worker) signal(o Outcome) {
	if w.cfg.TestSignals != nil {
		w.cfg.TestSignals.Outcome.Send(o)
	}
}
