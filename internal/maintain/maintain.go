// Package maintain owns crawlq's automatic maintenance: the deletes that keep the database's size
// independent of how long crawlq has been running. A pass deletes, in bounded batches, finished
// jobs past their state's retention window, the once keys, robots.txt copies and stat rows of
// finished runs that can never run again (see internal/crawl/maintain.go for why a run with dead
// pages keeps them), politeness rows of hosts idle for a while, and the URL states of revisiting
// spiders that no run reached within their state_ttl (internal/urlstate). It also folds the queue's
// count deltas, which nothing else does where no dispatcher reads stats.
//
// A Service runs passes by itself (Start/Stop, a ticker with jitter), or one at a time through
// RunOnce (the dispatcher's tick). Any number of processes may run one: a lease row in
// crawlq_leader lets one pass run at a time, at most once per Interval across all of them, and
// expires by itself when its holder dies. Every statement has its own timeout and deletes at most
// Batch rows with SKIP LOCKED or by primary key, so no pass holds many locks or holds them long,
// and a pass stops at its Budget; what is left waits for the next.
//
// Why deletes and not partitions (measured by BenchmarkRetention, quoted in docs/operations.md,
// "Maintenance"): dropping a partition removed 200,000 rows ~30x faster than the pass's batched
// deletes (68,000-84,000 jobs/s and 46,000 once keys/s on the shared 2-core machine, ~120-180 and
// ~60 WAL bytes a row). But deleting already keeps up with a 100M pages/day crawl using ~3% of a
// pass a minute, and partitions would cost more than they save: a job's finish time is not known
// when it is inserted, a time range cannot be dropped while one old dead or delayed job is in it,
// and the unique-key index would have to include the partition key.
package maintain

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/dbsqlc"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
	"crawlq/internal/urlstate"
)

// ErrInvalid marks a bad setting.
var ErrInvalid = errors.New("maintain: invalid setting")

// Config says what maintenance keeps and how hard it works. Zero fields take their defaults.
type Config struct {
	// Succeeded is how long succeeded jobs are kept after they finished. Default 24h.
	Succeeded time.Duration
	// Cancelled is how long cancelled jobs are kept after they finished. Default 24h.
	Cancelled time.Duration
	// Dead is how long dead jobs are kept after they died, for `crawlq redrive`. A run with dead
	// pages keeps its once keys until they are gone. Default 168h (7 days).
	Dead time.Duration
	// RunData is how long after a run finished its once keys, robots.txt copies and stat rows
	// are kept (only for runs with no dead job; the run row and its items stay). Default 24h.
	RunData time.Duration
	// IdleHosts is how long a host's politeness row is kept after its last request. It must be
	// longer than any spider's delay, host pause or fetch timeout: at least 1h. Default 24h.
	IdleHosts time.Duration
	// Interval is the least time between two passes, across all processes. Default 1m.
	Interval time.Duration
	// Batch bounds the rows each statement deletes. Default 2000.
	Batch int
	// Budget bounds one pass; what is left waits for the next pass. Default 20s.
	Budget time.Duration
	// QueryTimeout bounds each statement. Default 10s.
	QueryTimeout time.Duration
	// Clock is what Start's passes measure retention windows back from. Default the wall clock;
	// the soak benchmark moves it ahead to age what it wrote.
	Clock clock.Clock
	// Holder names this process in the lease. Default host-pid-random.
	Holder string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultSucceeded = 24 * time.Hour
	DefaultCancelled = 24 * time.Hour
	DefaultDead      = 7 * 24 * time.Hour
	DefaultRunData   = 24 * time.Hour
	DefaultIdleHosts = 24 * time.Hour
	DefaultInterval  = time.Minute
	DefaultBatch     = 2000
	DefaultBudget    = 20 * time.Second
	DefaultTimeout   = 10 * time.Second
)

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Succeeded, DefaultSucceeded)
	def(&c.Cancelled, DefaultCancelled)
	def(&c.Dead, DefaultDead)
	def(&c.RunData, DefaultRunData)
	def(&c.IdleHosts, DefaultIdleHosts)
	def(&c.Interval, DefaultInterval)
	def(&c.Budget, DefaultBudget)
	def(&c.QueryTimeout, DefaultTimeout)
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.Holder == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		c.Holder = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c
}

// Validate names the first bad field. Call it on a config with defaults applied.
func (c Config) Validate() error {
	for _, w := range []struct {
		name string
		d    time.Duration
		min  time.Duration
	}{
		{"Succeeded", c.Succeeded, time.Minute}, {"Cancelled", c.Cancelled, time.Minute}, {"Dead", c.Dead, time.Minute},
		{"RunData", c.RunData, time.Minute}, {"IdleHosts", c.IdleHosts, time.Hour},
		{"Interval", c.Interval, time.Millisecond}, {"Budget", c.Budget, 10 * time.Millisecond},
		{"QueryTimeout", c.QueryTimeout, 10 * time.Millisecond},
	} {
		if w.d < w.min {
			return fmt.Errorf("%w: %s %s: want at least %s", ErrInvalid, w.name, w.d, w.min)
		}
	}
	if c.Batch < 1 || c.Batch > 100000 {
		return fmt.Errorf("%w: Batch %d: want 1..100000", ErrInvalid, c.Batch)
	}
	return nil
}

// leaseName is the crawlq_leader row of the maintenance pass.
const leaseName = "maintain"

// Service runs maintenance passes.
type Service struct {
	// TestSignals are sent as the service works, for tests to wait on; off unless a test Inits them.
	TestSignals TestSignals

	cfg   Config
	pool  *pgxpool.Pool
	queue *queue.Client
	crawl *crawl.Crawler
	log   *slog.Logger

	mu      sync.Mutex
	hostsAt string // where the walk over politeness rows goes on ("": from the start)
	stop    context.CancelFunc
	done    chan struct{}
}

// TestSignals are what a Service tells a waiting test (testwait.Signal: off unless Init'ed).
type TestSignals struct {
	// PassDone is sent when a pass Start's loop ran ends: its result and error (Ran false when
	// another process held the lease).
	PassDone testwait.Signal[PassDone]
}

// PassDone is one pass's outcome, as PassDone signals it.
type PassDone struct {
	Result Result
	Err    error
}

// New returns a Service; cr may be nil for a queue-only deployment (then runs and hosts are left
// alone).
func New(q *queue.Client, cr *crawl.Crawler, cfg Config) (*Service, error) {
	if q == nil {
		return nil, fmt.Errorf("%w: a queue client is required", ErrInvalid)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, pool: q.Pool(), queue: q, crawl: cr, log: cfg.Logger}, nil
}

// Config returns the service's settings, defaults applied.
func (s *Service) Config() Config { return s.cfg }

// Result says what a pass did.
type Result struct {
	// Ran is false when the pass was skipped: another process holds the lease, or the last pass
	// ended less than Interval ago.
	Ran      bool `json:"ran"`
	Jobs     int  `json:"jobs"`      // finished jobs deleted
	OnceKeys int  `json:"once_keys"` // once keys deleted (with the page jobs that carry them)
	Robots   int  `json:"robots"`    // robots.txt copies deleted
	Sessions int  `json:"sessions"`  // retired sessions deleted
	Stats    int  `json:"stats"`     // run stat rows deleted
	Runs     int  `json:"runs"`      // runs fully purged
	Hosts    int  `json:"hosts"`     // politeness rows deleted
	// URLStates counts URL states of revisiting spiders deleted: no run reached them within
	// their spider's state_ttl (internal/urlstate).
	URLStates int `json:"url_states"`
	// Partial is true when the pass stopped at its budget with work left.
	Partial bool          `json:"partial"`
	Took    time.Duration `json:"took_ns"`
}

// Deleted sums the rows the pass deleted.
func (r Result) Deleted() int {
	return r.Jobs + r.OnceKeys + r.Robots + r.Sessions + r.Stats + r.Hosts + r.URLStates
}

// Start runs passes every Interval (with ±10% jitter, so processes started together spread out)
// until Stop or ctx ends. Calling it again while running does nothing.
func (s *Service) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return
	}
	ctx, s.stop = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
}

// Stop ends the loop Start began and waits for its pass to end.
func (s *Service) Stop() {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.stop, s.done = nil, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (s *Service) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		j := time.Duration(mrand.Int64N(int64(s.cfg.Interval)/5+1)) - s.cfg.Interval/10
		t := time.NewTimer(s.cfg.Interval + j)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		res, err := s.RunOnce(ctx, s.cfg.Clock.Now())
		if err != nil && ctx.Err() == nil {
			s.log.Warn("maintenance pass failed; the next pass retries", "err", err)
		}
		s.TestSignals.PassDone.Send(PassDone{Result: res, Err: err})
	}
}

// RunOnce runs one pass as of now (the time retention windows are measured back from; tests move
// it instead of waiting), if this process gets the lease. It stops at Budget or when ctx ends.
func (s *Service) RunOnce(ctx context.Context, now time.Time) (Result, error) {
	start := s.cfg.Clock.Now()
	var res Result
	ok, err := s.acquire(ctx)
	if err != nil || !ok {
		return res, err
	}
	res.Ran = true
	pctx, cancel := context.WithTimeout(ctx, s.cfg.Budget)
	err = s.pass(pctx, now, &res)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		res.Partial, err = true, nil
	}
	if rerr := s.release(ctx); rerr != nil {
		err = errors.Join(err, rerr)
	}
	res.Took = clock.Since(s.cfg.Clock, start)
	if err != nil {
		return res, fmt.Errorf("maintenance: %w", err)
	}
	if res.Deleted() > 0 || res.Partial {
		s.log.Info("maintenance pass", "jobs", res.Jobs, "once_keys", res.OnceKeys, "robots", res.Robots, "sessions", res.Sessions, "stats", res.Stats,
			"runs", res.Runs, "hosts", res.Hosts, "partial", res.Partial, "took", res.Took)
	}
	return res, nil
}

// timeout runs f with the per-statement timeout.
func (s *Service) timeout(ctx context.Context, f func(context.Context) error) error {
	qctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	err := f(qctx)
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // the pass's budget ended, not the statement's timeout
	}
	return err
}

func (s *Service) acquire(ctx context.Context) (bool, error) {
	// The lease outlives the pass: the pass ends at Budget, its last statement by QueryTimeout
	// after that, and the release follows.
	ttl := s.cfg.Budget + 2*s.cfg.QueryTimeout + 10*time.Second
	var got bool
	// Not cancelled with ctx (QueryTimeout still bounds it): a statement given up in flight may
	// still take the lease on the server after its caller has gone, since pgx abandons the
	// connection and the backend runs on. Nobody would release that lease, and every process's
	// passes would wait out its ttl. Run to its answer, a pass whose ctx has ended then fails at
	// once, and RunOnce releases the lease.
	err := s.timeout(context.WithoutCancel(ctx), func(ctx context.Context) error {
		_, err := dbsqlc.New(s.pool).AcquireLease(ctx, dbsqlc.AcquireLeaseParams{Name: leaseName, Holder: s.cfg.Holder, TtlUs: ttl.Microseconds()})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // held, or its interval has not passed
		}
		got = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("maintenance lease: %w", err)
	}
	return got, nil
}

func (s *Service) release(ctx context.Context) error {
	err := s.timeout(context.WithoutCancel(ctx), func(ctx context.Context) error {
		return dbsqlc.New(s.pool).ReleaseLease(ctx, dbsqlc.ReleaseLeaseParams{Name: leaseName, Holder: s.cfg.Holder, IntervalUs: s.cfg.Interval.Microseconds()})
	})
	if err != nil {
		return fmt.Errorf("release maintenance lease: %w", err)
	}
	return nil
}

// pass does the work; it returns the budget's context error when it ran out of time.
func (s *Service) pass(ctx context.Context, now time.Time, res *Result) error {
	var queues []string
	if err := s.timeout(ctx, func(ctx context.Context) (err error) {
		queues, err = s.queue.Queues(ctx) // also folds the count deltas
		return err
	}); err != nil {
		return err
	}
	cut := queue.Cutoffs{Succeeded: now.Add(-s.cfg.Succeeded), Cancelled: now.Add(-s.cfg.Cancelled), Dead: now.Add(-s.cfg.Dead)}
	for _, q := range queues {
		for {
			var n int
			if err := s.timeout(ctx, func(ctx context.Context) (err error) {
				n, err = s.queue.PurgeFinished(ctx, q, cut, s.cfg.Batch)
				return err
			}); err != nil {
				return err
			}
			res.Jobs += n
			if n < s.cfg.Batch {
				break
			}
		}
	}
	if err := s.expireURLStates(ctx, now, res); err != nil {
		return err
	}
	if s.crawl == nil {
		return nil
	}
	if err := s.purgeRuns(ctx, now, res); err != nil {
		return err
	}
	return s.pruneHosts(ctx, now, res)
}

// expireURLStates deletes, a batch at a time, the URL states kept past their spider's state_ttl.
func (s *Service) expireURLStates(ctx context.Context, now time.Time, res *Result) error {
	q := dbsqlc.New(s.queue.Pool())
	for {
		var n int64
		if err := s.timeout(ctx, func(ctx context.Context) (err error) {
			n, err = urlstate.Expire(ctx, q, now, s.cfg.Batch)
			return err
		}); err != nil {
			return err
		}
		res.URLStates += int(n)
		if n < int64(s.cfg.Batch) {
			return nil
		}
	}
}

// purgeRuns deletes what finished runs leave behind, oldest run first.
func (s *Service) purgeRuns(ctx context.Context, now time.Time, res *Result) error {
	skip := map[int64]bool{} // not settled (dead pages): listed again, left alone this pass
	for {
		var ids []int64
		if err := s.timeout(ctx, func(ctx context.Context) (err error) {
			ids, err = s.crawl.PurgeCandidates(ctx, now.Add(-s.cfg.RunData), len(skip)+100)
			return err
		}); err != nil {
			return err
		}
		progress := false
		for _, id := range ids {
			if skip[id] {
				continue
			}
			var after [16]byte
			for {
				var p crawl.Purged
				if err := s.timeout(ctx, func(ctx context.Context) (err error) {
					p, err = s.crawl.PurgeRun(ctx, id, after, s.cfg.Batch)
					return err
				}); err != nil {
					return err
				}
				res.OnceKeys, res.Robots, res.Sessions, res.Stats = res.OnceKeys+p.OnceKeys, res.Robots+p.Robots, res.Sessions+p.Sessions, res.Stats+p.Stats
				if p.Done {
					res.Runs++
					progress = true
					break
				}
				if !p.Settled {
					skip[id] = true
					break
				}
				after = p.After
			}
		}
		if !progress || len(ids) < len(skip)+100 {
			return nil
		}
	}
}

// pruneHosts walks the politeness rows from where the last pass stopped, deleting idle ones,
// until the walk reaches the end of the table (then it starts over next pass) or the budget ends.
func (s *Service) pruneHosts(ctx context.Context, now time.Time, res *Result) error {
	s.mu.Lock()
	after := s.hostsAt
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.hostsAt = after
		s.mu.Unlock()
	}()
	for {
		var next string
		var n int
		if err := s.timeout(ctx, func(ctx context.Context) (err error) {
			next, n, err = s.crawl.PruneDomains(ctx, after, now.Add(-s.cfg.IdleHosts), s.cfg.Batch)
			return err
		}); err != nil {
			return err
		}
		res.Hosts += n
		after = next
		if next == "" {
			return nil
		}
	}
}
