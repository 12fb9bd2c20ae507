package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"crawlq/internal/clock"
)

// A Worker's parts, one file each (the Client calls they make are in lease.go):
//
//   - worker.go: the Worker, its counters, and Run, which starts the parts and stops them in order.
//   - worker_config.go: WorkerConfig and its defaults.
//   - worker_ready.go: the ready buffer between the producers (the claim loop and reservations,
//     see reserve.go) and the handlers, and the room in it.
//   - worker_claim.go: the claim loop, which fills the ready buffer, promotes due jobs and waits
//     for a poke, a poll interval or room.
//   - worker_execute.go: the handlers, each running one job at a time.
//   - worker_outcome.go: recording what a handler's job did (fenced writes that wait out a
//     database outage; batched completions).
//   - worker_heartbeat.go: extending the leases of held jobs, and learning of lost leases and
//     cancel requests.
//   - worker_registry.go: the worker's row in crawlq_worker (LiveWorkers).
//   - worker_stop.go: the stop: the grace period, cancelling and releasing held jobs.
//   - worker_signals.go: what a worker tells a waiting test (WorkerTestSignals).

// Handler works one claimed job. Its return value decides the job's fate:
//   - nil: the job succeeded; the worker completes it (batched with others).
//   - ErrCompleted: the handler already completed the job itself (CompleteTx in its own transaction).
//   - an error from Snooze: the job waits and runs again, the attempt not counted.
//   - an error from Permanent: the job is dead now.
//   - an error from RetryIn: the attempt failed; retry after the given delay.
//   - an error from Defer: not the job's fault (its database or another dependency failed); it
//     waits briefly and runs again, the attempt not counted.
//   - an error from Cancel: the job is cancelled now (its run was cancelled).
//   - any other error: the attempt failed; retry with backoff until max_attempts.
//
// The handler outcomes are in outcome.go.
//
// ctx ends when the lease is lost, when the job is asked to cancel (context.Cause is ErrCancelRequested)
// or when the worker stops and its grace period is over; the job is then released, cancelled or
// left to its new holder accordingly.
type Handler func(ctx context.Context, job *Job) error

var (
	// ErrCompleted is returned by a handler that completed its job itself.
	ErrCompleted = errors.New("queue: job completed by its handler")
	// ErrCancelRequested is the cause of a handler's context when its job was cancelled.
	ErrCancelRequested = errors.New("queue: job cancel requested")
	// ErrWorkerStopping is the cause of a handler's context when the worker's grace period ran out.
	ErrWorkerStopping = errors.New("queue: worker stopping")
)

// WorkerStats count what a worker did.
type WorkerStats struct {
	Claimed, Succeeded, Failed, Snoozed, Released, Lost int64
	// Deferred counts jobs put back after a fault that was not theirs (see Defer).
	Deferred int64
	// Cancelled counts jobs that ended cancelled in a handler (see Cancel).
	Cancelled int64
}

// Worker claims jobs of one queue and runs a Handler on each, keeping their leases alive.
type Worker struct {
	c   *Client
	cfg WorkerConfig
	h   Handler
	log *slog.Logger

	poke chan struct{} // Poke: new work may be due, claim now rather than after PollInterval
	wake chan struct{} // room in ready has freed up

	// ready holds claimed jobs until a handler takes them. Producers (the claim loop and
	// reservations) take room in it first, so a send never blocks: len(ready)+reserved <= cap.
	// Its capacity is BatchSize for the claim loop plus HoldAhead for reservations.
	ready chan *Job

	mu       sync.Mutex
	inflight map[int64]*held // claimed and not yet finished, including those waiting for a handler
	reserved int             // room in ready taken by producers and not yet filled
	busy     int             // handlers working a job
	stopped  bool            // ready is closed
	stopping clock.Stopwatch // started when stopped was set (writeLeft)
	// lastWait is how long the job a handler took last had waited in ready, and sinceTake runs
	// from then (or from when jobs were handed to an empty ready): see waitingLongLocked.
	lastWait  time.Duration
	sinceTake clock.Stopwatch

	claimed, succeeded, failed, snoozed, released, lost, deferred, cancelled atomic.Int64
	// unrecorded counts jobs whose outcome could not be written (the database stayed unreachable
	// for as long as their leases could be valid): Run reports them.
	unrecorded atomic.Int64
	// faults counts deferred jobs since the last job that ended otherwise: the defer backoff grows
	// with it while an outage lasts.
	faults atomic.Int64
}

type held struct {
	job    *Job
	handed clock.Stopwatch         // started when it went into ready
	cancel context.CancelCauseFunc // nil until a handler starts it
	gone   bool                    // lease lost or finished elsewhere: do not report on it
}

// NewWorker returns a worker; Run starts it.
func NewWorker(c *Client, cfg WorkerConfig, h Handler) (*Worker, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: worker needs a handler", ErrInvalid)
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Worker{c: c, cfg: cfg, h: h, log: cfg.Logger.With("worker", cfg.ID, "queue", cfg.Queue),
		poke: make(chan struct{}, 1), wake: make(chan struct{}, 1), ready: make(chan *Job, cfg.BatchSize+cfg.HoldAhead), inflight: map[int64]*held{}}, nil
}

// Poke tells an idle worker that new jobs may be due, so it claims at once instead of waiting
// out its poll interval (a process that just enqueued work for its own queue calls it).
func (w *Worker) Poke() {
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

// Queue returns the queue the worker works.
func (w *Worker) Queue() string { return w.cfg.Queue }

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Stats returns the worker's counters.
func (w *Worker) Stats() WorkerStats {
	return WorkerStats{Claimed: w.claimed.Load(), Succeeded: w.succeeded.Load(), Failed: w.failed.Load(),
		Snoozed: w.snoozed.Load(), Released: w.released.Load(), Lost: w.lost.Load(),
		Deferred: w.deferred.Load(), Cancelled: w.cancelled.Load()}
}

// Run works jobs until ctx ends (or MaxJobs have been claimed and finished). Then it stops
// claiming, releases claimed jobs no handler has started, gives running handlers StopGrace to
// finish, cancels and releases the rest, writes the last completions and returns. It returns nil
// when every job it finished was recorded, and an error counting those whose outcome it could not
// write (the database was unreachable): their leases expire and the rescue returns them, so they
// run again, each at the cost of an attempt.
func (w *Worker) Run(ctx context.Context) error {
	// Handlers and the writes that finish jobs outlive ctx by the grace period.
	workCtx, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopWork(nil)

	done := make(chan Lease, w.cfg.CompleteBatch*2)
	handlersDone := w.startHandlers(workCtx, ctx, done)
	completerDone := w.startCompleter(workCtx, done)
	// Register before the first claim, so a job is never running on a worker that
	// LiveWorkers (the dispatcher's and operators' view) does not count yet.
	w.register(workCtx)
	stopHeartbeat := w.startHeartbeat(workCtx)

	w.claimLoop(ctx)

	w.stopHandlers(handlersDone)
	// The handlers have returned, so nothing sends on done any more.
	close(done)
	<-completerDone
	stopHeartbeat()
	// Anything still held (a completion that failed to write) is released for someone else.
	w.releaseAll(workCtx)
	w.unregister(workCtx)
	if n := w.unrecorded.Load(); n > 0 {
		return fmt.Errorf("worker %s: the outcome of %d job(s) was not recorded; the rescue returns them once their leases expire", w.cfg.ID, n)
	}
	return nil
}
