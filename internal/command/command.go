// Package command runs command spiders: an external program (scrapy and friends) started as a
// child process for one run. It owns the child's life: its environment, its process group, the
// streaming of its stdout/stderr to the logs, the JSON Lines items it writes, and the mapping of
// how it ended to the run job's fate. Runner.Run has the signature of crawl.CommandRunner.
//
// # The contract with the command
//
// The command runs in its own process group, with stdin from /dev/null and this environment
// (besides Config.Env, the runner's variables it hands on, and the spec's Env):
//
//	CRAWLQ_RUN_ID      the run's id
//	CRAWLQ_SPIDER      the spider's name
//	CRAWLQ_ARGS        the run's arguments, a JSON object of strings
//	CRAWLQ_SETTINGS    the spider's settings with the run's overrides applied, a JSON object
//	CRAWLQ_ITEMS_FD    3: the write end of a pipe for items
//	CRAWLQ_ITEMS_FILE  /dev/fd/3, the same pipe as a path (e.g. scrapy -o /dev/fd/3:jsonlines)
//
// Items are JSON Lines: one JSON object per line. An item's key (unique within the run; the
// sink keeps the first item of each key) is its "key" field when that is a non-empty string or a
// number, else "line:" + the first 32 hex digits of the SHA-256 of the line, so re-running a
// command that emits the same lines does not duplicate items. A key longer than
// items.MaxKeyLen is replaced by "key:" + the SHA-256 of it. The "url" field, when a string, is
// the item's URL. Lines that are not JSON objects, or longer than Config.MaxItemBytes, are
// skipped and logged (they do not fail the run). Reading is bounded: when the item pipeline
// pushes back, this package stops reading the pipe and the command blocks in its write.
//
// # How it ends
//
//   - exit status 0: the run job succeeds (after every item is durably written).
//   - exit status 75 (EX_TEMPFAIL): a failed attempt, retried by the queue with backoff.
//   - any other exit status: the run fails now (queue.Permanent): a command spider is a whole
//     crawl, and re-running it from scratch after a deterministic failure would waste hours;
//     redrive the job to try again. Commands that know a failure is transient exit 75.
//   - killed by a signal nobody here sent (the OOM killer): a failed attempt, retried.
//   - its timeout passed (the spec's Timeout, else Config.Timeout): the whole process group
//     gets SIGTERM, then SIGKILL after Config.KillGrace; the run fails now (ErrTimeout).
//   - ctx ended (the job was asked to cancel, the worker is stopping, the lease was lost): the
//     same stop; the error wraps ErrStopped and context.Cause(ctx), and the queue worker
//     cancels or releases the job accordingly. A cancel sends the signal it asked for
//     (spiderstore.CancelRequest, Scrapyd's cancel.json signal=) instead of SIGTERM.
//
// A Scrapy run is stopped as Scrapyd stops it: SIGINT (or a cancel's signal), on which Scrapy
// shuts down gracefully (it finishes the requests in flight, closes its feed and writes its
// stats), and each further cancel sends the signal again, on which Scrapy forces its shutdown.
// A cancel or a timeout gives it Config.ShutdownGrace before the SIGKILL, a last resort that the
// run log reports; a stopping worker gives it Config.KillGrace (the ECS stop timeout bounds it).
// Every item the command wrote before it exited is written to the sink and counted.
//
// When the command's main process exits, whatever it left running in its process group is
// killed: a run leaves no orphan processes. On Linux, Pdeathsig also kills the child if the
// runner itself dies without a chance to clean up (procattr_linux.go; other systems build
// without it).
//
// # Where each step lives
//
// Run (this file) builds the command line and runs the steps in order: startProcess
// (process.go: pipes, process group), streamLogs (output.go: stdout and stderr to the logs),
// startItems and awaitItems (items.go: the item pipe into the pipeline), supervise and reap
// (supervise.go: timeout, cancellation, SIGTERM then SIGKILL after the grace, orphans) and
// finish (finish.go: how the command ended, as the job's fate).
//
// # Scrapy
//
// A command `scrapy crawl NAME` (IsScrapy) is run as Scrapy (scrapy.go), as Scrapyd runs it:
// the runner builds the command line (the run's args as -a, and -a _job=JOB, crawlq settings and
// the run's Scrapy settings as -s, a JSON Lines feed to fd 3), sets Scrapyd's environment
// (SCRAPY_PROJECT, SCRAPY_SPIDER, SCRAPY_JOB and their SCRAPYD_ forms), puts an uploaded
// project's egg and a stats hook on PYTHONPATH (crawlq_scrapy.py, chained to the project's own
// STATS_CLASS), reads Scrapy's final stats into the run's stats, and fails a run whose callbacks
// raised or that logged errors (ErrSpiderErrors), keeping its items. Every command's output also
// goes to the run log (Config.RunLog) as it was written, with crawlq's own lines about the run
// in Scrapy's log format ("2026-11-24 16:19:36 [crawlq] INFO: ...").
package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/items"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
)

// ExitTempFail is the exit status (sysexits EX_TEMPFAIL) by which a command asks for a retry.
const ExitTempFail = 75

// Errors callers branch on.
var (
	// ErrTimeout: the command ran past its timeout and was killed.
	ErrTimeout = errors.New("command timed out")
	// ErrExitStatus: the command exited with a non-zero status.
	ErrExitStatus = errors.New("command failed")
	// ErrStopped: the command was killed because its context ended (see context.Cause).
	ErrStopped = errors.New("command stopped")
	// ErrInvalid: the run or spec cannot be run at all (nothing was started).
	ErrInvalid = errors.New("command: invalid input")
)

// DefaultInheritEnv are the variables of the runner's environment a command sees (Inherited).
// Deliberately few: the runner's environment holds the database URL and cloud credentials,
// which a spider's code has no business reading; give a command what it needs in its spec's Env.
var DefaultInheritEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR"}

// Inherited returns the variables named that lookup finds (os.LookupEnv, at the process's edge),
// for Config.Env.
func Inherited(lookup func(string) (string, bool), names []string) map[string]string {
	env := map[string]string{}
	for _, k := range names {
		if v, ok := lookup(k); ok {
			env[k] = v
		}
	}
	return env
}

// Config tunes a Runner.
type Config struct {
	// Pipeline receives the items. Required.
	Pipeline *items.Pipeline
	// RecordItems adds written items to the run's stats (crawl.Crawler.RecordItems). Default none.
	RecordItems func(ctx context.Context, runID int64, n int, bytes int64) error
	// Timeout applies to commands whose spec sets none. Default 12h.
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL to the process group, and how long
	// output still open after the command exited is read. Default 10s.
	KillGrace time.Duration
	// ShutdownGrace is how long a Scrapy run stopped by a cancel or its timeout may take to shut
	// down after its signal (Scrapy finishes the requests in flight, up to its DOWNLOAD_TIMEOUT,
	// 180s by default) before it is killed, and how long the items it wrote then get to reach the
	// sink. Default 10m.
	ShutdownGrace time.Duration
	// CancelPoll is how often a cancelled run's record (Store) is read, while its command shuts
	// down, for a repeated cancel, whose signal is sent again. Default 1s.
	CancelPoll time.Duration
	// MaxItemBytes bounds one JSON Lines item; longer lines are skipped. Default 1 MiB.
	MaxItemBytes int
	// MaxLogLine bounds one logged line of stdout/stderr; the rest of a longer line is dropped
	// and the record marked truncated. Default 4096.
	MaxLogLine int
	// BatchSize is the most items per pipeline write. Default 200.
	BatchSize int
	// FlushInterval is how long a partial batch waits for more items. Default 100ms.
	FlushInterval time.Duration
	// Env are the variables of the runner's environment a command sees, read where the process
	// starts (Inherited(os.LookupEnv, DefaultInheritEnv)); a spec's Env and the variables above go
	// over them, and a Scrapy run's PYTHONPATH, when Env has one, goes after its egg's. Default
	// none.
	Env map[string]string
	// RecordStats adds a Scrapy run's pages and errors by kind to the run's stats
	// (crawl.Crawler.RecordCommandStats). Default none.
	RecordStats func(ctx context.Context, runID int64, pages int64, errorsByKind map[string]int64) error
	// Store gives the runs of stored spiders their record (pinned version, Scrapy settings) and
	// the eggs of uploaded projects, and records the version and pid a run ran with. Default
	// none: only spiders whose code is in the runner image run.
	Store SpiderStore
	// SpiderVersion names the stored version a spider resolves to, to record it. Default none.
	SpiderVersion func(name string) string
	// RunLog keeps each run's output lines (besides the process log). Default none.
	RunLog runlog.Store
	// Scrapy is the scrapy executable for Scrapy spiders. Default the command's own argv[0].
	Scrapy string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock stamps crawlq's own lines in a run's log. Default the wall clock.
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	c.Clock = clock.Or(c.Clock)
	if c.Timeout == 0 {
		c.Timeout = 12 * time.Hour
	}
	if c.KillGrace == 0 {
		c.KillGrace = 10 * time.Second
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 10 * time.Minute
	}
	if c.CancelPoll == 0 {
		c.CancelPoll = time.Second
	}
	if c.MaxItemBytes == 0 {
		c.MaxItemBytes = 1 << 20
	}
	if c.MaxLogLine == 0 {
		c.MaxLogLine = 4096
	}
	if c.BatchSize == 0 {
		c.BatchSize = 200
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = 100 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	switch {
	case c.Pipeline == nil:
		return errors.New("command config: Pipeline is required")
	case c.Timeout < 0:
		return fmt.Errorf("command config: Timeout %s is negative", c.Timeout)
	case c.KillGrace < 0:
		return fmt.Errorf("command config: KillGrace %s is negative", c.KillGrace)
	case c.ShutdownGrace < 0:
		return fmt.Errorf("command config: ShutdownGrace %s is negative", c.ShutdownGrace)
	case c.CancelPoll < 0:
		return fmt.Errorf("command config: CancelPoll %s is negative", c.CancelPoll)
	case c.MaxItemBytes < 64:
		return fmt.Errorf("command config: MaxItemBytes %d is below 64", c.MaxItemBytes)
	case c.MaxLogLine < 16:
		return fmt.Errorf("command config: MaxLogLine %d is below 16", c.MaxLogLine)
	case c.BatchSize < 1:
		return fmt.Errorf("command config: BatchSize %d is below 1", c.BatchSize)
	case c.FlushInterval < 0:
		return fmt.Errorf("command config: FlushInterval %s is negative", c.FlushInterval)
	}
	return nil
}

// Runner runs command spiders. It is safe for concurrent use: each Run is independent.
type Runner struct {
	cfg Config
	log *slog.Logger
}

// New returns a Runner.
func New(cfg Config) (*Runner, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, log: cfg.Logger}, nil
}

// Run runs spec for run and returns when the command has exited and its items are written (or
// the attempt is given up); see the package doc for what its error means.
func (r *Runner) Run(ctx context.Context, run *crawl.Run, spec spider.CommandSpec, settings spider.Settings) error {
	c, err := r.commandLine(ctx, run, spec, settings)
	if err != nil {
		return err
	}
	if c.scrapy != nil {
		defer os.RemoveAll(c.scrapy.dir)
	}
	runLog := r.startLog(run.ID)
	defer runLog.close()
	p, err := startProcess(c.argv, spec.Dir, c.env)
	if err != nil {
		return err
	}
	defer p.closePipes()
	log := r.log.With("run", run.ID, "spider", run.Spider)
	log.Info("command started", "argv", c.argv, "pid", p.pid, "timeout", c.timeout)
	took := clock.StartStopwatch()
	runLog.info("started %q (pid %d, timeout %s)", c.argv, p.pid, c.timeout)
	r.recordStart(ctx, run, c.scrapy, p.pid, log)

	var logs sync.WaitGroup
	var stdoutLines atomic.Int64
	r.streamLogs(&logs, p, log, runLog, &stdoutLines)
	ir := r.startItems(ctx, run, p.items, log)
	end := r.supervise(ctx, run.ID, p, c, ir.done, log, runLog)
	reap(p, log)
	ir.exited.Store(true)
	p.stopReadingBy(clock.Deadline(r.cfg.KillGrace)) // but read what is already in the pipes
	logs.Wait()
	r.awaitItems(ctx, ir, &end)

	log = log.With("items", end.items.n, "skipped_lines", end.items.skipped, "elapsed", took.Elapsed().Round(time.Millisecond))
	err = r.finish(ctx, run, log, runLog, c.scrapy, end)
	if hint := itemsHint(int64(end.items.n), stdoutLines.Load()); hint != "" && c.scrapy == nil {
		log.Warn(hint)
		runLog.warn("%s", hint)
	}
	switch {
	case err == nil:
		runLog.info("command succeeded: %d items", end.items.n)
	case errors.Is(err, ErrStopped):
		runLog.warn("run attempt ended: %d items written; %v", end.items.n, err)
	default:
		runLog.error("run attempt ended: %d items written; %v", end.items.n, err)
	}
	return err
}

// commandLine is what a run executes.
type commandLine struct {
	argv, env []string
	timeout   time.Duration
	scrapy    *scrapyRun // a Scrapy run's egg, hook and stats file; nil for other commands
}

// commandLine builds the command line, environment and timeout of a run, preparing a Scrapy
// run's files. Its errors are the run's: an invalid spec fails it for good.
func (r *Runner) commandLine(ctx context.Context, run *crawl.Run, spec spider.CommandSpec, settings spider.Settings) (commandLine, error) {
	if run == nil || run.ID <= 0 {
		return commandLine{}, queue.Permanent(fmt.Errorf("%w: no run", ErrInvalid))
	}
	c := commandLine{argv: spec.Argv(run.Spider), timeout: spec.Timeout}
	if len(c.argv) == 0 || c.argv[0] == "" {
		return commandLine{}, queue.Permanent(fmt.Errorf("%w: spider %q has an empty command", ErrInvalid, run.Spider))
	}
	env, err := r.env(run, spec, settings)
	if err != nil {
		return commandLine{}, queue.Permanent(err)
	}
	c.env = env
	if c.timeout <= 0 {
		c.timeout = r.cfg.Timeout
	}
	if !IsScrapy(c.argv) {
		return c, nil
	}
	sr, err := r.prepareScrapy(ctx, run, c.argv, spec, settings)
	if errors.Is(err, ErrInvalid) {
		return commandLine{}, queue.Permanent(err)
	} else if err != nil {
		return commandLine{}, err
	}
	c.scrapy, c.argv = sr, sr.argv
	// Before CRAWLQ_*, after the spec's Env: crawlq sets where the egg and hook are.
	n := len(env) - 6
	c.env = append(append(append([]string(nil), env[:n]...), sr.env...), env[n:]...)
	return c, nil
}

// recordStart records the run's version and command pid in the spider store, for listjobs.
// A failure is logged: the run goes on without it.
func (r *Runner) recordStart(ctx context.Context, run *crawl.Run, sr *scrapyRun, pid int, log *slog.Logger) {
	if r.cfg.Store == nil {
		return
	}
	version, project := "", ""
	if sr != nil && sr.project != "" {
		version, project = sr.version, sr.project
	} else if r.cfg.SpiderVersion != nil {
		version = r.cfg.SpiderVersion(run.Spider)
	}
	if _, err := r.cfg.Store.StartRun(ctx, run.ID, project, run.Spider, version, pid); err != nil {
		log.Warn("record the run's version and pid", "err", err)
	}
}

// env builds the command's environment.
func (r *Runner) env(run *crawl.Run, spec spider.CommandSpec, settings spider.Settings) ([]string, error) {
	args := run.Args
	if args == nil {
		args = map[string]string{}
	}
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%w: encode args: %w", ErrInvalid, err)
	}
	setJSON, err := json.Marshal(effectiveSettings(settings))
	if err != nil {
		return nil, fmt.Errorf("%w: encode settings: %w", ErrInvalid, err)
	}
	var env []string
	for _, k := range slices.Sorted(maps.Keys(r.cfg.Env)) {
		env = append(env, k+"="+r.cfg.Env[k])
	}
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	// Last, so a spec cannot shadow them (exec keeps the last of duplicate keys).
	env = append(env,
		"CRAWLQ_RUN_ID="+strconv.FormatInt(run.ID, 10),
		"CRAWLQ_SPIDER="+run.Spider,
		"CRAWLQ_ARGS="+string(argsJSON),
		"CRAWLQ_SETTINGS="+string(setJSON),
		"CRAWLQ_ITEMS_FD=3",
		"CRAWLQ_ITEMS_FILE=/dev/fd/3",
	)
	return env, nil
}

// Settings is what CRAWLQ_SETTINGS holds: the spider's settings with the run's overrides.
type Settings struct {
	AllowedDomains []string `json:"allowed_domains"`
	MaxPages       int      `json:"max_pages"`
	MaxDepth       int      `json:"max_depth"`
	Delay          string   `json:"delay"` // Go duration
	Concurrency    int      `json:"concurrency"`
	UserAgent      string   `json:"user_agent"`
	ObeyRobots     bool     `json:"obey_robots"`
}

// effectiveSettings is what the command sees of settings, which the crawl passes with the run's
// overrides already applied.
func effectiveSettings(s spider.Settings) Settings {
	s = s.WithDefaults()
	domains := s.AllowedDomains
	if domains == nil {
		domains = []string{}
	}
	return Settings{AllowedDomains: domains, MaxPages: s.MaxPages, MaxDepth: s.MaxDepth, Delay: s.Delay.String(),
		Concurrency: s.Concurrency, UserAgent: s.UserAgent, ObeyRobots: s.ObeyRobots}
}
