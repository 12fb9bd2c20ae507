package items

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"crawlq/internal/backoff"
	"crawlq/internal/clock"
)

var (
	// ErrBackpressure is returned by Write when the buffer had no space for the call's
	// items within Config.SubmitTimeout. None of the call's items stay queued; the caller
	// should retry the page later (the sink's idempotency makes re-sending safe).
	ErrBackpressure = errors.New("item pipeline full (backpressure)")
	// ErrClosed is returned by Write after Close, and to writers still waiting when Close
	// gives up draining.
	ErrClosed = errors.New("item pipeline closed")
)

// maxBackoff caps the doubling backoff between retries of a failed sink write.
const maxBackoff = 5 * time.Second

// Sink stores batches of items durably.
type Sink interface {
	// Name identifies the sink in logs.
	Name() string
	// Write stores batch durably before returning nil. It must be idempotent by
	// (RunID, Key): the pipeline retries failed writes, and page jobs are retried, so the
	// same item arrives more than once. It must honour ctx. An error wrapping
	// ErrInvalidItem says the batch holds an item the sink will never accept: the
	// pipeline then splits the batch to fail only the writer of that item, instead of
	// retrying everyone's items until their contexts end.
	Write(ctx context.Context, batch []Item) error
}

// Config tunes a Pipeline. The zero value gives the defaults.
type Config struct {
	// MaxItems bounds the items accepted but not yet written. Default 10000.
	MaxItems int
	// MaxBytes bounds the bytes of those items (Data plus Key, URL and Spider). Default
	// 32 MiB. A single item larger than MaxBytes is admitted only into an empty buffer.
	MaxBytes int64
	// BatchSize is the most items in one sink write. Default 500; at most MaxItems.
	BatchSize int
	// FlushInterval is how long a partial batch waits for more items before it is
	// written. Default 50ms.
	FlushInterval time.Duration
	// SubmitTimeout is how long Write waits for buffer space (without any of its items
	// being admitted) before it returns ErrBackpressure. Default 30s.
	SubmitTimeout time.Duration
	// Concurrency is the number of sink writes in flight at once. Default 2.
	Concurrency int
	// RetryBackoff is the first wait after a failed sink write; it doubles per failure,
	// capped at 5s, with jitter. Default 100ms.
	RetryBackoff time.Duration
	// WriteTimeout bounds one sink write attempt, so a hung sink is retried rather than
	// holding a worker forever. Default 30s.
	WriteTimeout time.Duration
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxItems, 10000)
	if c.MaxBytes == 0 {
		c.MaxBytes = 32 << 20
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
		if c.MaxItems > 0 {
			c.BatchSize = min(c.BatchSize, c.MaxItems) // a small buffer could never fill a default batch
		}
	}
	defDur(&c.FlushInterval, 50*time.Millisecond)
	defDur(&c.SubmitTimeout, 30*time.Second)
	def(&c.Concurrency, 2)
	defDur(&c.RetryBackoff, 100*time.Millisecond)
	defDur(&c.WriteTimeout, 30*time.Second)
	return c
}

func (c Config) validate() error {
	switch {
	case c.MaxItems < 1:
		return fmt.Errorf("items: Config.MaxItems %d: must be positive", c.MaxItems)
	case c.MaxBytes < 1:
		return fmt.Errorf("items: Config.MaxBytes %d: must be positive", c.MaxBytes)
	case c.BatchSize < 1:
		return fmt.Errorf("items: Config.BatchSize %d: must be positive", c.BatchSize)
	case c.BatchSize > c.MaxItems:
		return fmt.Errorf("items: Config.BatchSize %d: must not exceed MaxItems %d", c.BatchSize, c.MaxItems)
	case c.FlushInterval < 0:
		return fmt.Errorf("items: Config.FlushInterval %s: must not be negative", c.FlushInterval)
	case c.SubmitTimeout < 0:
		return fmt.Errorf("items: Config.SubmitTimeout %s: must not be negative", c.SubmitTimeout)
	case c.Concurrency < 1:
		return fmt.Errorf("items: Config.Concurrency %d: must be positive", c.Concurrency)
	case c.RetryBackoff < 0:
		return fmt.Errorf("items: Config.RetryBackoff %s: must not be negative", c.RetryBackoff)
	case c.WriteTimeout < 0:
		return fmt.Errorf("items: Config.WriteTimeout %s: must not be negative", c.WriteTimeout)
	}
	return nil
}

// Stats is a snapshot of a Pipeline's counters.
type Stats struct {
	// BufferedItems and BufferedBytes are accepted but not yet written (queued or in flight).
	BufferedItems int
	BufferedBytes int64
	// MaxBufferedItems and MaxBufferedBytes are the high-water marks since New.
	MaxBufferedItems int
	MaxBufferedBytes int64
	// WrittenItems counts items in successful sink writes, re-sent duplicates included.
	WrittenItems int64
	// Batches counts successful sink writes.
	Batches int64
	// Retries counts failed sink writes; each is retried after a backoff while any of
	// its writers still waits.
	Retries int64
	// Backpressure counts Write calls that returned ErrBackpressure.
	Backpressure int64
	// Dropped counts items discarded unwritten because their writer gave up (its context
	// ended, it got ErrBackpressure, or Close gave up) or the sink rejected the call.
	Dropped int64
	// Rejected counts Write calls failed because the sink rejected one of their items
	// (ErrInvalidItem).
	Rejected int64
}

// Pipeline batches items from concurrent writers into sink writes, within a bounded
// buffer. Create it with New; it is safe for concurrent use.
type Pipeline struct {
	sink Sink
	cfg  Config
	log  *slog.Logger

	// stopCtx is cancelled when Close gives up draining; it aborts sink writes in flight.
	stopCtx context.Context
	stop    context.CancelFunc
	exited  chan struct{} // closed when every worker has returned

	mu sync.Mutex
	// changed is closed and replaced whenever workers may have something new to do:
	// items were admitted, or the pipeline began closing or stopped.
	changed  chan struct{}
	closing  bool    // Close was called: no new writes, flush partial batches at once
	stopped  bool    // Close gave up: workers return, nothing more is written
	admitQ   []*call // writers waiting for buffer space, first come first served
	pending  []entry // admitted items not yet taken by a worker, oldest first
	buffered int     // items admitted and not yet written or dropped
	bytes    int64
	stats    Stats
}

// call is one Write's share of the pipeline; its fields are guarded by Pipeline.mu.
type call struct {
	items     []Item
	next      int           // index of the next item to admit
	remaining int           // items not yet written
	progress  chan struct{} // signalled (never blocking) when items of the call are admitted
	done      chan struct{} // closed by finish
	finished  bool
	err       error // the call's result, set before done is closed
	lastErr   error // the last sink error seen by a batch holding the call's items
}

func (c *call) finish(err error) {
	if c.finished {
		return
	}
	c.finished, c.err = true, err
	close(c.done)
}

type entry struct {
	item Item
	c    *call
	size int64
	at   clock.Stopwatch // started when it was admitted, for FlushInterval
}

// New starts a pipeline writing to sink. A nil log uses slog.Default().
func New(sink Sink, cfg Config, log *slog.Logger) (*Pipeline, error) {
	if sink == nil {
		return nil, errors.New("items: New: sink is nil")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pipeline{
		sink: sink, cfg: cfg, log: log.With("sink", sink.Name()),
		stopCtx: ctx, stop: cancel, exited: make(chan struct{}),
		changed: make(chan struct{}),
	}
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(p.work)
	}
	go func() {
		wg.Wait()
		cancel()
		close(p.exited)
	}()
	return p, nil
}

// Write sends items to the sink and returns once all of them are durably written,
// group-committed with other writers' items. It returns
//   - ErrInvalidItem if an item is invalid (then nothing is sent) or the sink rejected
//     one of the call's items;
//   - ErrBackpressure if the buffer had no space within Config.SubmitTimeout;
//   - ErrClosed after Close;
//   - ctx's error, wrapping the last sink error if any, when ctx ends first.
//
// After a failure, items of the call may or may not have been written, which the sink's
// idempotency makes harmless. Data must not be modified after it is passed to Write.
func (p *Pipeline) Write(ctx context.Context, items []Item) error {
	for i := range items {
		if err := items[i].Validate(); err != nil {
			return fmt.Errorf("write items: item %d: %w", i, err)
		}
	}
	if len(items) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write items: %w", err)
	}
	c := &call{items: items, remaining: len(items), progress: make(chan struct{}, 1), done: make(chan struct{})}
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return ErrClosed
	}
	p.admitQ = append(p.admitQ, c)
	p.admitLocked()
	admitted := c.next == len(c.items)
	p.mu.Unlock()
	if !admitted {
		if err := p.waitAdmitted(ctx, c); err != nil {
			return err
		}
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		p.mu.Lock()
		defer p.mu.Unlock()
		if c.finished { // written (or failed) just as ctx ended
			return c.err
		}
		last := c.lastErr
		p.abandonLocked(c, ctx.Err())
		if last != nil {
			return fmt.Errorf("write items: %w; last sink error: %w", ctx.Err(), last)
		}
		return fmt.Errorf("write items: %w", ctx.Err())
	}
}

// waitAdmitted waits until every item of c is in the buffer. The SubmitTimeout clock
// restarts whenever some of c's items are admitted, so a call larger than the buffer
// goes through in pieces as long as the sink keeps draining it.
func (p *Pipeline) waitAdmitted(ctx context.Context, c *call) error {
	timer := time.NewTimer(p.cfg.SubmitTimeout)
	defer timer.Stop()
	for {
		select {
		case <-c.progress:
			p.mu.Lock()
			all := c.next == len(c.items)
			p.mu.Unlock()
			if all {
				return nil
			}
			timer.Reset(p.cfg.SubmitTimeout)
		case <-c.done: // Close failed the call
			return c.err
		case <-timer.C:
			p.mu.Lock()
			defer p.mu.Unlock()
			if c.next == len(c.items) {
				return nil
			}
			if c.finished {
				return c.err
			}
			p.stats.Backpressure++
			p.abandonLocked(c, ErrBackpressure)
			p.log.Debug("item write refused: buffer full", "items", len(c.items),
				"buffered_items", p.buffered, "buffered_bytes", p.bytes, "waited", p.cfg.SubmitTimeout)
			return fmt.Errorf("write items: %w: no space for %d items within %s", ErrBackpressure, len(c.items), p.cfg.SubmitTimeout)
		case <-ctx.Done():
			p.mu.Lock()
			defer p.mu.Unlock()
			if c.finished {
				return c.err
			}
			p.abandonLocked(c, ctx.Err())
			return fmt.Errorf("write items: %w", ctx.Err())
		}
	}
}

// admitLocked moves items of waiting writers into the buffer, strictly in arrival order
// so that a large write is not starved by a stream of small ones.
func (p *Pipeline) admitLocked() {
	now := clock.StartStopwatch()
	admitted := false
	for len(p.admitQ) > 0 {
		c := p.admitQ[0]
		n := 0
		for c.next < len(c.items) {
			it := &c.items[c.next]
			sz := it.size()
			if p.buffered >= p.cfg.MaxItems || (p.buffered > 0 && p.bytes+sz > p.cfg.MaxBytes) {
				break
			}
			p.pending = append(p.pending, entry{item: *it, c: c, size: sz, at: now})
			p.buffered++
			p.bytes += sz
			c.next++
			n++
		}
		if n > 0 {
			admitted = true
			p.stats.MaxBufferedItems = max(p.stats.MaxBufferedItems, p.buffered)
			p.stats.MaxBufferedBytes = max(p.stats.MaxBufferedBytes, p.bytes)
			select {
			case c.progress <- struct{}{}:
			default:
			}
		}
		if c.next < len(c.items) {
			break
		}
		p.admitQ[0] = nil
		p.admitQ = p.admitQ[1:]
	}
	if admitted {
		p.broadcastLocked()
	}
}

func (p *Pipeline) broadcastLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// abandonLocked finishes c with err and takes back whatever of it is still queued: its
// place in the admission queue and its items not yet handed to the sink. Items already
// in a sink write stay there; the batch forgets them if it fails.
func (p *Pipeline) abandonLocked(c *call, err error) {
	if c.finished {
		return
	}
	if i := slices.Index(p.admitQ, c); i >= 0 {
		p.admitQ = slices.Delete(p.admitQ, i, i+1)
	}
	kept := p.pending[:0]
	for _, e := range p.pending {
		if e.c == c {
			p.releaseLocked(e.size)
			p.stats.Dropped++
			continue
		}
		kept = append(kept, e)
	}
	clear(p.pending[len(kept):])
	p.pending = kept
	c.finish(err)
	p.admitLocked()
}

func (p *Pipeline) releaseLocked(size int64) {
	p.buffered--
	p.bytes -= size
}

// work is one sink writer: it takes batches until the pipeline is drained or stopped.
func (p *Pipeline) work() {
	for {
		batch, ok := p.nextBatch()
		if !ok {
			return
		}
		p.writeBatch(batch)
	}
}

// nextBatch waits for a full batch, or a partial one older than FlushInterval (at once
// when closing). Cutting batches only when a worker is free is the group commit: under
// load, items accumulate while the sink is busy and go out together.
func (p *Pipeline) nextBatch() ([]entry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.stopped {
			return nil, false
		}
		n := len(p.pending)
		var wait time.Duration
		if n > 0 {
			wait = p.cfg.FlushInterval - p.pending[0].at.Elapsed()
		}
		if n >= p.cfg.BatchSize || (n > 0 && (p.closing || wait <= 0)) {
			k := min(n, p.cfg.BatchSize)
			batch := slices.Clone(p.pending[:k])
			clear(p.pending[:k])
			p.pending = p.pending[k:]
			if len(p.pending) == 0 {
				p.pending = nil
			}
			return batch, true
		}
		if n == 0 && p.closing && len(p.admitQ) == 0 {
			return nil, false
		}
		changed := p.changed
		var timer *time.Timer
		var timeout <-chan time.Time
		if n > 0 {
			timer = time.NewTimer(wait)
			timeout = timer.C
		}
		p.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
		case <-p.stopCtx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		p.mu.Lock()
	}
}

// writeBatch writes batch, retrying with backoff while any of its writers still waits.
// When the sink rejects the batch's content (ErrInvalidItem), the batch is halved until
// the rejected items are alone with their own writer, whose Write then fails.
func (p *Pipeline) writeBatch(batch []entry) {
	// Jittered, so that retries from many workers spread out.
	retry := backoff.Policy{Base: min(p.cfg.RetryBackoff, maxBackoff), Max: maxBackoff, Jitter: true}
	for attempt := 1; ; attempt++ {
		p.mu.Lock()
		batch = p.forgetFinishedLocked(batch)
		if len(batch) > 0 && p.stopped {
			p.failLocked(batch, fmt.Errorf("write items: %w before the sink wrote them", ErrClosed))
			batch = nil
		}
		p.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		items := make([]Item, len(batch))
		for i := range batch {
			items[i] = batch[i].item
		}
		ctx, cancel := context.WithTimeout(p.stopCtx, p.cfg.WriteTimeout)
		err := p.sink.Write(ctx, items)
		cancel()

		p.mu.Lock()
		if err == nil {
			for _, e := range batch {
				p.releaseLocked(e.size)
				e.c.remaining--
				if e.c.remaining == 0 {
					e.c.finish(nil)
				}
			}
			p.stats.WrittenItems += int64(len(batch))
			p.stats.Batches++
			p.admitLocked()
			p.mu.Unlock()
			return
		}
		if errors.Is(err, ErrInvalidItem) {
			p.mu.Unlock()
			p.isolateRejected(batch, err)
			return
		}
		p.stats.Retries++
		if p.stopped {
			p.failLocked(batch, fmt.Errorf("write items: %w before the sink wrote them: %w", ErrClosed, err))
			p.mu.Unlock()
			return
		}
		for _, e := range batch {
			e.c.lastErr = err
		}
		p.mu.Unlock()

		sleep := retry.Delay(attempt)
		p.log.Warn("item sink write failed; retrying", "attempt", attempt, "items", len(batch), "backoff", sleep, "err", err)
		backoff.Sleep(p.stopCtx, sleep)
	}
}

// isolateRejected handles a batch the sink rejected as invalid. A batch holding one
// writer's items fails that writer; a larger one is halved and each half written (and
// retried) on its own, so one bad item costs a few extra writes, not everyone's pages.
func (p *Pipeline) isolateRejected(batch []entry, err error) {
	single := true
	for _, e := range batch[1:] {
		single = single && e.c == batch[0].c
	}
	if !single {
		p.log.Warn("item sink rejected a batch; splitting it to find the bad items", "items", len(batch), "err", err)
		half := slices.Clone(batch[len(batch)/2:])
		p.writeBatch(batch[:len(batch)/2])
		p.writeBatch(half)
		return
	}
	c := batch[0].c
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Rejected++
	// Release this batch, then take back whatever else of the call is still queued.
	for _, e := range batch {
		p.releaseLocked(e.size)
		p.stats.Dropped++
	}
	p.abandonLocked(c, fmt.Errorf("write items: sink %s rejected an item: %w", p.sink.Name(), err))
	p.admitLocked()
}

// failLocked gives up on batch: its writers get err.
func (p *Pipeline) failLocked(batch []entry, err error) {
	for _, e := range batch {
		p.releaseLocked(e.size)
		p.stats.Dropped++
		e.c.finish(err)
	}
	p.admitLocked()
}

// forgetFinishedLocked drops from batch the items of writers that gave up, so a failing
// sink is not retried on behalf of nobody and their buffer space is freed.
func (p *Pipeline) forgetFinishedLocked(batch []entry) []entry {
	kept := batch[:0]
	for _, e := range batch {
		if e.c.finished {
			p.releaseLocked(e.size)
			p.stats.Dropped++
			continue
		}
		kept = append(kept, e)
	}
	if len(kept) < len(batch) {
		clear(batch[len(kept):])
		p.admitLocked()
	}
	return kept
}

// Close stops accepting writes, fails writers still waiting for buffer space with
// ErrClosed, and waits until everything admitted is written. If ctx ends first it stops
// the workers, aborting sink writes in flight, fails the remaining writers with
// ErrClosed, and returns ctx's error. Close may be called more than once.
func (p *Pipeline) Close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closing {
		p.closing = true
		for _, c := range slices.Clone(p.admitQ) {
			p.abandonLocked(c, ErrClosed)
		}
		p.broadcastLocked()
	}
	p.mu.Unlock()
	select {
	case <-p.exited:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		var calls []*call
		seen := map[*call]bool{}
		for _, e := range p.pending {
			if !seen[e.c] {
				seen[e.c] = true
				calls = append(calls, e.c)
			}
		}
		for _, c := range calls {
			p.abandonLocked(c, fmt.Errorf("write items: %w before the sink wrote them", ErrClosed))
		}
		p.broadcastLocked()
	}
	p.mu.Unlock()
	p.stop()
	<-p.exited
	return fmt.Errorf("close item pipeline: %w", ctx.Err())
}

// Stats returns a snapshot of the pipeline's counters.
func (p *Pipeline) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.BufferedItems, s.BufferedBytes = p.buffered, p.bytes
	return s
}
