package crawl_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
	"crawlq/internal/testwait"
)

func registry(t *testing.T, spec string) *spider.Registry {
	t.Helper()
	reg := spider.NewRegistry()
	if err := reg.LoadFS(fstest.MapFS{"test.yaml": {Data: []byte(spec)}}); err != nil {
		t.Fatal(err)
	}
	return reg
}

const edgeSpec = `
name: edge
start_urls: [http://127.0.0.1/]
follow: [{css: a}]
items:
  - match: '/p/'
    key: title
    fields:
      title: {css: h1, required: true}
`

// A site whose pages misbehave once: 429 with Retry-After, a read timeout, a 503; and pages that
// always fail: an oversized body, a 404, a page robots.txt disallows.
func TestRetriesTimeoutsAndOversizedBodies(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	hits := map[string][]time.Time{}
	base := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path] = append(hits[r.URL.Path], time.Now())
		n := len(hits[r.URL.Path])
		mu.Unlock()
		page := func(title string) { fmt.Fprintf(w, "<html><body><h1>%s</h1></body></html>", title) }
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /p/secret\n")
		case "/":
			for _, p := range []string{"ok", "429", "slow", "503", "big", "gone", "secret"} {
				fmt.Fprintf(w, `<a href="/p/%s">%s</a> `, p, p)
			}
		case "/p/429":
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			page("429")
		case "/p/slow":
			if n == 1 {
				// A server that never answers: the fetch times out (ReadTimeout) and gives up.
				select {
				case <-r.Context().Done():
				case <-time.After(time.Minute):
				}
				return
			}
			page("slow")
		case "/p/503":
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			page("503")
		case "/p/big":
			w.Write([]byte("<html><h1>big</h1>" + strings.Repeat("x", 200<<10) + "</html>"))
		case "/p/gone":
			http.NotFound(w, r)
		default:
			page(strings.TrimPrefix(r.URL.Path, "/p/"))
		}
	}))
	pool := dbtest.Pool(t)
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, edgeSpec), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 8},
		Queue: queue.Config{RetryBase: 100 * time.Millisecond, RetryMax: 200 * time.Millisecond},
		// A timeout long enough that only the silent page reaches it on a loaded machine (at
		// 500 ms, the 200 KiB page timed out under load and was retried).
		Fetch: fetch.Config{ReadTimeout: 3 * time.Second, MaxBodyBytes: 100 << 10}})
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "edge", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, time.Minute)
	mu.Lock()
	defer mu.Unlock()
	if r.State != "succeeded" || r.Stats.Items != 4 {
		t.Fatalf("run %s with %d items (%v); want succeeded with ok, 429, slow, 503", r.State, r.Stats.Items, r.Stats.ErrorsByKind)
	}
	if h := hits["/p/429"]; len(h) != 2 || h[1].Sub(h[0]) < time.Second {
		t.Errorf("429 page fetched at %v: want a retry at least the Retry-After (1s) later", h)
	}
	for _, p := range []string{"/p/slow", "/p/503"} {
		if len(hits[p]) != 2 {
			t.Errorf("%s fetched %d times, want 2 (one retry)", p, len(hits[p]))
		}
	}
	for _, p := range []string{"/p/big", "/p/gone", "/robots.txt"} {
		if len(hits[p]) != 1 {
			t.Errorf("%s fetched %d times, want once (not retried)", p, len(hits[p]))
		}
	}
	if len(hits["/p/secret"]) != 0 {
		t.Error("fetched a page robots.txt disallows")
	}
	k := r.Stats.ErrorsByKind
	// A lone timeout, 429 or 503 is the page's failure, not its host's: a retry each.
	if k["too_large"] != 1 || k["status_4xx"] != 1 || k["robots_disallowed"] != 1 || k["status_429"] != 1 || k["timeout"] != 1 || k["status_5xx"] != 1 {
		t.Errorf("errors by kind %v", k)
	}
	if r.Stats.Retries != 3 || r.Stats.Errors != 2 || r.Stats.HostPauses != 0 {
		t.Errorf("retries %d errors %d host pauses %d; want 3, 2 and 0", r.Stats.Retries, r.Stats.Errors, r.Stats.HostPauses)
	}
}

// stallSink wraps a sink and stalls every write while stalled is set.
type stallSink struct {
	items.Sink
	stalled atomic.Bool
}

func (s *stallSink) Write(ctx context.Context, batch []items.Item) error {
	for s.stalled.Load() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return s.Sink.Write(ctx, batch)
}

// A stalled sink slows the crawl with bounded memory; when it recovers the crawl finishes with
// every item exactly once.
func TestSlowSinkBackpressure(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site, base := serveDemo(t, demosite.Config{Items: 200, SlowDelay: time.Millisecond})
	sink := &stallSink{Sink: items.NewPostgresSink(pool)}
	sink.stalled.Store(true)
	n, _ := startNode(t, pool, node.Config{Sink: sink, Workers: 2, Worker: queue.WorkerConfig{Concurrency: 8}, ItemTimeout: time.Second,
		Pipeline: items.Config{MaxItems: 5, BatchSize: 5, SubmitTimeout: 200 * time.Millisecond}})
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing may be written while the sink stalls: rather than for a while, for as long as it
	// takes the workers to be pushed back many times more (each page that cannot hand over its
	// items is), which they are only while they keep crawling against the stall.
	testwait.Until(t, "n.Pipeline.Stats().Backpressure >= 5", func() bool { return n.Pipeline.Stats().Backpressure >= 5 })
	from := n.Pipeline.Stats().Backpressure
	testwait.Until(t, "n.Pipeline.Stats().Backpressure >= from+20", func() bool { return n.Pipeline.Stats().Backpressure >= from+20 })
	if st := n.Pipeline.Stats(); st.MaxBufferedItems > 5 || st.WrittenItems != 0 {
		t.Fatalf("while stalled: %+v; want at most 5 buffered and nothing written", st)
	}
	sink.stalled.Store(false)
	r := waitRun(t, n.Crawler, s.RunID, time.Minute)
	got, err := items.CountItems(context.Background(), pool, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "succeeded" || got != int64(site.Expected().Items) || r.Stats.Items != got {
		t.Fatalf("run %s, %d items in the sink, %d in stats; want %d", r.State, got, r.Stats.Items, site.Expected().Items)
	}
	if st := n.Pipeline.Stats(); st.MaxBufferedItems > 5 {
		t.Fatalf("buffer peaked at %d items, over the limit of 5", st.MaxBufferedItems)
	}
}

// Completion fires exactly once and never early with many concurrent workers: when the run is
// finished, every item is in and no job of the run is left.
func TestCompletionExactlyOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site, base := serveDemo(t, demosite.Config{Items: 600, PerPage: 100, SlowDelay: time.Millisecond})
	var mu sync.Mutex
	var finishes []string
	var n *node.Node
	n, _ = startNode(t, pool, node.Config{Workers: 8, Worker: queue.WorkerConfig{Concurrency: 8},
		OnFinish: func(id int64, state string) {
			// Never early: at this moment every item must be written and nothing of the run left.
			got, err := items.CountItems(context.Background(), pool, id)
			if err != nil {
				t.Error(err)
			}
			left, err := n.Queue.HasUnfinishedTx(context.Background(), pool, id)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			finishes = append(finishes, fmt.Sprintf("%s items=%d left=%v", state, got, left))
			mu.Unlock()
		}})
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, n.Crawler, s.RunID, time.Minute)
	// OnFinish runs after the finishing transaction commits, which waitRun may see first.
	testwait.Until(t, "the finish reported", func() bool { mu.Lock(); defer mu.Unlock(); return len(finishes) > 0 })
	// A second finisher, now and on purpose rather than by waiting for one: finishing the run
	// again and sweeping must both find it finished.
	if done, err := n.Crawler.TryFinish(context.Background(), s.RunID); err != nil || done {
		t.Fatalf("TryFinish of a finished run: %v, %v; want false, nil", done, err)
	}
	if swept, err := n.Crawler.Sweep(context.Background()); err != nil || swept != 0 {
		t.Fatalf("Sweep after the run finished: %d, %v; want 0, nil", swept, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := fmt.Sprintf("succeeded items=%d left=false", site.Expected().Items)
	if len(finishes) != 1 || finishes[0] != want {
		t.Fatalf("finishes %q; want exactly [%q]", finishes, want)
	}
}

// A page budget is exact under concurrency: a run with max_pages N on a larger site queues
// exactly N page jobs, however many workers add pages at once.
func TestPageBudgetIsExact(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	_, base := serveDemo(t, demosite.Config{Items: 600, PerPage: 50})
	n, _ := startNode(t, pool, node.Config{Workers: 4, Worker: queue.WorkerConfig{Concurrency: 8}})
	budget := 40
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo",
		Args: map[string]string{"base_url": base}, Settings: crawl.Overrides{MaxPages: &budget}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, time.Minute)
	var jobs int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM crawlq_job WHERE parent_id = $1 AND kind = 'page'`, s.RunID).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if r.State != "succeeded" || jobs != budget {
		t.Fatalf("run %s with %d page jobs; want succeeded with exactly max_pages=%d", r.State, jobs, budget)
	}
}

// A spider's concurrency bounds the requests in flight to its domain from a worker process,
// however many handlers the process has; without a delay they still overlap up to that bound.
func TestDomainConcurrencyPerProcess(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site := demosite.New(demosite.Config{Items: 120, PerPage: 40})
	var mu sync.Mutex
	inFlight, most := 0, 0
	base := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(10 * time.Millisecond) // the server's latency, so requests overlap
		site.ServeHTTP(w, r)
		mu.Lock()
		inFlight--
		mu.Unlock()
	}))
	n, _ := startNode(t, pool, node.Config{Workers: 4, Worker: queue.WorkerConfig{Concurrency: 8}})
	limit := 3
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo",
		Args: map[string]string{"base_url": base}, Settings: crawl.Overrides{Concurrency: &limit}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, time.Minute)
	if r.State != "succeeded" || r.Stats.Items != int64(site.Expected().Items) {
		t.Fatalf("run %s with %d items, want %d", r.State, r.Stats.Items, site.Expected().Items)
	}
	mu.Lock()
	defer mu.Unlock()
	if most > limit || most < 2 {
		t.Fatalf("at most %d requests in flight at once; want between 2 and the spider's concurrency %d", most, limit)
	}
}
