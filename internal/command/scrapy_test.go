package command

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/spider"
)

func TestScrapySettingsMapping(t *testing.T) {
	t.Parallel()
	def := spider.DefaultSettings()
	if got := scrapySettings(crawl.Overrides{}, def); len(got) != 0 {
		t.Fatalf("defaults must not override the project's settings.py: %v", got)
	}
	s := def
	s.Delay, s.Concurrency, s.UserAgent, s.ObeyRobots, s.MaxPages, s.MaxDepth = 1500*time.Millisecond, 3, "bot/2", false, 50, 4
	got := strings.Join(scrapySettings(crawl.Overrides{}, s), " ")
	want := "DOWNLOAD_DELAY=1.5 CONCURRENT_REQUESTS_PER_DOMAIN=3 USER_AGENT=bot/2 ROBOTSTXT_OBEY=false CLOSESPIDER_PAGECOUNT=50 DEPTH_LIMIT=4"
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	// A run that overrides a setting to its default value still passes it.
	yes, one := true, 1
	got = strings.Join(scrapySettings(crawl.Overrides{ObeyRobots: &yes, Concurrency: &one}, def), " ")
	if got != "CONCURRENT_REQUESTS_PER_DOMAIN=1 ROBOTSTXT_OBEY=true" {
		t.Fatalf("overrides: %s", got)
	}
}

func TestScrapyStatsVerdict(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(js string) *ScrapyStats {
		t.Helper()
		p := filepath.Join(dir, "s.json")
		if err := os.WriteFile(p, []byte(js), 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := readScrapyStats(p)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	clean := write(`{"item_scraped_count": 10, "response_received_count": 12, "finish_reason": "finished", "log_count/INFO": 9,
		"start_time": "2026-01-01 00:00:00"}`)
	if clean.verdict() != nil || clean.Responses != 12 || clean.Items != 10 || len(clean.ByKind) != 0 {
		t.Fatalf("clean run: %+v %v", clean, clean.verdict())
	}
	raised := write(`{"item_scraped_count": 8, "downloader/response_count": 12, "finish_reason": "finished", "log_count/ERROR": 3,
		"spider_exceptions/ValueError": 2, "spider_exceptions/KeyError": 0}`)
	err := raised.verdict()
	if err == nil || !strings.Contains(err.Error(), "2 exceptions in spider callbacks, 1 errors logged") || raised.Errors() != 3 ||
		raised.ByKind["spider_exception"] != 2 || raised.ByKind["scrapy_error"] != 1 || raised.Responses != 12 {
		t.Fatalf("raised: %+v %v", raised, err)
	}
	if err := write(`{"finish_reason": "shutdown"}`).verdict(); err == nil || !strings.Contains(err.Error(), "shutdown") {
		t.Fatalf("shutdown: %v", err)
	}
	if err := write(`{"finish_reason": "closespider_pagecount"}`).verdict(); err != nil {
		t.Fatalf("max_pages reached is a clean end: %v", err)
	}
	if !IsScrapy([]string{"/usr/bin/scrapy", "crawl", "x"}) || IsScrapy([]string{"scrapy", "list"}) || IsScrapy([]string{"python3", "crawl", "x"}) {
		t.Fatal("IsScrapy")
	}
}

// TestScrapyCommandLineAsScrapyd: a Scrapy run gets Scrapyd's _job argument and environment, and
// a STATS_CLASS the run asks for goes to the stats hook, which chains to it, not to Scrapy.
func TestScrapyCommandLineAsScrapyd(t *testing.T) {
	t.Parallel()
	r := &Runner{cfg: Config{}}
	run := &crawl.Run{ID: 5, Spider: "catalog", Args: map[string]string{"_job": "mine", "q": "x"}}
	argv := []string{"scrapy", "crawl", "catalog", "-s", "STATS_CLASS=my.Stats", "-s", "X=1"}
	sr, err := r.prepareScrapy(t.Context(), run, argv, spider.CommandSpec{Command: argv}, spider.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sr.dir)
	got := strings.Join(sr.argv, " ")
	want := "scrapy crawl catalog -s X=1 -a _job=mine -a q=x -a _job=5 -s STATS_CLASS=crawlq_scrapy.StatsCollector -o /dev/fd/3:jsonlines"
	if got != want {
		t.Fatalf("argv\n got %s\nwant %s", got, want)
	}
	env := strings.Join(sr.env, " ")
	for _, w := range []string{"CRAWLQ_STATS_CLASS=my.Stats", "SCRAPY_PROJECT=default", "SCRAPY_SPIDER=catalog", "SCRAPY_JOB=5", "SCRAPYD_JOB=5", "SCRAPYD_SPIDER=catalog"} {
		if !strings.Contains(env, w) {
			t.Errorf("env lacks %s: %s", w, env)
		}
	}
	// A spec that names its scrapy.cfg project keeps it.
	sr2, err := r.prepareScrapy(t.Context(), run, argv[:3], spider.CommandSpec{Command: argv[:3], Env: map[string]string{"SCRAPY_PROJECT": "marking"}}, spider.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sr2.dir)
	if env := strings.Join(sr2.env, " "); strings.Contains(env, "SCRAPY_PROJECT=") || strings.Contains(env, "CRAWLQ_STATS_CLASS") {
		t.Errorf("env %s: want the spec's SCRAPY_PROJECT kept, no stats class given", env)
	}
}

// TestCommandSeesConfigEnvOnly: a command's environment is Config.Env (what the edge read) with
// the spec's and crawlq's variables over it, never this process's own, and a Scrapy run's
// PYTHONPATH comes from Config.Env.
func TestCommandSeesConfigEnvOnly(t *testing.T) {
	t.Setenv("PATH", "/from/the/process")
	t.Setenv("PYTHONPATH", "/process/python")
	r := &Runner{cfg: Config{Env: map[string]string{"PATH": "/from/the/edge", "PYTHONPATH": "/edge/python"}}}
	env, err := r.env(&crawl.Run{ID: 7, Spider: "s"}, spider.CommandSpec{Env: map[string]string{"A": "1"}}, spider.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(env, "\n")
	for _, want := range []string{"PATH=/from/the/edge", "PYTHONPATH=/edge/python", "A=1", "CRAWLQ_RUN_ID=7"} {
		if !slices.Contains(env, want) {
			t.Errorf("command env lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "/from/the/process") {
		t.Errorf("the process's own PATH reached the command:\n%s", got)
	}
	run := &crawl.Run{ID: 5, Spider: "catalog"}
	argv := []string{"scrapy", "crawl", "catalog"}
	sr, err := r.prepareScrapy(t.Context(), run, argv, spider.CommandSpec{Command: argv}, spider.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sr.dir)
	var pp string
	for _, kv := range sr.env {
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			pp = v
		}
	}
	if !strings.HasSuffix(pp, string(os.PathListSeparator)+"/edge/python") {
		t.Errorf("scrapy PYTHONPATH %q: want Config.Env's last", pp)
	}
}
