package command_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"crawlq/internal/command"
	"crawlq/internal/crawl"
	"crawlq/internal/demosite"
	"crawlq/internal/items"
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
)

// TestScrapyProjectInImage runs a Scrapy project whose code is in the runner's image (a
// directory, no egg): crawlq builds the scrapy command line, maps the run's settings, collects
// the items through its feed and reads Scrapy's final stats into the run.
func TestScrapyProjectInImage(t *testing.T) {
	t.Parallel()
	if out, err := exec.Command("/usr/bin/python3", "-c", "import scrapy").CombinedOutput(); err != nil {
		t.Fatalf("Scrapy is missing (%v: %s): install Debian's python3-scrapy (scripts/deps.sh test)", err, out)
	}
	_, file, _, _ := runtime.Caller(0)
	project := filepath.Join(t.TempDir(), "project")
	if out, err := exec.Command("cp", "-r", filepath.Join(filepath.Dir(file), "..", "..", "testdata", "scrapyproject"), project).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	site := demosite.New(demosite.Config{Items: 48, SlowDelay: time.Millisecond})
	addr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	spec := spider.CommandSpec{Command: []string{"/usr/bin/scrapy", "crawl", "{spider}"}, Dir: project,
		Env: map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}}
	var logs runlog.Store
	cfg := command.Config{KillGrace: 2 * time.Second}
	e := startWith(t, map[string]spider.CommandSpec{"catalog": spec}, &cfg, items.Config{}, func(e *env, c *command.Config) {
		logs = runlog.Postgres{Pool: e.node.Crawler.Pool()}
		c.RunLog = logs
		c.RecordStats = e.node.Crawler.RecordCommandStats
	})
	no := false
	s, err := e.node.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "catalog", Args: map[string]string{"base_url": "http://" + addr.String(), "label": "img"},
		Settings: crawl.Overrides{ObeyRobots: &no}})
	if err != nil {
		t.Fatal(err)
	}
	r := e.wait(t, s.RunID)
	if r.State != "succeeded" || r.Stats.Items != 48 || r.Stats.Errors != 0 {
		t.Fatalf("run: %+v", r)
	}
	if hits := site.Hits(); hits["/robots.txt"] != 0 || r.Stats.Pages != site.TotalHits() {
		t.Fatalf("pages %d, site hits %d (robots.txt %d): want every fetch counted and robots.txt off (obey_robots false)",
			r.Stats.Pages, site.TotalHits(), hits["/robots.txt"])
	}
	lines, err := runlog.ReadAll(ctx, logs, s.RunID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, l := range lines {
		text.WriteString(l.Text + "\n")
	}
	job := fmt.Sprintf("job %d SCRAPY_JOB=%d SCRAPY_PROJECT=default SCRAPY_SPIDER=catalog", s.RunID, s.RunID) // as under Scrapyd
	for _, want := range []string{"ROBOTSTXT_OBEY=false", "label=img", "Spider closed (finished)", job,
		"[crawlq] INFO: scrapy stats: item_scraped_count=48", "[crawlq] INFO: command succeeded"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("run log lacks %q:\n%s", want, text.String())
		}
	}
	// crawlq's own lines are in Scrapy's log format, which LogParser parses.
	scrapyLine := regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \[[^\]]+\] (DEBUG|INFO|WARNING|ERROR|CRITICAL): `)
	for _, l := range lines {
		if strings.Contains(l.Text, "[crawlq]") || strings.HasPrefix(l.Text, "crawlq:") {
			if !scrapyLine.MatchString(l.Text) {
				t.Errorf("crawlq's line is not in Scrapy's log format: %q", l.Text)
			}
		}
	}
}
