package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"crawlq/internal/backoff"
	"crawlq/internal/db"
	"crawlq/internal/dbsqlc"
)

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

// WorkerConfig tunes a Worker.
type WorkerConfig struct {
	// Queue to work. Required.
	Queue string
	// ID names this worker in leases and the worker registry. Default host-pid-random.
	ID string
	// Kind is recorded in the worker registry: "process" (default), "lambda", "ecs".
	Kind string
	// Concurrency is the number of handlers running at once. Default 10.
	Concurrency int
	// BatchSize is the most jobs claimed per statement, and the number kept claimed ahead of the
	// handlers. Default Concurrency, at most 10000.
	BatchSize int
	// Lease is how long a claim lasts without a heartbeat. Default 30s.
	Lease time.Duration
	// HeartbeatInterval is how often leases are extended. Default Lease/3.
	HeartbeatInterval time.Duration
	// PollInterval is the wait after finding no due job. Default 200ms.
	PollInterval time.Duration
	// CompleteBatch is the most completions written per statement. Default 1000.
	CompleteBatch int
	// StopGrace is how long running handlers may finish after Run's context ends before their
	// contexts are cancelled and their jobs released. Default 10s.
	StopGrace time.Duration
	// MaxJobs stops the worker after it has claimed this many jobs (recycling). 0: no limit.
	MaxJobs int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *WorkerConfig) setDefaults() error {
	if err := ValidateQueue(c.Queue); err != nil {
		return fmt.Errorf("worker config: %w", err)
	}
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), newToken()&0xffff)
	}
	if c.Kind == "" {
		c.Kind = "process"
	}
	if c.Concurrency < 0 || c.BatchSize < 0 || c.BatchSize > 10000 || c.MaxJobs < 0 {
		return fmt.Errorf("%w: worker config: Concurrency, BatchSize (<= 10000) and MaxJobs must not be negative", ErrInvalid)
	}
	if c.Concurrency == 0 {
		c.Concurrency = 10
	}
	if c.BatchSize == 0 {
		c.BatchSize = c.Concurrency
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = c.Lease / 3
	}
	if c.HeartbeatInterval >= c.Lease {
		return fmt.Errorf("%w: worker config: HeartbeatInterval %s must be shorter than Lease %s", ErrInvalid, c.HeartbeatInterval, c.Lease)
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 200 * time.Millisecond
	}
	if c.CompleteBatch <= 0 {
		c.CompleteBatch = 1000
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

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
	ready chan *Job

	mu       sync.Mutex
	inflight map[int64]*held // claimed and not yet finished, including those waiting for a handler
	reserved int             // room in ready taken by producers and not yet filled
	busy     int             // handlers working a job
	stopped  bool            // ready is closed

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
		poke: make(chan struct{}, 1), wake: make(chan struct{}, 1), ready: make(chan *Job, cfg.BatchSize), inflight: map[int64]*held{}}, nil
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

	ready := w.ready
	done := make(chan Lease, w.cfg.CompleteBatch*2)

	var handlers sync.WaitGroup
	for range w.cfg.Concurrency {
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			for j := range ready {
				w.wakeClaimer()
				w.mu.Lock()
				w.busy++
				w.mu.Unlock()
				w.work(workCtx, ctx, j, done)
				w.mu.Lock()
				w.busy--
				w.mu.Unlock()
			}
		}()
	}
	completerDone := make(chan struct{})
	go func() {
		defer close(completerDone)
		w.complete(workCtx, done)
	}()
	// Register before the first claim, so a job is never running on a worker that
	// LiveWorkers (the dispatcher's and operators' view) does not count yet.
	w.register(workCtx)
	hbCtx, stopHB := context.WithCancel(workCtx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		w.heartbeatLoop(hbCtx)
	}()

	w.claimLoop(ctx)
	w.mu.Lock()
	w.stopped = true
	close(ready)
	w.mu.Unlock()

	// Release what is buffered but unstarted: the handlers skip jobs once ctx is done.
	finished := make(chan struct{})
	go func() { handlers.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(w.cfg.StopGrace):
		w.log.Warn("grace period over; cancelling running jobs", "grace", w.cfg.StopGrace)
		w.cancelAll(ErrWorkerStopping)
		<-finished
	}
	close(done)
	<-completerDone
	stopHB()
	<-hbDone
	// Anything still held (a completion that failed to write) is released for someone else.
	w.releaseAll(workCtx)
	gctx, cancel := context.WithTimeout(workCtx, 5*time.Second)
	defer cancel()
	if err := w.c.q.WorkerGone(gctx, w.cfg.ID); err != nil {
		w.log.Warn("unregister worker", "err", err)
	}
	if n := w.unrecorded.Load(); n > 0 {
		return fmt.Errorf("worker %s: the outcome of %d job(s) was not recorded; the rescue returns them once their leases expire", w.cfg.ID, n)
	}
	return nil
}

func (w *Worker) claimLoop(ctx context.Context) {
	var lastPromote time.Time
	// Claims that fail wait 100 ms, doubling, at most a second: claims resume within about that of
	// the database coming back.
	retry := backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second}
	failures := 0
	for ctx.Err() == nil {
		if w.cfg.MaxJobs > 0 && w.claimed.Load() >= int64(w.cfg.MaxJobs) {
			return
		}
		want := cap(w.ready)
		if w.cfg.MaxJobs > 0 {
			want = min(want, w.cfg.MaxJobs-int(w.claimed.Load()))
		}
		room := w.takeRoom(want)
		if room < min(want, max(1, cap(w.ready)/2)) {
			w.giveBack(room, false)
			select {
			case <-w.wake:
			case <-ctx.Done():
				return
			}
			continue
		}
		// The claim must not be cancelled by Run's context: a claim the server committed but whose
		// answer we dropped would leave its jobs leased to nobody until the lease expired, and the
		// rescue would count an attempt. So it gets its own timeout, and what it returns after a
		// stop is released at once.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		jobs, err := w.c.Claim(cctx, ClaimParams{Queue: w.cfg.Queue, Worker: w.cfg.ID, Limit: room, Lease: w.cfg.Lease})
		cancel()
		if err != nil || ctx.Err() != nil {
			w.giveBack(room, false)
			if ctx.Err() != nil {
				if len(jobs) > 0 {
					leases := make([]Lease, len(jobs))
					for i, j := range jobs {
						leases[i] = j.Lease()
					}
					w.releaseLeases(context.WithoutCancel(ctx), leases)
				}
				return
			}
			failures++
			d := retry.Delay(failures)
			w.log.Warn("claim failed; retrying", "err", err, "in", d)
			backoff.Sleep(ctx, d)
			continue
		}
		failures = 0
		w.hand(jobs, room, false)
		if len(jobs) < room && time.Since(lastPromote) > w.cfg.PollInterval/2 {
			lastPromote = time.Now()
			if n, err := w.c.Promote(ctx, 1000); err != nil && ctx.Err() == nil {
				w.log.Warn("promote failed", "err", err)
			} else if n > 0 {
				continue
			}
		}
		if len(jobs) == 0 {
			t := time.NewTimer(w.cfg.PollInterval)
			select {
			case <-t.C:
			case <-w.poke:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
}

// takeRoom takes up to n free places in ready for a producer and returns how many it took.
func (w *Worker) takeRoom(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return 0
	}
	k := max(min(n, w.freeLocked()), 0)
	w.reserved += k
	return k
}

// freeLocked is the room in ready; w.mu is held.
func (w *Worker) freeLocked() int { return cap(w.ready) - len(w.ready) - w.reserved }

// idleLocked is how many more jobs the handlers could start at once: those not working, less the
// jobs already waiting for them or on their way; w.mu is held.
func (w *Worker) idleLocked() int {
	return min(w.cfg.Concurrency-w.busy-len(w.ready)-w.reserved, w.freeLocked())
}

// giveBack frees n places a producer took and did not fill; wake tells a claim loop waiting for
// room about them (the claim loop's own returns must not, or it would wake itself in a loop).
func (w *Worker) giveBack(n int, wake bool) {
	w.mu.Lock()
	w.reserved -= n
	w.mu.Unlock()
	if wake {
		w.wakeClaimer()
	}
}

// wakeClaimer tells a claim loop waiting for room that some may have freed up.
func (w *Worker) wakeClaimer() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// hand gives held jobs to the handlers, filling places taken with takeRoom (room of them,
// len(jobs) <= room); what is left of room is freed (see giveBack for wake). It reports false,
// doing nothing else, when the worker has stopped: the caller then still holds the jobs.
func (w *Worker) hand(jobs []*Job, room int, wake bool) bool {
	if wake && len(jobs) < room {
		defer w.wakeClaimer()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reserved -= room
	if w.stopped {
		return false
	}
	w.claimed.Add(int64(len(jobs)))
	for _, j := range jobs {
		w.inflight[j.ID] = &held{job: j}
		w.ready <- j // never blocks: the room was taken
	}
	return true
}

// work runs one job. runCtx is Run's context: once it is done, unstarted jobs are released.
func (w *Worker) work(workCtx, runCtx context.Context, j *Job, done chan<- Lease) {
	jctx, cancel := context.WithCancelCause(workCtx)
	defer cancel(nil)
	w.mu.Lock()
	h := w.inflight[j.ID]
	if h == nil || h.gone {
		delete(w.inflight, j.ID)
		w.mu.Unlock()
		return
	}
	h.cancel = cancel
	cancelNow := j.CancelRequested
	w.mu.Unlock()
	if runCtx.Err() != nil {
		w.releaseJob(workCtx, j)
		return
	}
	if cancelNow {
		cancel(ErrCancelRequested)
	}
	err := w.safeHandle(jctx, j)
	if cause := context.Cause(jctx); cause != nil && err != nil {
		switch {
		case errors.Is(cause, ErrLeaseLost):
			w.lost.Add(1)
			w.forget(j.ID)
			return
		case errors.Is(cause, ErrWorkerStopping):
			w.releaseJob(workCtx, j)
			return
		}
	}
	var snooze *snoozeError
	var jerr *jobError
	if !IsDeferred(err) {
		w.faults.Store(0)
	}
	switch {
	case err == nil:
		done <- j.Lease()
	case errors.Is(err, ErrCompleted):
		w.succeeded.Add(1)
		w.forget(j.ID)
	case errors.As(err, &jerr) && jerr.deferred:
		w.deferred.Add(1)
		d := deferBackoff(w.faults.Add(1))
		w.log.Warn("job met a fault that is not its own; put back without counting the attempt",
			"job", j.ID, "kind", j.Kind, "in", d, "err", err)
		w.finish(workCtx, j, func(ctx context.Context) error { return w.c.Snooze(ctx, j.Lease(), d) })
	case errors.As(err, &jerr) && jerr.cancel:
		w.cancelled.Add(1)
		w.finish(workCtx, j, func(ctx context.Context) error { return w.c.CancelHeld(ctx, j.Lease(), err) })
	case errors.As(err, &snooze):
		w.snoozed.Add(1)
		w.finish(workCtx, j, func(ctx context.Context) error { return w.c.Snooze(ctx, j.Lease(), snooze.d) })
	default:
		opts := FailOptions{}
		if errors.As(err, &jerr) {
			opts.RetryIn, opts.Dead = jerr.retryIn, jerr.permanent
		}
		w.failed.Add(1)
		w.finish(workCtx, j, func(ctx context.Context) error {
			st, ferr := w.c.Fail(ctx, j, err, opts)
			if ferr == nil {
				w.log.Debug("job failed", "job", j.ID, "kind", j.Kind, "attempt", j.Attempt, "state", st, "err", err)
			}
			return ferr
		})
	}
}

// safeHandle runs the handler, turning a panic into a failed attempt rather than a dead worker.
func (w *Worker) safeHandle(ctx context.Context, j *Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return w.h(ctx, j)
}

// finish runs a fenced write for j, then forgets the job. It retries while the database is
// unreachable, for as long as the job's lease token can still be valid: nobody takes the job
// from this worker before its lease has expired and a rescue has run, which needs the database
// too. So after an outage the worker records what its jobs did within a second or so of the
// database coming back, instead of leaving them to expire and be rescued (at the cost of an
// attempt) half a minute later.
func (w *Worker) finish(ctx context.Context, j *Job, write func(context.Context) error) {
	defer w.forget(j.ID)
	give := time.Now().Add(2 * w.cfg.Lease)
	for try := 1; ; try++ {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := write(wctx)
		cancel()
		if err == nil {
			return
		}
		if errors.Is(err, ErrLeaseLost) {
			w.lost.Add(1)
			return
		}
		// Only a fault of the database is worth waiting out; anything else gets a few tries.
		if ctx.Err() != nil || time.Now().After(give) || w.isStopped() || (try >= 5 && !db.IsTransient(err)) {
			w.log.Error("could not record job outcome; its lease will expire and it will be rescued", "job", j.ID, "err", err)
			w.unrecorded.Add(1)
			return
		}
		backoff.Sleep(ctx, writeRetry.Delay(try))
	}
}

// writeRetry is the wait between tries of an outcome write: 50 ms, doubling, at most a second, so
// that outcomes are recorded within about a second of the database coming back.
var writeRetry = backoff.Policy{Base: 50 * time.Millisecond, Max: time.Second}

// isStopped reports whether Run is stopping: outcome writes then give up sooner, so a stop is not
// held up by a database that is down (the leases expire and the rescue returns the jobs).
func (w *Worker) isStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

func (w *Worker) forget(id int64) {
	w.mu.Lock()
	delete(w.inflight, id)
	w.mu.Unlock()
}

// complete writes successful completions in batches: it takes whatever has queued up while the
// previous batch was being written, so batches grow with load and nothing waits on a timer.
func (w *Worker) complete(ctx context.Context, done <-chan Lease) {
	batch := make([]Lease, 0, w.cfg.CompleteBatch)
	for l := range done {
		batch = append(batch[:0], l)
	fill:
		for len(batch) < w.cfg.CompleteBatch {
			select {
			case l, ok := <-done:
				if !ok {
					break fill
				}
				batch = append(batch, l)
			default:
				break fill
			}
		}
		w.completeBatch(ctx, batch)
	}
}

func (w *Worker) completeBatch(ctx context.Context, batch []Lease) {
	give := time.Now().Add(2 * w.cfg.Lease) // as long as the leases can be valid (see finish)
	for try := 1; ; try++ {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		lost, err := w.c.CompleteMany(wctx, batch)
		cancel()
		if err == nil {
			w.succeeded.Add(int64(len(batch) - len(lost)))
			w.lost.Add(int64(len(lost)))
			if len(lost) > 0 {
				w.log.Warn("completed jobs whose lease was lost were not recorded", "jobs", lost)
			}
			w.mu.Lock()
			for _, l := range batch {
				delete(w.inflight, l.ID)
			}
			w.mu.Unlock()
			return
		}
		if ctx.Err() != nil || time.Now().After(give) {
			w.log.Error("could not record completions; their leases will expire and the jobs will be rescued", "n", len(batch), "err", err)
			w.unrecorded.Add(int64(len(batch)))
			return
		}
		backoff.Sleep(ctx, writeRetry.Delay(try))
	}
}

func (w *Worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.beat(ctx)
		}
	}
}

// register records the worker as live (or refreshes it); a failure is logged and the next
// heartbeat tries again, since the jobs' own leases, not this row, keep them safe.
func (w *Worker) register(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, w.cfg.Lease/2)
	defer cancel()
	if err := w.c.q.WorkerBeat(hctx, dbsqlc.WorkerBeatParams{ID: w.cfg.ID, Queue: w.cfg.Queue, Kind: w.cfg.Kind, JobsDone: w.succeeded.Load(), Now: w.c.now()}); err != nil && ctx.Err() == nil {
		w.log.Warn("worker heartbeat failed", "err", err)
	}
}

func (w *Worker) beat(ctx context.Context) {
	w.register(ctx)
	// Half the lease: a slow heartbeat still lands before the lease runs out.
	hctx, cancel := context.WithTimeout(ctx, w.cfg.Lease/2)
	defer cancel()
	w.mu.Lock()
	leases := make([]Lease, 0, len(w.inflight))
	for _, h := range w.inflight {
		if !h.gone {
			leases = append(leases, h.job.Lease())
		}
	}
	w.mu.Unlock()
	if len(leases) == 0 {
		return
	}
	res, err := w.c.Heartbeat(hctx, leases, w.cfg.Lease)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("lease heartbeat failed", "err", err, "jobs", len(leases))
		}
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range res.Lost {
		if h := w.inflight[id]; h != nil {
			h.gone = true
			if h.cancel != nil {
				h.cancel(ErrLeaseLost)
			}
		}
	}
	for _, id := range res.CancelRequested {
		if h := w.inflight[id]; h != nil {
			h.job.CancelRequested = true
			if h.cancel != nil {
				h.cancel(ErrCancelRequested)
			}
		}
	}
}

func (w *Worker) cancelAll(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.inflight {
		if h.cancel != nil {
			h.cancel(cause)
		}
	}
}

func (w *Worker) releaseAll(ctx context.Context) {
	w.mu.Lock()
	var leases []Lease
	for id, h := range w.inflight {
		if !h.gone {
			leases = append(leases, h.job.Lease())
		}
		delete(w.inflight, id)
	}
	w.mu.Unlock()
	w.releaseLeases(ctx, leases)
}

// releaseJob hands one held job back (retrying briefly, see finish) without counting its attempt.
func (w *Worker) releaseJob(ctx context.Context, j *Job) {
	w.finish(ctx, j, func(ctx context.Context) error {
		_, err := w.c.Release(ctx, []Lease{j.Lease()})
		w.released.Add(1)
		return err
	})
}

// releaseLeases hands jobs back in one statement when stopping; if that fails their leases expire
// and the rescue brings them back.
func (w *Worker) releaseLeases(ctx context.Context, leases []Lease) {
	if len(leases) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := w.c.Release(rctx, leases); err != nil {
		w.log.Warn("release on stop failed; the leases will expire", "jobs", len(leases), "err", err)
	}
	w.released.Add(int64(len(leases)))
}
