// Package crawl runs spiders as fan-out page jobs on the queue. It owns runs (crawlq_run), run
// stats, robots.txt storage and the politeness state every worker shares (their queries are in
// internal/dbsqlc: crawlq_run.sql, crawlq_run_stat.sql, crawlq_robots.sql, crawlq_domain.sql), and
// the job handlers for the "run" and "page" kinds.
//
// The path of a run: Schedule inserts the run and its run job in one transaction. The run job asks
// the spider for its start requests and enqueues them as page jobs (children of the run, each with
// its URL as once key, so a URL is queued at most once per run). A page job fetches its URL (after
// robots.txt and a politeness slot) and parses it. It then commits the new pages it found, while
// it still runs, and finally completes in a batch with its stats and items (see finish.go), fenced
// by its lease. Since a page's children are committed before it completes, a run's set of
// unfinished jobs is never empty while anyone may still add to it; so "no unfinished job" means
// done, and the run finishes exactly once, by a conditional update, from whichever worker (or
// sweep, after a crash) sees that first.
package crawl

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/artifact"
	"crawlq/internal/browser"
	"crawlq/internal/clock"
	"crawlq/internal/dbsqlc"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/proxy"
	"crawlq/internal/queue"
	"crawlq/internal/robots"
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
	"crawlq/internal/urlstate"
)

// Job kinds the crawl handles.
const (
	KindRun  = "run"
	KindPage = "page"
)

// Errors callers branch on.
var (
	// ErrClosed is returned for a page finished after Close.
	ErrClosed      = errors.New("crawl: crawler closed")
	ErrRunNotFound = errors.New("crawl: run not found")
	ErrRunFinished = errors.New("crawl: run already finished")
	ErrInvalid     = errors.New("crawl: invalid input")
)

// Config wires a Crawler.
type Config struct {
	Pool     *pgxpool.Pool
	Queue    *queue.Client
	Spiders  *spider.Registry
	Pipeline *items.Pipeline
	// TxSink, when set, receives items inside the transaction that completes their page, instead
	// of through Pipeline: items and completion commit together, with one commit for a whole
	// batch of pages. The node sets it for the default Postgres sink.
	TxSink items.TxSink
	// Fetch is the base fetcher configuration; each spider's user agent and AllowPrivate are
	// applied on top. Zero values take fetch's defaults, which refuse every address that is not
	// public: a process that crawls a site on this machine (the demo, local development, tests,
	// benchmarks) sets Fetch.AllowLoopback.
	Fetch fetch.Config
	// CountItems, when set, counts the distinct items a run holds in the sink (the Postgres sink
	// keys them by run and key), which a run's items stat then reports: a page fetched twice under
	// two URLs, or a retried command, yields its items twice but stores them once. Without it the
	// stat counts the items pages yielded. The node sets it for the Postgres sink.
	CountItems func(ctx context.Context, runID int64) (int64, error)
	// DuplicateKey, when set, finds a key a run's items repeated and the URLs of its first two,
	// for the run's log (itemloss.go). The node sets it for the Postgres sink.
	DuplicateKey func(ctx context.Context, runID int64) (key string, urls []string, err error)
	// ItemTimeout bounds how long a page waits for its items to be durably written. Past it the
	// page is put back to run again later (its items are idempotent by key), so a stalled sink
	// slows the crawl without holding workers indefinitely. Default 60s.
	ItemTimeout time.Duration
	// OnFinish, when set, is called once for each run this process finishes (tests, progress,
	// publishing its events at once), after the change committed.
	OnFinish func(runID int64, state string)
	// OnStart, when set, is called after this process committed a run's start (its state
	// running; again when a command run's retry starts it again).
	OnStart func(runID int64)
	// OnEnqueue, when set, is called after this process committed new jobs to a queue, so local
	// idle workers can claim them at once.
	OnEnqueue func(queue string)
	// Reserve, when set, sets aside room for up to n jobs of a queue in this process's workers
	// (one reservation per worker, none when there is no room). Pages a page finds go to that
	// room already leased (see queue.Reservation) instead of waiting in the queue for a claim.
	Reserve func(queue string, n int) []*queue.Reservation
	// RunLog receives what happens to a run's pages, for `crawlq logs RUN`: pages that died and
	// hosts paused and lifted (pagelog.go). Default: the Postgres run log of Pool.
	RunLog runlog.Store
	// Artifacts keeps the screenshot and HTML of rendered pages that failed, for the operator
	// (artifacts.go). Default: in Postgres (Pool).
	Artifacts *artifact.Store
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock, when set, is the clock of the deadlines the crawl keeps in shared rows (host
	// pauses, robots.txt claims, politeness slots, benched proxies) and of the times this process
	// keeps itself (a host's failures and recovery, proxy rests, revisits, run log lines). Default
	// nil: the database's now() in each statement, the one clock every process shares, and the
	// wall clock here. Tests set a stopped clock and move it instead of sleeping past a deadline;
	// every process sharing those rows must then use the same clock.
	Clock clock.Clock
	// Browser, when set, lets this process render the pages of spiders with render: browser
	// with headless Chromium (render.go), each pool of browsers started at its first page; its
	// AllowLoopback, UserAgent and AllowPrivate come from Fetch and the spider. Nil: such pages
	// are left to a process that renders them (the ECS runners).
	Browser *browser.Config
	// ProxyEnv are the variables spiders' proxy URLs may name as ${CRAWLQ_PROXY_...}
	// (proxies.go), read where the process starts (envconfig.ProxyEnv). Default none: a proxy
	// URL that names one fails its pages, saying the variable is not set.
	ProxyEnv map[string]string
	// ProxyRest is the first rest of a proxy that failed or was banned, doubling with each
	// failure in a row up to 10 minutes. Default 10s.
	ProxyRest time.Duration
}

// Crawler schedules runs and works their jobs.
type Crawler struct {
	cfg       Config
	clk       clock.Clock     // Config.Clock, or the wall clock
	db        *dbsqlc.Queries // on cfg.Pool
	log       *slog.Logger
	robots    *robots.Cache
	pauses    onceSet[pauseKey] // the host pauses written to run logs (pagelog.go)
	itemNotes onceSet[itemNote] // the items not stored already said in run logs (itemloss.go)
	full      fullRuns          // the runs that keep no more failed pages (artifacts.go)

	mu       sync.Mutex
	fetchers map[fetcherKey]*fetch.Fetcher
	browsers map[browserKey]*browser.Pool // started at their first page (render.go)
	crashes  map[int64]int                // page jobs Chromium crashed under, and how often
	// Spiders' proxies (proxies.go): rotations by list, and the uncounted retries of page jobs
	// whose proxy failed or that were banned.
	rotations  map[string]*proxies
	proxyTries map[int64]int
	banTries   map[int64]int
	retired    map[int64]*retiredView // per run: the sessions known retired (sessions.go)
	runs       map[int64]*runInfo     // immutable facts of runs this process has seen
	command    CommandRunner
	// active counts, per run, the pages being handled in this process (see settle).
	active    map[int64]int
	handling  int // the sum of active: pages being handled here, of any run (finishLoop lingers for them)
	incoming  int // pages handed to this process's workers that have not started yet, about (handedOver)
	seen      *seenCache
	cancelled map[int64]bool   // runs asked to cancel, as the last batch said; pruned when they end (runstate.go)
	hosts     *hostSlots       // requests in flight per domain from this process (hosts.go)
	health    *hostHealth      // hosts seen failing, and their pauses (hostpause.go)
	states    *urlstate.Loader // URL states of revisiting spiders' pages, read together (revisit.go)

	finishOnce    sync.Once
	finishQ       chan *finishReq // pages waiting for a batch (finish.go)
	finishers     sync.WaitGroup
	closeOnce     sync.Once
	closed        chan struct{} // Close was called
	finishersDone chan struct{} // every finisher has returned
}

type fetcherKey struct {
	ua      string
	private bool
	proxy   *proxy.Proxy // one of a rotation's; nil: direct
}

// New returns a Crawler.
func New(cfg Config) (*Crawler, error) {
	if cfg.Pool == nil || cfg.Queue == nil || cfg.Spiders == nil || cfg.Pipeline == nil {
		return nil, fmt.Errorf("%w: crawl config needs Pool, Queue, Spiders and Pipeline", ErrInvalid)
	}
	if cfg.ItemTimeout <= 0 {
		cfg.ItemTimeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RunLog == nil {
		cfg.RunLog = runlog.Postgres{Pool: cfg.Pool}
	}
	if cfg.Artifacts == nil {
		cfg.Artifacts = &artifact.Store{Pool: cfg.Pool}
	}
	clk := clock.Or(cfg.Clock)
	return &Crawler{cfg: cfg, db: dbsqlc.New(cfg.Pool), log: cfg.Logger, robots: robots.NewCache(4096),
		fetchers: map[fetcherKey]*fetch.Fetcher{}, browsers: map[browserKey]*browser.Pool{}, crashes: map[int64]int{}, rotations: map[string]*proxies{}, proxyTries: map[int64]int{}, banTries: map[int64]int{}, retired: map[int64]*retiredView{}, runs: map[int64]*runInfo{}, active: map[int64]int{}, seen: newSeenCache(seenCacheSize), cancelled: map[int64]bool{}, hosts: newHostSlots(), health: newHostHealth(clk), clk: clk,
		states: urlstate.NewLoader(dbsqlc.New(cfg.Pool)),
		closed: make(chan struct{}), finishersDone: make(chan struct{})}, nil
}

// now is the time the shared deadlines are measured against: Config.Clock's, or nil for the
// database's clock.
func (c *Crawler) now() *time.Time {
	if c.cfg.Clock == nil {
		return nil
	}
	t := c.clk.Now()
	return &t
}

// Register adds the crawl's job handlers to mux.
func (c *Crawler) Register(mux *queue.Mux) {
	// A database fault in any path of a job costs it no attempt (deferFault).
	mux.Handle(KindRun, func(ctx context.Context, job *queue.Job) error { return deferFault(c.workRun(ctx, job)) })
	mux.Handle(KindPage, func(ctx context.Context, job *queue.Job) error { return deferFault(c.workPage(ctx, job)) })
}

// ScheduleParams describe a run to schedule.
type ScheduleParams struct {
	Spider string
	// Version pins a stored version of the spider (Scrapyd's _version): the run, every page of it,
	// runs that version, and its monitors judge it. Default "": the newest when the run starts.
	Version string
	Args    map[string]string
	// Settings override the spider's (see Overrides).
	Settings Overrides
	// Priority of the run's jobs, -1000..1000.
	Priority int
	// RunAt or Delay postpone the start (not both).
	RunAt time.Time
	Delay time.Duration
	// IdempotencyKey makes scheduling idempotent: while a run of the spider with this key is
	// unfinished, scheduling again returns it (moving its start when Replace is set and it has
	// not started) instead of creating another.
	IdempotencyKey string
	Replace        bool
}

// Overrides change a spider's settings for one run. Nil fields keep the spider's value.
type Overrides struct {
	Delay       *Duration `json:"delay,omitempty"`
	Concurrency *int      `json:"concurrency,omitempty"`
	MaxPages    *int      `json:"max_pages,omitempty"`
	MaxDepth    *int      `json:"max_depth,omitempty"`
	UserAgent   *string   `json:"user_agent,omitempty"`
	ObeyRobots  *bool     `json:"obey_robots,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as a Go duration string ("250ms").
type Duration time.Duration

// MarshalJSON writes d as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration: want a string like \"500ms\" or a number of seconds")
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

func (o Overrides) apply(s spider.Settings) (spider.Settings, error) {
	if o.Delay != nil {
		s.Delay = time.Duration(*o.Delay)
	}
	if o.Concurrency != nil {
		s.Concurrency = *o.Concurrency
	}
	if o.MaxPages != nil {
		s.MaxPages = *o.MaxPages
	}
	if o.MaxDepth != nil {
		s.MaxDepth = *o.MaxDepth
	}
	if o.UserAgent != nil {
		s.UserAgent = *o.UserAgent
	}
	if o.ObeyRobots != nil {
		s.ObeyRobots = *o.ObeyRobots
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("%w: settings: %v", ErrInvalid, err)
	}
	return s, nil
}

// Scheduled is the outcome of Schedule.
type Scheduled struct {
	RunID     int64
	Duplicate bool // an unfinished run with the same idempotency key already existed
	State     string
	RunAt     time.Time
}

// Schedule creates a run and its run job in one transaction.
func (c *Crawler) Schedule(ctx context.Context, p ScheduleParams) (Scheduled, error) {
	res, settings, err := c.spiderAt(p.Spider, p.Version)
	if err != nil {
		return Scheduled{}, err
	}
	effective, err := p.Settings.apply(settings)
	if err != nil {
		return Scheduled{}, err
	}
	if err := p.check(res.Spider); err != nil {
		return Scheduled{}, err
	}
	args, over, err := p.encode()
	if err != nil {
		return Scheduled{}, err
	}
	q := runQueue(settings)
	out, err := c.scheduleTx(ctx, p, res.Version, q, args, over, effective)
	if err != nil {
		return out, err
	}
	if p.RunAt.IsZero() && p.Delay == 0 && c.cfg.OnEnqueue != nil {
		c.cfg.OnEnqueue(q) // a run due now starts at once in this process, not at the next poll
	}
	return out, nil
}

// scheduleTx writes the run (pinned to version when p names one) and its job, on queue q, in one
// transaction.
func (c *Crawler) scheduleTx(ctx context.Context, p ScheduleParams, version, q, args, over string, effective spider.Settings) (Scheduled, error) {
	tx, err := c.cfg.Pool.Begin(ctx)
	if err != nil {
		return Scheduled{}, fmt.Errorf("schedule: %w", err)
	}
	defer tx.Rollback(ctx)
	db := c.db.WithTx(tx)
	out, err := insertRun(ctx, db, p, q, args, over, effective)
	if err != nil {
		return out, err
	}
	if p.Version != "" && !out.Duplicate {
		// In the run's own transaction: no worker can start it with another version.
		if err := db.PinSpiderRun(ctx, dbsqlc.PinSpiderRunParams{RunID: out.RunID, Spider: p.Spider, Version: version}); err != nil {
			return out, fmt.Errorf("schedule: pin version: %w", err)
		}
	}
	if !out.Duplicate || p.Replace {
		if err := c.enqueueRunJob(ctx, tx, db, p, q, out); err != nil {
			return out, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return out, fmt.Errorf("schedule: %w", err)
	}
	return out, nil
}

// check refuses parameters no run can have; sp, the spider (nil for a command or Scrapy one),
// checks the args.
func (p ScheduleParams) check(sp spider.Spider) error {
	switch {
	case p.Priority < queue.MinPriority || p.Priority > queue.MaxPriority:
		return fmt.Errorf("%w: priority %d: want %d..%d", ErrInvalid, p.Priority, queue.MinPriority, queue.MaxPriority)
	case p.Delay < 0:
		return fmt.Errorf("%w: delay %s: must not be negative", ErrInvalid, p.Delay)
	case p.Delay > 0 && !p.RunAt.IsZero():
		return fmt.Errorf("%w: set a time or a delay, not both", ErrInvalid)
	case len(p.IdempotencyKey) > 256:
		return fmt.Errorf("%w: idempotency key longer than 256 bytes", ErrInvalid)
	}
	if sp != nil {
		// Catch bad args (e.g. a malformed base_url) now rather than in the run job.
		if _, err := spider.WithArgs(sp, p.Args); err != nil {
			return fmt.Errorf("%w: args: %v", ErrInvalid, err)
		}
	}
	return nil
}

// encode is the run's args and setting overrides as stored, within queue.MaxArgsBytes.
func (p ScheduleParams) encode() (args, settings string, err error) {
	if p.Args == nil {
		p.Args = map[string]string{}
	}
	a, _ := json.Marshal(p.Args)
	o, _ := json.Marshal(p.Settings)
	if len(a)+len(o) > queue.MaxArgsBytes {
		return "", "", fmt.Errorf("%w: args and settings exceed %d bytes", ErrInvalid, queue.MaxArgsBytes)
	}
	return string(a), string(o), nil
}

// insertRun inserts the run row (or finds the unfinished run with its idempotency key) in db's
// transaction.
func insertRun(ctx context.Context, db *dbsqlc.Queries, p ScheduleParams, q, args, over string, effective spider.Settings) (Scheduled, error) {
	var runAt *time.Time
	if !p.RunAt.IsZero() {
		runAt = &p.RunAt
	}
	row, err := db.InsertRun(ctx, dbsqlc.InsertRunParams{
		Spider: p.Spider, Args: args, Settings: over, Priority: int16(p.Priority), Queue: q,
		IdempotencyKey: p.IdempotencyKey, PageBudget: int64(max(effective.MaxPages, 0)), // 0: no page budget
		RunAt: runAt, DelayUs: p.Delay.Microseconds(), MaxDeadShare: float32(effective.Retry.MaxDeadShare),
	})
	if err != nil {
		return Scheduled{}, fmt.Errorf("schedule: %w", err)
	}
	return Scheduled{RunID: row.ID, Duplicate: row.Duplicate, State: string(row.State), RunAt: row.RunAt}, nil
}

// enqueueRunJob enqueues run out's job in tx; for a run that existed already (p.Replace), it
// replaces its job and moves the run to the new time and priority.
func (c *Crawler) enqueueRunJob(ctx context.Context, tx pgx.Tx, db *dbsqlc.Queries, p ScheduleParams, q string, out Scheduled) error {
	mode := queue.Keep
	if p.Replace {
		mode = queue.Replace
	}
	_, err := c.cfg.Queue.EnqueueTx(ctx, tx, queue.EnqueueParams{
		Queue: q, Kind: KindRun, Args: json.RawMessage(fmt.Sprintf(`{"run":%d}`, out.RunID)),
		Priority: p.Priority, RunAt: p.RunAt, Delay: p.Delay, ParentID: out.RunID, MaxAttempts: 5,
		UniqueKey: fmt.Sprintf("run:%d", out.RunID), OnDuplicate: mode,
	})
	if err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	if !out.Duplicate {
		return nil
	}
	moveTo := p.RunAt
	if moveTo.IsZero() {
		moveTo = c.clk.Now().Add(p.Delay)
	}
	if err := db.MoveRun(ctx, dbsqlc.MoveRunParams{ID: out.RunID, RunAt: moveTo, Priority: int16(p.Priority)}); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	return nil
}

// runQueue is the queue of a spider's jobs: its own, else "long" for ECS spiders, else "crawl".
func runQueue(s spider.Settings) string {
	if s.Queue != "" && s.Queue != spider.DefaultQueue {
		return s.Queue
	}
	if s.Runtime == spider.RuntimeECS {
		return "long"
	}
	return spider.DefaultQueue
}

// spiderAt finds a version of a spider ("" the newest) and its settings. A name or version no one
// has is ErrInvalid; a spider store that does not answer is any other error (retryable).
func (c *Crawler) spiderAt(name, version string) (spider.Resolved, spider.Settings, error) {
	res, err := c.cfg.Spiders.Resolve(name, version)
	if errors.Is(err, spider.ErrUnknownSpider) || errors.Is(err, spider.ErrUnknownVersion) {
		return res, spider.Settings{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err != nil {
		return res, spider.Settings{}, fmt.Errorf("spider %q: %w", name, err)
	}
	if res.Spider == nil {
		s := res.Settings
		if s.Runtime == "" {
			s.Runtime = spider.RuntimeECS
		}
		return res, s.WithDefaults(), nil
	}
	return res, res.Spider.Settings().WithDefaults(), nil
}

// Cancel cancels a run: its waiting jobs at once, its running ones at their next heartbeat. The run
// finishes as cancelled once no job of it is left.
func (c *Crawler) Cancel(ctx context.Context, runID int64) error {
	tx, err := c.cfg.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("cancel run %d: %w", runID, err)
	}
	defer tx.Rollback(ctx)
	_, err = c.db.WithTx(tx).RequestRunCancel(ctx, runID)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := c.Get(ctx, runID); gerr != nil {
			return gerr
		}
		return fmt.Errorf("cancel run %d: %w", runID, ErrRunFinished)
	}
	if err != nil {
		return fmt.Errorf("cancel run %d: %w", runID, err)
	}
	if _, err := c.cfg.Queue.CancelParentTx(ctx, tx, runID); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("cancel run %d: %w", runID, err)
	}
	c.mu.Lock()
	delete(c.runs, runID)
	c.mu.Unlock()
	_, err = c.TryFinish(ctx, runID)
	return err
}

// failedSample is how many dead pages a finished run lists with their last error.
const failedSample = 10

// TryFinish finishes the run if it has no unfinished job left and returns whether this call did.
func (c *Crawler) TryFinish(ctx context.Context, runID int64) (bool, error) {
	busy, err := c.cfg.Queue.HasUnfinishedTx(ctx, c.cfg.Pool, runID)
	if err != nil || busy {
		return false, err
	}
	dead, sample, err := c.cfg.Queue.DeadChildrenTx(ctx, c.cfg.Pool, runID, KindPage, failedSample)
	if err != nil {
		return false, fmt.Errorf("finish run %d: %w", runID, err)
	}
	failed := make([]FailedPage, 0, len(sample))
	for _, d := range sample {
		var a pageArgs
		_ = json.Unmarshal(d.Args, &a) // a page job's args were written by pageJobs
		failed = append(failed, FailedPage{URL: a.URL, Error: d.LastError, Attempts: d.Attempts})
	}
	failedJSON, err := json.Marshal(failed)
	if err != nil {
		return false, fmt.Errorf("finish run %d: %w", runID, err)
	}
	stored := int64(-1)
	if c.cfg.CountItems != nil {
		if stored, err = c.cfg.CountItems(ctx, runID); err != nil {
			return false, fmt.Errorf("finish run %d: count items: %w", runID, err)
		}
	}
	if err := c.sweepGone(ctx, runID, dead); err != nil {
		return false, err
	}
	fin, err := c.db.FinishRun(ctx, dbsqlc.FinishRunParams{ID: runID, DeadPages: dead, FailedPages: string(failedJSON), StoredItems: stored})
	state := string(fin.State)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // finished already, by someone else
	}
	if err != nil {
		return false, fmt.Errorf("finish run %d: %w", runID, err)
	}
	if dead > 0 {
		c.log.Warn("run finished with dead pages", "run", runID, "state", state, "dead_pages", dead,
			"redrive", fmt.Sprintf("crawlq redrive --run %d", runID))
	} else {
		c.log.Info("run finished", "run", runID, "state", state)
	}
	if fin.DuplicateItems > 0 {
		c.duplicateItems(ctx, runID, fin.DuplicateItems)
	}
	c.forgetRun(runID)
	if c.cfg.OnFinish != nil {
		c.cfg.OnFinish(runID, state)
	}
	return true, nil
}

// Sweep finishes every live run that has no unfinished job: runs whose last job died or was
// rescued, or whose last finisher crashed before its check. It returns how many it finished.
func (c *Crawler) Sweep(ctx context.Context) (int, error) {
	n := 0
	after := int64(0)
	for {
		ids, err := c.db.SweepRuns(ctx, dbsqlc.SweepRunsParams{AfterID: after, MaxRuns: 500})
		if err != nil {
			return n, fmt.Errorf("sweep: %w", err)
		}
		for _, r := range ids {
			id := r.ID
			if r.CancelRequested {
				// A page that was running when the run was cancelled may have added links after
				// the cancel; cancel those too, until nothing of the run is left.
				if _, err := c.cfg.Queue.CancelParentTx(ctx, c.cfg.Pool, id); err != nil {
					return n, err
				}
			}
			done, err := c.TryFinish(ctx, id)
			if err != nil {
				return n, err
			}
			if done {
				n++
			}
			after = id
		}
		if len(ids) < 500 {
			return n, nil
		}
	}
}

// Maintain runs the queue's and the crawl's upkeep every interval until ctx ends: rescue expired
// leases, promote due delayed jobs, finish runs with nothing left. Every worker process may run
// it; each step is safe to run concurrently.
func (c *Crawler) Maintain(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := c.cfg.Queue.Rescue(ctx, 1000); err != nil && ctx.Err() == nil {
			c.log.Warn("rescue", "err", err)
		}
		if _, err := c.cfg.Queue.Promote(ctx, 1000); err != nil && ctx.Err() == nil {
			c.log.Warn("promote", "err", err)
		}
		if _, err := c.Sweep(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("sweep", "err", err)
		}
	}
}

// urlHash is the seen-set key of a canonical URL. []byte(u) would copy a URL longer than the 32
// bytes the compiler keeps on the stack to the heap, an allocation for every link a page finds
// or a walk marks (7% of a recrawl's allocations); a URL that fits buf is hashed from the stack.
func urlHash(u string) [16]byte {
	var buf [256]byte
	if len(u) <= len(buf) {
		return md5.Sum(append(buf[:0], u...))
	}
	return md5.Sum([]byte(u))
}

// Pool returns the crawler's database pool.
func (c *Crawler) Pool() *pgxpool.Pool { return c.cfg.Pool }
