// Package runner is the ECS runner loop: one Fargate task that claims jobs of the long-crawl
// queue (runs of spiders declared `runtime: ecs`, and command spiders) up to a per-task
// concurrency, keeps their leases alive, stops gracefully on SIGTERM (Fargate Spot's two-minute
// warning, scale-in) and recycles itself after a number of jobs or past a memory limit, so a
// fresh task replaces it. It registers as a worker of kind "ecs", which is how the dispatcher
// counts live runners (queue.Client.LiveWorkers).
//
// The runner assembles a node (internal/node) for the queue, the crawler and the item pipeline,
// and gives the crawler a command runner (internal/command). It runs its own queue.Worker rather
// than node.Run, because a recycling runner must return when its worker does, not when its
// context ends.
package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/artifact"
	"crawlq/internal/browser"
	"crawlq/internal/command"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/maintain"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
)

// MaxStopTimeout is the longest stopTimeout ECS allows a container: after SIGTERM the task gets
// this long before SIGKILL. A runner's StopGrace plus its command KillGrace must stay below it.
const MaxStopTimeout = 120 * time.Second

// Reason says why Run returned.
type Reason string

const (
	// ReasonStopped: the context ended (SIGTERM or SIGINT).
	ReasonStopped Reason = "stopped"
	// ReasonMaxJobs: the runner worked its MaxJobs jobs.
	ReasonMaxJobs Reason = "max-jobs"
	// ReasonMemory: the process's memory passed MaxMemory.
	ReasonMemory Reason = "memory"
)

// errMemory is the cause of the worker's context when the memory limit stops it.
var errMemory = errors.New("runner: memory limit reached")

// Config describes a runner. Pool is required.
type Config struct {
	Pool *pgxpool.Pool
	// Queue to work. Default "long".
	Queue string
	// Concurrency is the jobs run at once. Default 6.
	Concurrency int
	// Lease is each claim's lease; heartbeats extend it every Lease/3. Default 30s.
	Lease time.Duration
	// HeartbeatInterval is how often leases are extended, which is also how soon a running job
	// learns that its run was cancelled (and its command is stopped). Default Lease/3.
	HeartbeatInterval time.Duration
	// StopGrace is how long running jobs may finish after a stop signal before they are
	// cancelled and released. Default 100s; StopGrace + Command.KillGrace must be below
	// MaxStopTimeout.
	StopGrace time.Duration
	// MaxJobs recycles the runner after this many jobs. Default 0: no limit.
	MaxJobs int
	// MaxMemory recycles the runner when its resident memory (VmRSS) passes this many bytes.
	// Command spiders are separate processes and not counted: their own timeouts bound them.
	// Default 0: no limit.
	MaxMemory int64
	// MemoryInterval is how often memory is checked. Default 5s.
	MemoryInterval time.Duration
	// MaintainEvery is how often this runner maintains the queue and the crawl: rescues expired
	// leases, promotes due jobs and sweeps finished runs (safe alongside the dispatcher doing the same). Default 10s; negative: off.
	MaintainEvery time.Duration
	// Maintain, when set, runs maintenance passes (internal/maintain) while the runner runs; with
	// a dispatcher doing the same, the lease lets one pass run at a time. Default none.
	Maintain *maintain.Config
	// Events, when set, publishes run events while the runner runs: at once for each run it
	// starts or finishes, and by the loop's own interval for the rest (see node.Config.Events).
	// Default none (the dispatcher's tick publishes them).
	Events *events.Loop
	// SpiderDir holds extra spider specs. Default none (the embedded specs only).
	SpiderDir string
	// Spiders, when set, replaces the embedded specs and SpiderDir (tests, embedding).
	Spiders *spider.Registry
	// Command tunes command spiders; Pipeline, RecordItems, RecordStats, Store, SpiderVersion
	// and Logger are filled in, and RunLog (also where the crawl writes what happens to its pages)
	// defaults to the Postgres run log.
	Command command.Config
	// Pipeline tunes the item pipeline (see node.Config.Pipeline).
	Pipeline items.Config
	// Fetch is the fetcher's base config (see node.Config.Fetch). The zero value refuses every
	// address that is not public; crawlq runner --allow-loopback sets AllowLoopback.
	Fetch fetch.Config
	// Browser tunes the headless Chromium that renders the pages of spiders with render:
	// browser (started at the first such page; the machine's, or the image's, chromium). Nil:
	// the zero browser.Config, its defaults.
	Browser *browser.Config
	// ProxyEnv fills the ${CRAWLQ_PROXY_...} variables of spiders' proxies (node.Config.ProxyEnv).
	// Default none.
	ProxyEnv map[string]string
	// Artifacts keeps the screenshot and HTML of rendered pages that fail (crawl.Config.Artifacts).
	// Default: in Postgres (Pool).
	Artifacts *artifact.Store
	// Sink receives items. Default the Postgres sink.
	Sink items.Sink
	// Handlers adds job kinds to the runner's mux beside the crawl's (tests, embedding).
	Handlers map[string]queue.Handler
	// WorkerID names the runner in leases and the worker registry. Default host-pid-random.
	WorkerID string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Queue == "" {
		c.Queue = "long"
	}
	if c.Browser == nil {
		c.Browser = &browser.Config{}
	}
	if c.Concurrency == 0 {
		c.Concurrency = 6
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.StopGrace == 0 {
		c.StopGrace = 100 * time.Second
	}
	if c.MemoryInterval == 0 {
		c.MemoryInterval = 5 * time.Second
	}
	if c.MaintainEvery == 0 {
		c.MaintainEvery = 10 * time.Second
	}
	if c.Command.KillGrace == 0 {
		c.Command.KillGrace = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	if c.Pool == nil {
		return errors.New("runner config: Pool is required")
	}
	if err := queue.ValidateQueue(c.Queue); err != nil {
		return fmt.Errorf("runner config: Queue: %w", err)
	}
	switch {
	case c.Concurrency < 1 || c.Concurrency > 1000:
		return fmt.Errorf("runner config: Concurrency %d is not in 1..1000", c.Concurrency)
	case c.Lease < time.Second:
		return fmt.Errorf("runner config: Lease %s is below 1s", c.Lease)
	case c.StopGrace < 0:
		return fmt.Errorf("runner config: StopGrace %s is negative", c.StopGrace)
	case c.Command.KillGrace < 0:
		return fmt.Errorf("runner config: Command.KillGrace %s is negative", c.Command.KillGrace)
	case c.StopGrace+c.Command.KillGrace >= MaxStopTimeout:
		return fmt.Errorf("runner config: StopGrace %s plus Command.KillGrace %s must be below the ECS stopTimeout limit %s",
			c.StopGrace, c.Command.KillGrace, MaxStopTimeout)
	case c.MaxJobs < 0:
		return fmt.Errorf("runner config: MaxJobs %d is negative", c.MaxJobs)
	case c.MaxMemory < 0:
		return fmt.Errorf("runner config: MaxMemory %d is negative", c.MaxMemory)
	case c.MemoryInterval < 0:
		return fmt.Errorf("runner config: MemoryInterval %s is negative", c.MemoryInterval)
	}
	return nil
}

// Runner is an assembled ECS runner.
type Runner struct {
	cfg  Config
	node *node.Node
	log  *slog.Logger
}

// New assembles a runner; Run starts it.
func New(cfg Config) (*Runner, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n, err := node.New(node.Config{Pool: cfg.Pool, Spiders: cfg.Spiders, SpiderDir: cfg.SpiderDir, Queues: []string{cfg.Queue},
		MaintainEvery: -1, Maintain: cfg.Maintain, Sink: cfg.Sink, Pipeline: cfg.Pipeline, Fetch: cfg.Fetch, Browser: cfg.Browser, ProxyEnv: cfg.ProxyEnv, Events: cfg.Events, Logger: cfg.Logger,
		Artifacts: cfg.Artifacts, RunLog: cfg.Command.RunLog})
	if err != nil {
		return nil, fmt.Errorf("assemble runner: %w", err)
	}
	cc := cfg.Command
	cc.Pipeline = n.Pipeline
	cc.RecordItems = n.Crawler.RecordItems
	cc.RecordStats = n.Crawler.RecordCommandStats
	cc.Store = n.Store
	cc.SpiderVersion = n.Spiders.Version
	if cc.RunLog == nil {
		cc.RunLog = runlog.Postgres{Pool: cfg.Pool}
	}
	if cc.Logger == nil {
		cc.Logger = cfg.Logger
	}
	cmd, err := command.New(cc)
	if err != nil {
		n.Pipeline.Close(context.Background())
		return nil, fmt.Errorf("assemble runner: %w", err)
	}
	n.Crawler.SetCommandRunner(cmd.Run)
	for kind, h := range cfg.Handlers {
		n.Mux.Handle(kind, h)
	}
	return &Runner{cfg: cfg, node: n, log: cfg.Logger}, nil
}

// Node returns the runner's node (its queue client, crawler and pipeline).
func (r *Runner) Node() *node.Node { return r.node }

// Run works the queue until ctx ends (ReasonStopped), MaxJobs jobs are done (ReasonMaxJobs) or
// memory passes MaxMemory (ReasonMemory). In every case it stops claiming, lets running jobs
// finish within StopGrace, cancels and releases the rest (their attempt not counted), drains the
// item pipeline and returns. A non-nil error means the stop was not clean.
func (r *Runner) Run(ctx context.Context) (Reason, error) {
	wctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	w, err := queue.NewWorker(r.node.Queue, queue.WorkerConfig{
		Queue: r.cfg.Queue, ID: r.cfg.WorkerID, Kind: "ecs", Concurrency: r.cfg.Concurrency, Lease: r.cfg.Lease,
		HeartbeatInterval: r.cfg.HeartbeatInterval, StopGrace: r.cfg.StopGrace, MaxJobs: r.cfg.MaxJobs, Logger: r.log,
	}, r.node.Mux.Work)
	if err != nil {
		return "", fmt.Errorf("start runner: %w", err)
	}
	r.log.Info("runner started", "worker", w.ID(), "queue", r.cfg.Queue, "concurrency", r.cfg.Concurrency,
		"max_jobs", r.cfg.MaxJobs, "max_memory", r.cfg.MaxMemory, "stop_grace", r.cfg.StopGrace)

	bg, stopBG := context.WithCancel(wctx)
	var wg sync.WaitGroup
	if r.cfg.MaintainEvery > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); r.node.Crawler.Maintain(bg, r.cfg.MaintainEvery) }()
	}
	if m := r.node.Maintainer; m != nil {
		m.Start(bg)
		defer m.Stop()
	}
	if ev := r.cfg.Events; ev != nil {
		ev.Start(bg)
		defer ev.Stop() // last, after the pipeline: the runs finished last are published too
	}
	if r.cfg.MaxMemory > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); r.watchMemory(bg, stop) }()
	}
	werr := w.Run(wctx)
	stopBG()
	wg.Wait()
	if err := r.releaseLeftovers(context.WithoutCancel(ctx), w.ID()); err != nil {
		werr = errors.Join(werr, err)
	}

	reason := ReasonStopped
	switch {
	case errors.Is(context.Cause(wctx), errMemory):
		reason = ReasonMemory
	case ctx.Err() == nil && r.cfg.MaxJobs > 0:
		reason = ReasonMaxJobs
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	perr := r.node.Pipeline.Close(cctx)
	st := w.Stats()
	r.log.Info("runner stopped", "reason", reason, "claimed", st.Claimed, "succeeded", st.Succeeded, "failed", st.Failed,
		"snoozed", st.Snoozed, "released", st.Released, "lost", st.Lost)
	if err := errors.Join(werr, perr); err != nil {
		return reason, fmt.Errorf("stop runner: %w", err)
	}
	return reason, nil
}

// releaseLeftovers hands back jobs still running under this runner's id after its worker
// stopped. There should be none, but a claim whose statement committed while the stop cancelled
// it leaves jobs the worker never saw; without this they would wait out their lease and then
// lose an attempt to the rescue, which is what a graceful stop promises not to do.
func (r *Runner) releaseLeftovers(ctx context.Context, workerID string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	jobs, err := r.node.Queue.List(ctx, queue.ListParams{Queue: r.cfg.Queue, States: []queue.State{queue.StateRunning}, Limit: 10000})
	if err != nil {
		return fmt.Errorf("list leftover jobs: %w", err)
	}
	var leases []queue.Lease
	for _, j := range jobs {
		if j.Worker == workerID {
			leases = append(leases, j.Lease())
		}
	}
	if len(leases) == 0 {
		return nil
	}
	lost, err := r.node.Queue.Release(ctx, leases)
	if err != nil {
		return fmt.Errorf("release leftover jobs: %w", err)
	}
	r.log.Warn("released jobs claimed as the runner stopped", "released", len(leases)-len(lost))
	return nil
}

// watchMemory stops the worker once resident memory passes the limit.
func (r *Runner) watchMemory(ctx context.Context, stop context.CancelCauseFunc) {
	t := time.NewTicker(r.cfg.MemoryInterval)
	defer t.Stop()
	for {
		rss, err := RSS()
		if err != nil {
			r.log.Warn("read memory use", "err", err)
		} else if rss > r.cfg.MaxMemory {
			r.log.Info("memory limit reached; recycling", "rss", rss, "limit", r.cfg.MaxMemory)
			stop(errMemory)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RSS returns this process's resident memory in bytes: VmRSS from /proc/self/status, or where
// there is no /proc, the Go runtime's total mapped memory less what it released to the OS.
func RSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := sc.Bytes()
			if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
				f := bytes.Fields(v)
				if len(f) != 2 || string(f[1]) != "kB" {
					return 0, fmt.Errorf("read memory use: unexpected VmRSS line %q", line)
				}
				kb, err := strconv.ParseInt(string(f[0]), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("read memory use: %w", err)
				}
				return kb << 10, nil
			}
		}
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0, errors.New("read memory use: no /proc/self/status and no runtime memory metrics")
	}
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64()), nil
}
