// Package node assembles one crawlq worker process: the queue client, the spider registry, the
// item pipeline and its sink, the crawler, a set of queue workers, the maintenance loop and, when
// given one, the loop that publishes run events as this process changes runs. The CLI's
// worker and demo, the Lambda worker and the ECS runner all start workers through it, so they
// behave the same.
package node

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/artifact"
	"crawlq/internal/browser"
	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/maintain"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
	"crawlq/spiders"
)

// Config describes a node. Pool is required; everything else has a default.
type Config struct {
	Pool *pgxpool.Pool
	// Spiders, when nil, is the embedded specs plus those in SpiderDir.
	Spiders *spider.Registry
	// SpiderDir holds extra spider specs (*.yaml, *.yml, *.json). Default none.
	SpiderDir string
	// Store holds pushed spiders. Default a Postgres store on Pool; the registry resolves names
	// from it first (see spider.Registry.SetSource), then the in-process specs. (The api pushes
	// the built-in specs to it as version 1 of every name it never held.)
	Store *spiderstore.Store
	// Queues to work. Default ["crawl"].
	Queues []string
	// Workers per queue. Default 1.
	Workers int
	// Worker is the template of every worker's config (Queue is filled in per queue). Its
	// HoldAhead defaults here to DefaultHoldAhead (negative: none), so that the pages a page finds
	// wait in this process, already leased, rather than each being claimed (see
	// queue.WorkerConfig.HoldAhead).
	Worker queue.WorkerConfig
	// MaintainEvery is how often this node maintains the queue and the crawl: rescues expired
	// leases, promotes due jobs and sweeps finished runs (crawl.Crawler.Maintain). Default 1s;
	// negative turns it off (when a dispatcher does it).
	MaintainEvery time.Duration
	// Maintain, when set, builds Node.Maintainer (internal/maintain), which Run starts: retention
	// of finished jobs and of what finished runs leave behind. Default none (a dispatcher's tick
	// runs it).
	Maintain *maintain.Config
	// Sink receives items. Default the Postgres sink (crawlq_item).
	Sink items.Sink
	// Pipeline tunes the item pipeline. FlushInterval defaults to 2ms here: page jobs wait for
	// their items, so a long flush timer would cap the crawl rate.
	Pipeline items.Config
	// Fetch tunes the fetcher.
	Fetch fetch.Config
	// Browser, when set, lets this node render the pages of spiders with render: browser
	// (crawl.Config.Browser): the runners set it.
	Browser *browser.Config
	// ProxyEnv fills the ${CRAWLQ_PROXY_...} variables of spiders' proxies
	// (crawl.Config.ProxyEnv). Default none.
	ProxyEnv map[string]string
	// ProxyRest is the first rest of a spider's proxy that failed or was banned
	// (crawl.Config.ProxyRest). Default 10s.
	ProxyRest time.Duration
	// ItemTimeout bounds a page's wait for its items (crawl.Config.ItemTimeout). Default 60s.
	ItemTimeout time.Duration
	// Queue tunes the queue client (retry backoff).
	Queue queue.Config
	// OnFinish is called when this node finishes a run.
	OnFinish func(runID int64, state string)
	// Events, when set, publishes run events: Run starts it and stops it as it returns (its last
	// publish included), and each run this node starts or finishes pokes it, so the run's events
	// go out at once instead of at the next tick. Default none.
	Events *events.Loop
	// RunLog receives what happens to the pages of the runs this node works (crawl.Config.RunLog).
	// Default: the Postgres run log of Pool.
	RunLog runlog.Store
	// Artifacts keeps failed rendered pages' screenshots and HTML (crawl.Config.Artifacts).
	// Default: in Postgres (Pool).
	Artifacts *artifact.Store
	// Clock, when set, is the one clock of the node's services: the queue client, the crawler
	// and the maintainer take it unless their own config names one (a test's stopped clock).
	// Default none: the queue and the crawler then take the time of the database in each
	// statement, one clock for every process, and the maintainer the wall clock.
	Clock  clock.Clock
	Logger *slog.Logger
}

// DefaultHoldAhead is the most jobs a worker of a node holds beyond its idle handlers (see
// Config.Worker): a listing page of the wide bench site finds 2,000 pages, and a job waiting in
// memory costs ~1 KB.
const DefaultHoldAhead = 10000

// Node is an assembled worker process.
type Node struct {
	cfg      Config
	Queue    *queue.Client
	Spiders  *spider.Registry
	Store    *spiderstore.Store
	Pipeline *items.Pipeline
	Crawler  *crawl.Crawler
	Mux      *queue.Mux
	// Maintainer is the maintenance service when Config.Maintain is set, else nil.
	Maintainer *maintain.Service

	mu      sync.Mutex
	workers []*queue.Worker
}

// LoadSpiders returns a registry of the embedded specs plus those in dir (if dir is not empty).
// A spec in dir may not reuse an embedded spider's name.
func LoadSpiders(dir string) (*spider.Registry, error) {
	reg := spider.NewRegistry()
	if err := reg.LoadFS(spiders.FS); err != nil {
		return nil, err
	}
	if dir != "" {
		if err := reg.LoadDir(dir); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// New assembles a node; Run starts it.
func New(cfg Config) (*Node, error) {
	if cfg.Pool == nil {
		return nil, errors.New("node: Pool is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock != nil && cfg.Queue.Clock == nil {
		cfg.Queue.Clock = cfg.Clock
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = []string{spider.DefaultQueue}
	}
	for _, q := range cfg.Queues {
		if err := queue.ValidateQueue(q); err != nil {
			return nil, err
		}
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	switch {
	case cfg.Worker.HoldAhead == 0:
		cfg.Worker.HoldAhead = DefaultHoldAhead
	case cfg.Worker.HoldAhead < 0:
		cfg.Worker.HoldAhead = 0
	}
	if cfg.MaintainEvery == 0 {
		cfg.MaintainEvery = time.Second
	}
	if cfg.Pipeline.FlushInterval == 0 {
		cfg.Pipeline.FlushInterval = 2 * time.Millisecond
	}
	reg := cfg.Spiders
	if reg == nil {
		var err error
		if reg, err = LoadSpiders(cfg.SpiderDir); err != nil {
			return nil, err
		}
	}
	store := cfg.Store
	if store == nil {
		var err error
		if store, err = spiderstore.New(spiderstore.Config{Pool: cfg.Pool}); err != nil {
			return nil, err
		}
	}
	if !reg.HasSource() {
		reg.SetSource(spider.SourceConfig{Source: store, Logger: cfg.Logger})
	}
	sink := cfg.Sink
	var txSink items.TxSink
	if sink == nil {
		sink = items.NewPostgresSink(cfg.Pool)
		// The default sink is the crawl's own database: items commit with their pages.
		txSink = sink.(items.TxSink)
	}
	pl, err := items.New(sink, cfg.Pipeline, cfg.Logger)
	if err != nil {
		return nil, err
	}
	qc := queue.New(cfg.Pool, cfg.Queue)
	n := &Node{cfg: cfg, Queue: qc, Spiders: reg, Store: store, Pipeline: pl, Mux: queue.NewMux()}
	var countItems func(context.Context, int64) (int64, error)
	if c, ok := sink.(items.Counter); ok {
		countItems = c.CountRun // a run's items stat is what its sink holds
	}
	var duplicateKey func(context.Context, int64) (string, []string, error)
	if d, ok := sink.(items.DuplicateFinder); ok {
		duplicateKey = d.DuplicateKey
	}
	cr, err := crawl.New(crawl.Config{Pool: cfg.Pool, Queue: qc, Spiders: reg, Pipeline: pl, TxSink: txSink, Fetch: cfg.Fetch, Browser: cfg.Browser,
		OnFinish: n.finished, OnStart: n.started, OnEnqueue: n.poke, Reserve: n.reserve, ItemTimeout: cfg.ItemTimeout, Logger: cfg.Logger,
		CountItems: countItems, DuplicateKey: duplicateKey, RunLog: cfg.RunLog, Artifacts: cfg.Artifacts, ProxyEnv: cfg.ProxyEnv, ProxyRest: cfg.ProxyRest, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	n.Crawler = cr
	if cfg.Maintain != nil {
		mc := *cfg.Maintain
		if mc.Logger == nil {
			mc.Logger = cfg.Logger
		}
		if mc.Clock == nil && cfg.Clock != nil {
			mc.Clock = cfg.Clock
		}
		if n.Maintainer, err = maintain.New(qc, cr, mc); err != nil {
			return nil, err
		}
	}
	n.Mux.Handle("noop", queue.Noop)
	cr.Register(n.Mux)
	return n, nil
}

// Run works the node's queues until ctx ends, then stops the workers (see queue.Worker.Run),
// drains the item pipeline and returns.
func (n *Node) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, q := range n.cfg.Queues {
		for range n.cfg.Workers {
			wc := n.cfg.Worker
			wc.Queue = q
			wc.ID = ""
			if wc.Logger == nil {
				wc.Logger = n.cfg.Logger
			}
			w, err := queue.NewWorker(n.Queue, wc, n.Mux.Work)
			if err != nil {
				return err
			}
			n.mu.Lock()
			n.workers = append(n.workers, w)
			n.mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); w.Run(ctx) }()
		}
	}
	if n.Maintainer != nil {
		n.Maintainer.Start(ctx)
		defer n.Maintainer.Stop()
	}
	if ev := n.cfg.Events; ev != nil {
		ev.Start(ctx)
		// After the workers and the pipeline: the runs finished last are published too.
		defer ev.Stop()
	}
	maintainDone := make(chan struct{})
	go func() {
		defer close(maintainDone)
		if n.cfg.MaintainEvery > 0 {
			n.Crawler.Maintain(ctx, n.cfg.MaintainEvery)
		}
	}()
	wg.Wait()
	<-maintainDone
	n.Crawler.Close()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return n.Pipeline.Close(cctx)
}

// started and finished announce this node's run state changes to the events loop (and
// finished to Config.OnFinish).
func (n *Node) started(runID int64) {
	if n.cfg.Events != nil {
		n.cfg.Events.Poke(runID)
	}
}

func (n *Node) finished(runID int64, state string) {
	if n.cfg.Events != nil {
		n.cfg.Events.Poke(runID)
	}
	if n.cfg.OnFinish != nil {
		n.cfg.OnFinish(runID, state)
	}
}

// poke wakes this node's idle workers of queue q.
func (n *Node) poke(q string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range n.workers {
		if w.Queue() == q {
			w.Poke()
		}
	}
}

// reserve sets aside room for up to k jobs of queue q in this node's workers (see
// queue.Worker.Reserve): all in the worker with the most idle handlers when they can start them
// at once, else spread over the workers in proportion to their room, so that no worker is left
// holding a longer queue of found work than the others while they idle.
func (n *Node) reserve(q string, k int) []*queue.Reservation {
	n.mu.Lock()
	var ws []*queue.Worker
	for _, w := range n.workers {
		if w.Queue() == q {
			ws = append(ws, w)
		}
	}
	n.mu.Unlock()
	var best *queue.Worker
	idle, total := 0, 0
	rooms := make([]int, len(ws))
	for i, w := range ws {
		rooms[i] = w.Room()
		total += rooms[i]
		if d := w.Idle(); d > idle {
			best, idle = w, d
		}
	}
	if best != nil && k <= idle {
		if r := best.Reserve(k); r != nil {
			return []*queue.Reservation{r}
		}
		return nil
	}
	var out []*queue.Reservation
	for i, w := range ws {
		if share := (k*rooms[i] + total - 1) / max(total, 1); share > 0 {
			if r := w.Reserve(share); r != nil {
				out = append(out, r)
			}
		}
	}
	return out
}

// Stats sums the counters of the node's workers.
func (n *Node) Stats() queue.WorkerStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	var s queue.WorkerStats
	for _, w := range n.workers {
		ws := w.Stats()
		s.Claimed += ws.Claimed
		s.Succeeded += ws.Succeeded
		s.Failed += ws.Failed
		s.Snoozed += ws.Snoozed
		s.Released += ws.Released
		s.Lost += ws.Lost
		s.Deferred += ws.Deferred
		s.Cancelled += ws.Cancelled
	}
	return s
}
