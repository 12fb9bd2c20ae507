// Package command runs command spiders: an external program (scrapy and friends) started as a
// child process for one run. It owns the child's life: its environment, its process group, the
// streaming of its stdout/stderr to the logs, the JSON Lines items it writes, and the mapping of
// how it ended to the run job's fate. Runner.Run has the signature of crawl.CommandRunner.
//
// # The contract with the command
//
// The command runs in its own process group, with stdin from /dev/null and this environment
// (besides the inherited variables named in Config.InheritEnv and the spec's Env):
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
//     same kill; the error wraps ErrStopped and context.Cause(ctx), and the queue worker
//     cancels or releases the job accordingly.
//
// When the command's main process exits, whatever it left running in its process group is
// killed: a run leaves no orphan processes. Pdeathsig also kills the child if the runner itself
// dies without a chance to clean up.
//
// # Scrapy
//
// A command `scrapy crawl NAME` (IsScrapy) is run as Scrapy (scrapy.go): the runner builds the
// command line (the run's args as -a, crawlq settings and the run's Scrapy settings as -s, a
// JSON Lines feed to fd 3), puts an uploaded project's egg and a stats hook on PYTHONPATH, reads
// Scrapy's final stats into the run's stats, and fails a run whose callbacks raised or that
// logged errors (ErrSpiderErrors), keeping its items. Every command's output also goes to the
// run log (Config.RunLog) with crawlq's own lines about the run.
package command

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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

// DefaultInheritEnv are the variables of the runner's environment a command sees by default.
// Deliberately few: the runner's environment holds the database URL and cloud credentials,
// which a spider's code has no business reading; give a command what it needs in its spec's Env.
var DefaultInheritEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR"}

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
	// MaxItemBytes bounds one JSON Lines item; longer lines are skipped. Default 1 MiB.
	MaxItemBytes int
	// MaxLogLine bounds one logged line of stdout/stderr; the rest of a longer line is dropped
	// and the record marked truncated. Default 4096.
	MaxLogLine int
	// BatchSize is the most items per pipeline write. Default 200.
	BatchSize int
	// FlushInterval is how long a partial batch waits for more items. Default 100ms.
	FlushInterval time.Duration
	// InheritEnv names the runner's environment variables passed on. Default DefaultInheritEnv;
	// an empty non-nil slice passes none.
	InheritEnv []string
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
}

func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = 12 * time.Hour
	}
	if c.KillGrace == 0 {
		c.KillGrace = 10 * time.Second
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
	if c.InheritEnv == nil {
		c.InheritEnv = DefaultInheritEnv
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

// itemResult is what the item reader achieved.
type itemResult struct {
	n, skipped int
	bytes      int64
	err        error
}

// Run runs spec for run and returns when the command has exited and its items are written (or
// the attempt is given up); see the package doc for what its error means.
func (r *Runner) Run(ctx context.Context, run *crawl.Run, spec spider.CommandSpec, settings spider.Settings) error {
	if run == nil || run.ID <= 0 {
		return queue.Permanent(fmt.Errorf("%w: no run", ErrInvalid))
	}
	argv := spec.Argv(run.Spider)
	if len(argv) == 0 || argv[0] == "" {
		return queue.Permanent(fmt.Errorf("%w: spider %q has an empty command", ErrInvalid, run.Spider))
	}
	env, err := r.env(run, spec, settings)
	if err != nil {
		return queue.Permanent(err)
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = r.cfg.Timeout
	}
	log := r.log.With("run", run.ID, "spider", run.Spider)
	var sr *scrapyRun
	if IsScrapy(argv) {
		if sr, err = r.prepareScrapy(ctx, run, argv, spec, settings); err != nil {
			if errors.Is(err, ErrInvalid) {
				return queue.Permanent(err)
			}
			return err
		}
		defer os.RemoveAll(sr.dir)
		argv = sr.argv
		// Before CRAWLQ_*, after the spec's Env: crawlq sets where the egg and hook are.
		n := len(env) - 6
		env = append(append(append([]string(nil), env[:n]...), sr.env...), env[n:]...)
	}
	runLog := r.startLog(run.ID)
	defer runLog.close()

	var parentEnds, childEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	pipe := func() (*os.File, *os.File, error) {
		pr, pw, err := os.Pipe()
		if err == nil {
			parentEnds, childEnds = append(parentEnds, pr), append(childEnds, pw)
		}
		return pr, pw, err
	}
	itemsR, itemsW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll(parentEnds)
		closeAll(childEnds)
		return fmt.Errorf("create pipes: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{itemsW} // fd 3
	// Its own process group, so one signal reaches everything it starts. Pdeathsig kills the
	// command if the runner itself is killed with SIGKILL; only the command, not what it started
	// (on ECS those end with the task, whose container the runner's death stops).
	cmd.SysProcAttr = procAttr()
	startErr := cmd.Start()
	closeAll(childEnds) // the child has its copies; ours would keep the pipes from ever ending
	if startErr != nil {
		closeAll(parentEnds)
		return queue.Permanent(fmt.Errorf("start command %q: %w", argv[0], startErr))
	}
	defer closeAll(parentEnds)
	pgid := cmd.Process.Pid
	log.Info("command started", "argv", argv, "pid", pgid, "timeout", timeout)
	started := time.Now()
	runLog.add(fmt.Sprintf("crawlq: started %q (pid %d, timeout %s)", argv, pgid, timeout))
	if r.cfg.Store != nil {
		version, project := "", ""
		if sr != nil && sr.project != "" {
			version, project = sr.version, sr.project
		} else if r.cfg.SpiderVersion != nil {
			version = r.cfg.SpiderVersion(run.Spider)
		}
		if _, err := r.cfg.Store.StartRun(ctx, run.ID, project, run.Spider, version, pgid); err != nil {
			log.Warn("record the run's version and pid", "err", err)
		}
	}

	var logs sync.WaitGroup
	logs.Add(2)
	go func() { defer logs.Done(); r.streamLog(outR, log, "stdout", runLog) }()
	go func() { defer logs.Done(); r.streamLog(errR, log, "stderr", runLog) }()

	itemsCtx, cancelItems := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelItems()
	var exited atomic.Bool
	itemsDone := make(chan itemResult, 1)
	go func() { itemsDone <- r.readItems(itemsCtx, run, itemsR, &exited, log) }()

	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	var (
		reason    error // why we killed it; nil if it ended by itself
		killAt    <-chan time.Time
		ctxDone   = ctx.Done()
		timer     = time.NewTimer(timeout)
		waitErr   error
		ires      itemResult
		itemsOver bool
	)
	defer timer.Stop()
	terminate := func(why error) {
		if reason != nil {
			return
		}
		reason = why
		log.Warn("stopping command", "reason", why, "pid", pgid)
		signalGroup(pgid, syscall.SIGTERM)
		killAt = time.After(r.cfg.KillGrace)
	}
wait:
	for {
		select {
		case waitErr = <-waitDone:
			break wait
		case <-ctxDone:
			ctxDone = nil
			terminate(fmt.Errorf("%w: %w", ErrStopped, context.Cause(ctx)))
		case <-timer.C:
			terminate(fmt.Errorf("%w after %s", ErrTimeout, timeout))
		case ires = <-itemsDone:
			itemsOver = true
			itemsDone = nil
			if ires.err != nil {
				terminate(fmt.Errorf("write items: %w", ires.err))
			}
		case <-killAt:
			killAt = nil
			log.Warn("command ignored SIGTERM; sending SIGKILL", "pid", pgid, "grace", r.cfg.KillGrace)
			signalGroup(pgid, syscall.SIGKILL)
		}
	}
	// The main process is gone; anything left in its group is an orphan.
	if signalGroup(pgid, syscall.SIGKILL) {
		log.Warn("killed processes the command left running", "pgid", pgid)
	}
	// Whatever escaped the group (setsid) may hold the pipes open: stop waiting for them after
	// the grace period, but read what is already in them.
	exited.Store(true)
	deadline := time.Now().Add(r.cfg.KillGrace)
	for _, f := range parentEnds {
		f.SetReadDeadline(deadline)
	}
	logs.Wait()
	if !itemsOver {
		if reason != nil {
			// Stopping: write what was read, within the grace period.
			t := time.AfterFunc(r.cfg.KillGrace, cancelItems)
			ires = <-itemsDone
			t.Stop()
		} else {
			select {
			case ires = <-itemsDone:
			case <-ctx.Done():
				cancelItems()
				ires = <-itemsDone
				if reason == nil {
					reason = fmt.Errorf("%w: %w", ErrStopped, context.Cause(ctx))
				}
			}
		}
	}
	log = log.With("items", ires.n, "skipped_lines", ires.skipped, "elapsed", time.Since(started).Round(time.Millisecond))
	err = r.finish(ctx, run, log, runLog, sr, reason, ires, waitErr)
	if err != nil {
		runLog.add("crawlq: run attempt ended: " + err.Error())
	} else {
		runLog.add(fmt.Sprintf("crawlq: command succeeded: %d items", ires.n))
	}
	return err
}

// finish maps how the command ended (and, for Scrapy, its final stats) to the job's fate.
func (r *Runner) finish(ctx context.Context, run *crawl.Run, log *slog.Logger, runLog *logBatcher, sr *scrapyRun,
	reason error, ires itemResult, waitErr error) error {
	var scrapyErr error
	if sr != nil {
		st, err := readScrapyStats(sr.statsFile)
		switch {
		case err == nil:
			runLog.add(fmt.Sprintf("crawlq: scrapy stats: item_scraped_count=%d response_count=%d log_count/ERROR=%d spider_exceptions=%d finish_reason=%s",
				st.Items, st.Responses, st.ErrorLogs, st.SpiderExceptions, st.FinishReason))
			if r.cfg.RecordStats != nil {
				if err := r.cfg.RecordStats(context.WithoutCancel(ctx), run.ID, st.Responses, st.ByKind); err != nil {
					log.Warn("record scrapy stats", "err", err)
				}
			}
			scrapyErr = st.verdict()
		case errors.Is(err, os.ErrNotExist):
			scrapyErr = fmt.Errorf("%w: scrapy wrote no final stats (it did not start the crawl, or STATS_CLASS was overridden)", ErrSpiderErrors)
		default:
			scrapyErr = err
		}
	}

	switch {
	case reason != nil && errors.Is(reason, ErrTimeout):
		log.Warn("command timed out")
		return queue.Permanent(reason)
	case reason != nil:
		log.Warn("command stopped", "reason", reason)
		return reason
	case ires.err != nil:
		log.Warn("command items not written", "err", ires.err)
		return fmt.Errorf("write items: %w", ires.err)
	}
	if waitErr == nil {
		if scrapyErr != nil {
			log.Warn("scrapy run had errors", "err", scrapyErr)
			return queue.Permanent(scrapyErr)
		}
		log.Info("command succeeded")
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) {
		return fmt.Errorf("wait for command: %w", waitErr)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		log.Warn("command killed by a signal", "signal", ws.Signal())
		return fmt.Errorf("%w: killed by signal %s", ErrExitStatus, ws.Signal())
	}
	code := ee.ExitCode()
	if code == ExitTempFail {
		log.Warn("command asked for a retry", "exit_status", code)
		return fmt.Errorf("%w: exit status %d (temporary failure; retried)", ErrExitStatus, code)
	}
	log.Warn("command failed", "exit_status", code)
	return queue.Permanent(fmt.Errorf("%w: exit status %d", ErrExitStatus, code))
}

// signalGroup signals process group pgid and reports whether it had any member.
func signalGroup(pgid int, sig syscall.Signal) bool {
	return syscall.Kill(-pgid, sig) == nil
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
	for _, k := range r.cfg.InheritEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
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

// streamLog logs each line of f, bounded to MaxLogLine bytes.
func (r *Runner) streamLog(f *os.File, log *slog.Logger, stream string, runLog *logBatcher) {
	br := bufio.NewReaderSize(f, r.cfg.MaxLogLine)
	truncated := false // in the middle of dropping the rest of a long line
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			full := errors.Is(err, bufio.ErrBufferFull)
			if !truncated {
				text := string(bytes.TrimRight(line, "\r\n"))
				if full {
					log.Info("command output", "stream", stream, "line", text, "truncated", true)
					text += " [truncated]"
				} else {
					log.Info("command output", "stream", stream, "line", text)
				}
				runLog.add(text)
			}
			truncated = full
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if !errors.Is(err, io.EOF) {
				log.Warn("stopped reading command output", "stream", stream, "err", err)
			}
			return
		}
	}
}

// readItems reads JSON Lines from f into the pipeline until EOF (or the read deadline once the
// command has exited), in batches.
func (r *Runner) readItems(ctx context.Context, run *crawl.Run, f *os.File, exited *atomic.Bool, log *slog.Logger) itemResult {
	// Small on purpose: with the reader's buffer and one batch, this bounds the memory held.
	ch := make(chan items.Item, 16)
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	var skipped atomic.Int64
	readDone := make(chan error, 1)
	go func() {
		defer close(ch)
		readDone <- r.readLines(readCtx, run, f, exited, ch, &skipped, log)
	}()
	res := r.writeBatches(ctx, run, ch)
	if res.err == nil {
		// ch is closed, so the reader has returned.
		res.err = <-readDone
	}
	// On a write error the reader is left to end by itself: it stops at its next item
	// (readCtx) or when Run closes the pipe, and Run must learn of the error now to kill the
	// command rather than wait for it.
	res.skipped = int(skipped.Load())
	return res
}

func (r *Runner) readLines(ctx context.Context, run *crawl.Run, f *os.File, exited *atomic.Bool, ch chan<- items.Item, skipped *atomic.Int64, log *slog.Logger) error {
	br := bufio.NewReaderSize(f, r.cfg.MaxItemBytes)
	lineNo := 0
	dropping := false
	skip := func(why string) {
		if skipped.Add(1) <= 10 {
			log.Warn("skipped an item line", "line", lineNo, "why", why)
		}
	}
	for {
		if exited.Load() {
			// Refreshed per read: time spent waiting on the pipeline must not eat it.
			f.SetReadDeadline(time.Now().Add(r.cfg.KillGrace))
		}
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			full := errors.Is(err, bufio.ErrBufferFull)
			switch {
			case dropping:
				dropping = full
			case full:
				lineNo++
				dropping = true
				skip(fmt.Sprintf("longer than %d bytes", r.cfg.MaxItemBytes))
			default:
				lineNo++
				it, why := r.parseItem(run, bytes.TrimSpace(line))
				if why != "" {
					if why != "blank" {
						skip(why)
					}
					break
				}
				select {
				case ch <- it:
				case <-ctx.Done():
					return nil
				}
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			switch {
			case errors.Is(err, io.EOF):
				return nil
			case errors.Is(err, os.ErrDeadlineExceeded):
				log.Warn("item pipe still open after the command exited (a process escaped its group?); stopped reading")
				return nil
			default:
				return fmt.Errorf("read items: %w", err)
			}
		}
	}
}

// parseItem turns one line into an item, or says why not ("blank" for an empty line).
func (r *Runner) parseItem(run *crawl.Run, line []byte) (items.Item, string) {
	if len(line) == 0 {
		return items.Item{}, "blank"
	}
	var fields map[string]json.RawMessage
	if line[0] != '{' || json.Unmarshal(line, &fields) != nil {
		return items.Item{}, "not a JSON object"
	}
	it := items.Item{RunID: run.ID, Spider: run.Spider, Data: json.RawMessage(bytes.Clone(line))}
	if raw, ok := fields["key"]; ok {
		var s string
		var n json.Number
		if json.Unmarshal(raw, &s) == nil {
			it.Key = s
		} else if json.Unmarshal(raw, &n) == nil {
			it.Key = n.String()
		}
	}
	if it.Key == "" {
		sum := sha256.Sum256(line)
		it.Key = "line:" + hex.EncodeToString(sum[:16])
	} else if len(it.Key) > items.MaxKeyLen {
		sum := sha256.Sum256([]byte(it.Key))
		it.Key = "key:" + hex.EncodeToString(sum[:])
	}
	if raw, ok := fields["url"]; ok {
		var u string
		if json.Unmarshal(raw, &u) == nil && len(u) <= items.MaxURLLen {
			it.URL = u
		}
	}
	if err := it.Validate(); err != nil {
		return items.Item{}, err.Error()
	}
	return it, ""
}

// writeBatches writes items from ch to the pipeline until ch closes or a write fails for good.
func (r *Runner) writeBatches(ctx context.Context, run *crawl.Run, ch <-chan items.Item) itemResult {
	var res itemResult
	batch := make([]items.Item, 0, r.cfg.BatchSize)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := r.write(ctx, batch); err != nil {
			return err
		}
		var b int64
		for _, it := range batch {
			b += int64(len(it.Data))
		}
		res.n += len(batch)
		res.bytes += b
		if r.cfg.RecordItems != nil {
			if err := r.cfg.RecordItems(ctx, run.ID, len(batch), b); err != nil {
				r.log.Warn("record item stats", "run", run.ID, "err", err)
			}
		}
		batch = batch[:0]
		return nil
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var timerC <-chan time.Time
		if len(batch) > 0 {
			timerC = timer.C
		}
		select {
		case it, ok := <-ch:
			if !ok {
				res.err = flush()
				return res
			}
			batch = append(batch, it)
			if len(batch) == 1 {
				timer.Reset(r.cfg.FlushInterval)
			}
			if len(batch) >= r.cfg.BatchSize {
				timer.Stop()
				if res.err = flush(); res.err != nil {
					return res
				}
			}
		case <-timerC:
			if res.err = flush(); res.err != nil {
				return res
			}
		}
	}
}

// write sends a batch, waiting out backpressure; an item the sink rejects is dropped (logged),
// not a reason to fail the whole run.
func (r *Runner) write(ctx context.Context, batch []items.Item) error {
	for {
		err := r.cfg.Pipeline.Write(ctx, batch)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, items.ErrBackpressure):
			continue // the command is blocked in its write meanwhile: that is the backpressure
		case errors.Is(err, items.ErrInvalidItem) && len(batch) > 1:
			for i := range batch {
				if err := r.write(ctx, batch[i:i+1]); err != nil {
					return err
				}
			}
			return nil
		case errors.Is(err, items.ErrInvalidItem):
			r.log.Warn("sink rejected an item", "run", batch[0].RunID, "key", batch[0].Key, "err", err)
			return nil
		default:
			return err
		}
	}
}
