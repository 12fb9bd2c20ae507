package command

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
)

// ErrSpiderErrors: a Scrapy run ended with errors (callbacks raised, errors logged, or it closed
// for a reason other than finishing); its items are kept, the run fails.
var ErrSpiderErrors = errors.New("scrapy run had errors")

//go:embed crawlq_scrapy.py
var scrapyHook []byte

// SpiderStore is what the runner needs of internal/spiderstore for stored spiders.
type SpiderStore interface {
	Run(ctx context.Context, runID int64) (spiderstore.RunRecord, error)
	StartRun(ctx context.Context, runID int64, project, name, version string, pid int) (string, error)
	GetProjectVersion(ctx context.Context, project, version string) (spiderstore.ProjectVersion, error)
	Egg(ctx context.Context, project, version string) ([]byte, error)
	// Cancel reads what the cancels of a run asked for (the signal, how many).
	Cancel(ctx context.Context, runID int64) (spiderstore.CancelRequest, error)
}

// IsScrapy reports whether a command is a Scrapy crawl (`scrapy crawl NAME`), which the runner
// runs as Scrapy: its own command line, settings, feed and stats.
func IsScrapy(argv []string) bool {
	return len(argv) >= 3 && filepath.Base(argv[0]) == "scrapy" && argv[1] == "crawl" && argv[2] != ""
}

// scrapyRun is how one Scrapy run is set up.
type scrapyRun struct {
	argv      []string
	env       []string // added to the command's environment (after the spec's)
	dir       string   // temporary directory: the hook, the egg, the stats file
	statsFile string
	project   string
	version   string
}

// prepareScrapy builds the Scrapy command line for run: `scrapy crawl NAME -a k=v ... -a
// _job=JOB -s K=V ... -o /dev/fd/3:jsonlines`, with the egg of the run's project version on
// PYTHONPATH when the spider came from an uploaded project, and the environment Scrapyd gives a
// run (scrapydEnv). The caller removes dir.
func (r *Runner) prepareScrapy(ctx context.Context, run *crawl.Run, argv []string, spec spider.CommandSpec, settings spider.Settings) (*scrapyRun, error) {
	dir, err := os.MkdirTemp("", "crawlq-scrapy-")
	if err != nil {
		return nil, fmt.Errorf("scrapy run: %w", err)
	}
	sr := &scrapyRun{dir: dir, statsFile: filepath.Join(dir, "stats.json"), project: spec.Env[spiderstore.ScrapyProjectEnv]}
	fail := func(err error) (*scrapyRun, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "crawlq_scrapy.py"), scrapyHook, 0o600); err != nil {
		return fail(fmt.Errorf("scrapy run: %w", err))
	}
	var rec spiderstore.RunRecord
	if r.cfg.Store != nil {
		rec, err = r.cfg.Store.Run(ctx, run.ID)
		if err != nil && !errors.Is(err, spiderstore.ErrNotFound) {
			return fail(err)
		}
	}
	pythonPath := dir
	if sr.project != "" {
		if r.cfg.Store == nil {
			return fail(fmt.Errorf("%w: spider %s comes from project %s, and this runner has no spider store", ErrInvalid, run.Spider, sr.project))
		}
		pv, err := r.cfg.Store.GetProjectVersion(ctx, sr.project, rec.Version)
		if err != nil {
			return fail(fmt.Errorf("%w: %w", ErrInvalid, err))
		}
		egg, err := r.cfg.Store.Egg(ctx, sr.project, pv.Version)
		if err != nil {
			return fail(err)
		}
		info, err := spiderstore.ParseEgg(egg)
		if err != nil {
			return fail(err)
		}
		eggPath := filepath.Join(dir, spiderstore.EggFileName(sr.project, pv.Version))
		if err := os.WriteFile(eggPath, egg, 0o600); err != nil {
			return fail(fmt.Errorf("scrapy run: %w", err))
		}
		pythonPath = eggPath + string(os.PathListSeparator) + dir
		sr.env = append(sr.env, "SCRAPY_SETTINGS_MODULE="+info.SettingsModule)
		sr.version = pv.Version
	}
	if old := spec.Env["PYTHONPATH"]; old != "" {
		pythonPath += string(os.PathListSeparator) + old
	} else if old := r.cfg.Env["PYTHONPATH"]; old != "" {
		pythonPath += string(os.PathListSeparator) + old
	}
	sr.env = append(sr.env, "PYTHONPATH="+pythonPath, "CRAWLQ_STATS_FILE="+sr.statsFile)
	job := rec.JobID // Scrapyd's job id: the client's, else the run id (what listjobs shows)
	if job == "" {
		job = strconv.FormatInt(run.ID, 10)
	}
	sr.env = append(sr.env, scrapydEnv(sr.project, argv[2], job, sr.version, spec.Env)...)

	bin := r.cfg.Scrapy
	if bin == "" {
		bin = argv[0]
	}
	out := []string{bin, "crawl", argv[2]}
	// The stats collector a run asks for on its command line goes to the hook, which chains
	// crawlq's to it (crawlq_scrapy.py); the project's own is read by the hook from its settings.
	var statsClass string
	for i := 3; i < len(argv); i++ { // whatever the spec adds
		if v, ok := strings.CutPrefix(argv[i], "STATS_CLASS="); ok && argv[i-1] == "-s" {
			statsClass = v
			out = out[:len(out)-1]
			continue
		}
		out = append(out, argv[i])
	}
	keys := make([]string, 0, len(run.Args))
	for k := range run.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, "-a", k+"="+run.Args[k])
	}
	out = append(out, "-a", "_job="+job) // last: Scrapyd's job id wins over an argument of that name
	for _, kv := range scrapySettings(run.Settings, settings) {
		out = append(out, "-s", kv)
	}
	skeys := make([]string, 0, len(rec.Settings))
	for k := range rec.Settings {
		skeys = append(skeys, k)
	}
	sort.Strings(skeys)
	for _, k := range skeys { // the run's own Scrapy settings win over the mapped ones: later -s wins
		if k == "STATS_CLASS" {
			statsClass = rec.Settings[k]
			continue
		}
		out = append(out, "-s", k+"="+rec.Settings[k])
	}
	if statsClass != "" {
		sr.env = append(sr.env, "CRAWLQ_STATS_CLASS="+statsClass)
	}
	out = append(out, "-s", "STATS_CLASS=crawlq_scrapy.StatsCollector", "-o", "/dev/fd/3:jsonlines")
	sr.argv = out
	return sr, nil
}

// scrapydEnv is the environment Scrapyd gives a run, for spiders and settings that read it:
// SCRAPY_PROJECT, SCRAPY_SPIDER and SCRAPY_JOB (Scrapyd before 1.3; Scrapy itself reads
// SCRAPY_PROJECT to pick a scrapy.cfg [settings] entry), and SCRAPYD_SPIDER, SCRAPYD_JOB and
// SCRAPYD_EGG_VERSION (Scrapyd 1.3-1.4). A spider whose code is in the image belongs to project
// "default", Scrapy's own default, unless its spec's Env sets SCRAPY_PROJECT.
func scrapydEnv(project, spider, job, version string, specEnv map[string]string) []string {
	var env []string
	if project != "" {
		env = append(env, "SCRAPY_PROJECT="+project)
	} else if _, ok := specEnv["SCRAPY_PROJECT"]; !ok {
		env = append(env, "SCRAPY_PROJECT="+spiderstore.DefaultProject)
	}
	env = append(env, "SCRAPY_SPIDER="+spider, "SCRAPY_JOB="+job, "SCRAPYD_SPIDER="+spider, "SCRAPYD_JOB="+job)
	if version != "" {
		env = append(env, "SCRAPYD_EGG_VERSION="+version)
	}
	return env
}

// scrapySettings maps crawlq settings to Scrapy's. A setting left at crawlq's default is not
// passed (the project's settings.py keeps it) unless the run overrode it.
func scrapySettings(o crawl.Overrides, s spider.Settings) []string {
	def := spider.DefaultSettings()
	var out []string
	if o.Delay != nil || s.Delay != def.Delay {
		out = append(out, "DOWNLOAD_DELAY="+strconv.FormatFloat(s.Delay.Seconds(), 'f', -1, 64))
	}
	if o.Concurrency != nil || (s.Concurrency != def.Concurrency && s.Concurrency != 0) {
		out = append(out, "CONCURRENT_REQUESTS_PER_DOMAIN="+strconv.Itoa(max(s.Concurrency, 1)))
	}
	if o.UserAgent != nil || (s.UserAgent != def.UserAgent && s.UserAgent != "") {
		out = append(out, "USER_AGENT="+s.UserAgent)
	}
	if o.ObeyRobots != nil || !s.ObeyRobots {
		out = append(out, "ROBOTSTXT_OBEY="+strconv.FormatBool(s.ObeyRobots))
	}
	if s.MaxPages > 0 {
		out = append(out, "CLOSESPIDER_PAGECOUNT="+strconv.Itoa(s.MaxPages))
	}
	if s.MaxDepth > 0 {
		out = append(out, "DEPTH_LIMIT="+strconv.Itoa(s.MaxDepth))
	}
	return out
}

// ScrapyStats is what crawlq reads of Scrapy's final stats.
type ScrapyStats struct {
	Items            int64            // item_scraped_count
	Responses        int64            // response_received_count (downloader/response_count)
	ErrorLogs        int64            // log_count/ERROR
	SpiderExceptions int64            // the sum of spider_exceptions/*
	DownloadErrors   int64            // downloader/exception_count
	FinishReason     string           // finish_reason
	ByKind           map[string]int64 // errors by kind, as the run's errors_by_kind gets them
}

// readScrapyStats reads the stats file the hook wrote.
func readScrapyStats(path string) (*ScrapyStats, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("scrapy stats: %w", err)
	}
	num := func(k string) int64 {
		if f, ok := raw[k].(float64); ok && !math.IsNaN(f) {
			return int64(f)
		}
		return 0
	}
	st := &ScrapyStats{Items: num("item_scraped_count"), Responses: num("response_received_count"), ErrorLogs: num("log_count/ERROR"),
		DownloadErrors: num("downloader/exception_count"), ByKind: map[string]int64{}}
	if st.Responses == 0 {
		st.Responses = num("downloader/response_count")
	}
	st.FinishReason, _ = raw["finish_reason"].(string)
	for k := range raw {
		if strings.HasPrefix(k, "spider_exceptions/") && strings.Count(k, "/") == 1 {
			st.SpiderExceptions += num(k)
		}
	}
	// Spider exceptions are logged at ERROR too: count each error once.
	if st.SpiderExceptions > 0 {
		st.ByKind["spider_exception"] = st.SpiderExceptions
	}
	if rest := st.ErrorLogs - st.SpiderExceptions; rest > 0 {
		st.ByKind["scrapy_error"] = rest
	}
	return st, nil
}

// Errors is the run's error count from the stats.
func (s *ScrapyStats) Errors() int64 { return max(s.ErrorLogs, s.SpiderExceptions) }

// verdict says whether a Scrapy run that exited 0 went well.
func (s *ScrapyStats) verdict() error {
	var why []string
	if s.SpiderExceptions > 0 {
		why = append(why, fmt.Sprintf("%d exceptions in spider callbacks", s.SpiderExceptions))
	}
	if n := s.ErrorLogs - s.SpiderExceptions; n > 0 {
		why = append(why, fmt.Sprintf("%d errors logged", n))
	}
	if s.FinishReason != "finished" && !strings.HasPrefix(s.FinishReason, "closespider_") {
		why = append(why, fmt.Sprintf("finish_reason %q", s.FinishReason))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (item_scraped_count %d, response_count %d)", ErrSpiderErrors, strings.Join(why, ", "), s.Items, s.Responses)
}

// logBatcher sends a run's output lines to the run log in batches.
type logBatcher struct {
	lines chan string
	done  chan struct{}
	clk   clock.Clock // stamps crawlq's own lines
}

func (r *Runner) startLog(runID int64) *logBatcher {
	if r.cfg.RunLog == nil {
		return nil
	}
	b := &logBatcher{lines: make(chan string, 1024), done: make(chan struct{}), clk: r.cfg.Clock}
	go func() {
		defer close(b.done)
		var buf []string
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		flush := func() {
			if len(buf) == 0 {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := r.cfg.RunLog.Append(ctx, runID, buf); err != nil {
				r.log.Warn("run log: lines lost", "run", runID, "lines", len(buf), "err", err)
			}
			buf = buf[:0]
		}
		for {
			select {
			case l, ok := <-b.lines:
				if !ok {
					flush()
					return
				}
				buf = append(buf, l)
				if len(buf) >= 500 {
					flush()
				}
			case <-t.C:
				flush()
			}
		}
	}()
	return b
}

func (b *logBatcher) add(line string) {
	if b != nil {
		b.lines <- line
	}
}

// info, warn and error add crawlq's own lines in Scrapy's log format (its default LOG_FORMAT
// and LOG_DATEFORMAT, local time as Scrapy's), "2026-11-24 16:19:36 [crawlq] INFO: message", so
// that tools parsing Scrapy logs (LogParser, ScrapydWeb) read them with Scrapy's own lines.
func (b *logBatcher) info(format string, a ...any)  { b.crawlq("INFO", format, a...) }
func (b *logBatcher) warn(format string, a ...any)  { b.crawlq("WARNING", format, a...) }
func (b *logBatcher) error(format string, a ...any) { b.crawlq("ERROR", format, a...) }

func (b *logBatcher) crawlq(level, format string, a ...any) {
	if b != nil {
		b.add(scrapyLogLine(b.clk.Now(), level, fmt.Sprintf(format, a...)))
	}
}

// scrapyLogLine is a line in Scrapy's log format from logger "crawlq".
func scrapyLogLine(t time.Time, level, msg string) string {
	return t.Format(time.DateTime) + " [crawlq] " + level + ": " + msg
}

func (b *logBatcher) close() {
	if b != nil {
		close(b.lines)
		<-b.done
	}
}
