package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"crawlq/internal/cli"
	"crawlq/internal/crawl"
	"crawlq/internal/db"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
	"crawlq/internal/testwait"
)

// `crawlq runs --spider` prints the history with changes against the previous run and the
// verdicts; `crawlq run` shows a judged run's outcome and report.
func TestRunsHistory(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	pool := dbtest.Open(t, url, 4)
	ctx := context.Background()
	var ids []int64
	// A run cancelled part way (7 items) between the third and fourth: neither a baseline nor
	// compared with one.
	for _, r := range []struct {
		items int64
		state string
	}{{100, "succeeded"}, {110, "succeeded"}, {7, "cancelled"}, {44, "succeeded"}} {
		var id int64
		if err := pool.QueryRow(ctx, `INSERT INTO crawlq_run (spider, queue) VALUES ('demo', 'crawl') RETURNING id`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE crawlq_run SET state = $3, started_at = now() - interval '2 seconds', finished_at = now(), items = $2, pages = $2 WHERE id = $1`, id, r.items, r.state); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	ids = append(ids[:2], ids[3]) // the succeeded ones
	if _, err := pool.Exec(ctx, `INSERT INTO crawlq_item (run_id, key, spider, url, data) VALUES ($1, 'a', 'demo', 'http://x/', '{"title":"A","price":""}')`, ids[2]); err != nil {
		t.Fatal(err)
	}
	min := int64(50)
	p, err := events.New(events.Config{Pool: pool, Monitors: func(string, string) (spider.Monitors, error) { return spider.Monitors{MinItems: &min}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, url, "runs", "--spider", "demo")
	if code != 0 {
		t.Fatalf("runs: %d %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("history:\n%s", out)
	}
	// Newest first: 44 items is -60% against 110, the last succeeded run (not +529% against the
	// cancelled 7); the cancelled run shows its figures alone; 110 is +10% against 100; the oldest
	// has no change.
	for i, want := range [][]string{{"44 (-60%)", "failed (min_items)", "title=100%"}, {"cancelled", "  7  "}, {"110 (+10%)", "passed"}, {"100 ", "passed"}} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("line %q lacks %q", lines[i+1], w)
			}
		}
	}
	if !strings.Contains(lines[1], "price=0% title=100%") {
		t.Errorf("an empty price counted as present: %s", lines[1])
	}
	code, out, _ = run(t, url, "run", strconv.FormatInt(ids[2], 10))
	var v struct {
		State   string
		Outcome string
		Report  events.Report
		Events  []events.Recorded
	}
	if code != 6 || json.Unmarshal([]byte(out), &v) != nil || v.State != "succeeded" || v.Outcome != "monitors_failed" || v.Report.Monitors != "failed" ||
		len(v.Events) != 2 || v.Events[1].State != "succeeded" || v.Events[1].PublishedAt != nil || v.Events[1].NotPublished != "publishing is off" {
		t.Fatalf("run: %d %s", code, out)
	}
}

// `crawlq run ID --watch` follows a live run to its end, then says how it was judged.
func TestWatchRun(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	pool, err := db.Open(context.Background(), db.Config{URL: url, MaxConns: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	site := demosite.New(demosite.Config{Items: 40, SlowDelay: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(node.Config{Pool: pool, Worker: queue.WorkerConfig{Concurrency: 4}, Fetch: fetch.Config{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	defer func() { cancel(); <-done }()
	s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": "http://" + addr.String()}})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing judges the run here: --fail-on without monitors_failed does not wait for a verdict.
	code, out, errs := run(t, url, "run", strconv.FormatInt(s.RunID, 10), "--watch", "--interval", "20ms", "--fail-on", "incomplete,failed,cancelled")
	if code != 0 {
		t.Fatalf("watch: %d %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-2]
	if !strings.Contains(last, "succeeded: pages") || !strings.Contains(last, "items 40") {
		t.Fatalf("last progress line %q in\n%s", last, out)
	}
	if !strings.Contains(out, "queue ") || !strings.Contains(lines[len(lines)-1], "not judged yet") {
		t.Fatalf("watch output:\n%s", out)
	}
}

// `crawlq worker` judges the runs it finishes (publishing off without an emulator).
func TestWorkerJudgesRuns(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	pool := dbtest.Open(t, url, 4)
	site := demosite.New(demosite.Config{Items: 10, SlowDelay: time.Millisecond, Markup: demosite.MarkupRedesign})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, url, "schedule", "--spider", "demo", "--arg", "base_url=http://"+addr.String())
	if code != 0 {
		t.Fatalf("schedule: %d %s", code, errs)
	}
	id, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	var stdout, stderr strings.Builder
	done := make(chan int)
	go func() {
		done <- cli.Main(ctx, []string{"worker", "--maintain-every", "50ms", "--allow-loopback"}, cli.Env{Stdout: &syncWriter{w: &stdout}, Stderr: &syncWriter{w: &stderr},
			Getenv: func(k string) string {
				if k == "DATABASE_URL" {
					return url
				}
				return ""
			}})
	}()
	rep := testwait.For(t, fmt.Sprintf("run %d judged", id), func() (*events.Report, bool) {
		reps, err := events.Reports(ctx, pool, []int64{id})
		if err != nil {
			t.Fatal(err)
		}
		return reps[id], reps[id] != nil
	})
	cancel()
	if c := <-done; c != 0 {
		t.Fatalf("worker exited %d: %s", c, stderr.String())
	}
	if rep.State != "succeeded" || rep.Monitors != "failed" {
		t.Fatalf("the demo spider on the redesigned site: %+v", rep)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
