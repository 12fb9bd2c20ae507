package events_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/awstest"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/events"
	"crawlq/internal/monitor"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
	"crawlq/internal/testwait"
)

// redriveSpec is shopSpec's crawl with short retries, so pages that keep failing die within the
// test, and a min_items monitor only a whole crawl passes.
const redriveSpec = `
name: shop
start_urls: ["http://127.0.0.1:8088/"]
allowed_domains: ["127.0.0.1"]
follow: [{css: a}]
items:
  - match: '/catalogue/item-\d+\.html$'
    css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
concurrency: 4
allow_private: true
retry: {attempts: 2, backoff: 10ms, host_pause: 10ms, max_host_pause: 20ms, host_down_limit: 100ms, max_dead_share: 1}
monitors:
  min_items: 30
`

// A run that ended incomplete with a failing monitor, redriven once its site is whole again, is
// judged again when it finishes again: its report, its final event and crawlq run's outcome carry
// the new verdict (succeeded, monitors passed), not the first finish's.
func TestRedriveRejudgesTheRun(t *testing.T) {
	awstest.Moto(t)
	b := newBus(t, "redriven", `{"source":["crawlq"]}`)
	var broken atomic.Bool
	broken.Store(true)
	site := demosite.New(demosite.Config{Items: 30, SlowDelay: time.Millisecond})
	odd := regexp.MustCompile(`/catalogue/item-(\d+)\.html$`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// While broken, a third of the item pages fail every fetch: they die, the others are fetched.
		if m := odd.FindStringSubmatch(r.URL.Path); m != nil && broken.Load() {
			if n, _ := strconv.Atoi(m[1]); n%3 == 0 {
				http.Error(w, "broken", http.StatusBadGateway)
				return
			}
		}
		site.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	addr := l.Addr().String()
	var emf lockedBuffer
	e := startSpecCrawl(t, redriveSpec, func(pool *pgxpool.Pool, c *node.Config) {
		c.Events = newLoop(t, events.LoopConfig{Interval: time.Hour,
			Publisher: newPublisher(t, events.Config{Pool: pool, Putter: motoEventBridge(t), Monitors: c.Spiders.Monitors,
				Log: runlog.EventLog{Store: runlog.Postgres{Pool: pool}}, Metrics: &emf})})
	})
	s, err := e.n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "shop", Args: map[string]string{"base_url": "http://" + addr}})
	if err != nil {
		t.Fatal(err)
	}
	if r := waitFinished(t, e, s.RunID); r.State != crawl.StateIncomplete {
		t.Fatalf("run %+v; want incomplete (dead pages)", r)
	}
	first := b.collect(t, s.RunID, "pending,running,incomplete")
	fin := first[len(first)-1].Detail
	if fin.Outcome != "monitors_failed" || fin.Monitors == nil || fin.Monitors.Status != monitor.StatusFailed || fin.Stats.Items >= 30 {
		t.Fatalf("first finish: outcome %q, monitors %+v, %d items; want monitors_failed with min_items failing", fin.Outcome, fin.Monitors, fin.Stats.Items)
	}
	rep := report(t, e.pool, s.RunID)
	if rep.State != crawl.StateIncomplete || rep.Monitors != monitor.StatusFailed {
		t.Fatalf("first report %+v", rep)
	}
	// The run's log (crawlq logs) says which pages died, with their URL and last error, then the
	// final state, its figures with the retries and dead pages, and the failed monitor.
	var log []runlog.Line
	testwait.Until(t, "the run log's monitor line", func() bool { // written once the event is out
		var err error
		if log, err = runlog.ReadAll(ctx, runlog.Postgres{Pool: e.pool}, s.RunID, 0); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(log, func(l runlog.Line) bool { return strings.HasPrefix(l.Text, runlog.OwnPrefix+"monitor min_items") })
	})
	var text []string
	died := regexp.MustCompile(`^` + runlog.OwnPrefix + `page died after \d+ attempts?: http://` + regexp.QuoteMeta(addr) + `/catalogue/item-\d+\.html: .*502`)
	deaths := 0
	for _, l := range log {
		text = append(text, l.At.Format("15:04:05.000")+" "+l.Text)
		if died.MatchString(l.Text) {
			deaths++
		}
	}
	all := strings.Join(text, "\n")
	t.Logf("run log of the first finish:\n%s", all)
	if deaths == 0 || int64(deaths) > *fin.Stats.DeadPages ||
		!regexp.MustCompile(`state incomplete \(monitors_failed\).*\n.*retries \d+.*dead pages `+strconv.FormatInt(*fin.Stats.DeadPages, 10)).MatchString(all) ||
		!strings.Contains(all, "monitor min_items: failed") ||
		!regexp.MustCompile(`host 127\.0\.0\.1:\d+ paused until [0-9:.]+( \(\d+ms\))?: .*502.*; its pages wait without counting attempts, and die once it has been down 100ms`).MatchString(all) {
		t.Fatalf("run log (%d deaths of %d dead pages):\n%s", deaths, *fin.Stats.DeadPages, all)
	}

	broken.Store(false)
	if _, err := e.n.Crawler.Redrive(ctx, s.RunID); err != nil {
		t.Fatal(err)
	}
	second := b.collect(t, s.RunID, "running,succeeded")
	fin = second[len(second)-1].Detail
	if fin.State != crawl.StateSucceeded || fin.Outcome != crawl.StateSucceeded || fin.Monitors == nil ||
		fin.Monitors.Status != monitor.StatusPassed || fin.Stats.Items != 30 || fin.Monitors.Results[0].Message != "30 items, at least 30 wanted" {
		t.Fatalf("final event after the redrive: %+v monitors %+v; want succeeded, monitors passed with 30 items", fin, fin.Monitors)
	}
	// The host's pause is lifted by the redrive ("try again now"), in the log of the redriven run.
	testwait.Until(t, "the host's lifted pause in the run log", func() bool {
		log, err := runlog.ReadAll(ctx, runlog.Postgres{Pool: e.pool}, s.RunID, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range log {
			if strings.HasPrefix(l.Text, runlog.OwnPrefix+"redrive: host 127.0.0.1:") && strings.Contains(l.Text, "'s pause cleared") {
				return true
			}
		}
		return false
	})
	rep = report(t, e.pool, s.RunID)
	if rep.State != crawl.StateSucceeded || rep.Monitors != monitor.StatusPassed || rep.Stats.Items != 30 || rep.EventID != fin.Sequence {
		t.Fatalf("report after the redrive %+v; want the succeeded finish's (event %d), passed", rep, fin.Sequence)
	}
	// The monitor metric said failed for the first finish, and says passed for the second.
	m := emf.String()
	failed, passed := strings.Index(m, `"Monitor":"min_items","MonitorFailed":1`), strings.LastIndex(m, `"Monitor":"min_items","MonitorFailed":0`)
	if failed < 0 || passed < failed {
		t.Fatalf("MonitorFailed metrics: want 1 for the first finish, then 0 after the redrive:\n%s", m)
	}
}

// lockedBuffer is a bytes.Buffer the publisher's loop writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSpecCrawl is startCrawlWith for a spider given as a spec, without a site of its own.
func startSpecCrawl(t *testing.T, spec string, adjust func(*pgxpool.Pool, *node.Config)) *crawlEnv {
	t.Helper()
	e := &crawlEnv{pool: dbtest.Pool(t), reg: spider.NewRegistry()}
	if err := e.reg.LoadFS(fstest.MapFS{"shop.yaml": {Data: []byte(spec)}}); err != nil {
		t.Fatal(err)
	}
	nc := node.Config{Pool: e.pool, Spiders: e.reg, Workers: 1, Worker: queue.WorkerConfig{Concurrency: 8}}
	adjust(e.pool, &nc)
	n, err := node.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e.n = n
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

func waitFinished(t *testing.T, e *crawlEnv, id int64) *crawl.Run {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	for {
		r, err := e.n.Crawler.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Finished() {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %d did not finish: %+v", id, r)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
