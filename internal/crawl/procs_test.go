package crawl_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"crawlq/internal/browser"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

// workerProc is a crawl worker in its own process: this test binary re-run as
// TestHelperCrawlProcess. It prints "FINISHED <run>" for each run it finishes.
type workerProc struct {
	cmd      *exec.Cmd
	finished atomic.Int32
	done     chan struct{}
}

func startWorkerProc(t *testing.T, url string, workers int, lease time.Duration, env ...string) *workerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCrawlProcess$")
	cmd.Env = append(append(os.Environ(), "CRAWLQ_HELPER_URL="+url, fmt.Sprintf("CRAWLQ_HELPER_WORKERS=%d", workers),
		"CRAWLQ_HELPER_LEASE="+lease.String()), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &workerProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "FINISHED ") {
				p.finished.Add(1)
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() { p.stop(syscall.SIGKILL) })
	return p
}

func (p *workerProc) stop(sig syscall.Signal) {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(sig)
	}
	<-p.done
}

// TestHelperCrawlProcess is the body of the worker subprocesses.
func TestHelperCrawlProcess(t *testing.T) {
	url := os.Getenv("CRAWLQ_HELPER_URL")
	if url == "" {
		return // not a subprocess
	}
	var workers int
	fmt.Sscan(os.Getenv("CRAWLQ_HELPER_WORKERS"), &workers)
	lease, _ := time.ParseDuration(os.Getenv("CRAWLQ_HELPER_LEASE"))
	pool := dbtest.Open(t, url, 20)
	cfg := node.Config{Pool: pool, Workers: workers, MaintainEvery: 200 * time.Millisecond, Fetch: fetch.Config{AllowLoopback: true},
		Worker:   queue.WorkerConfig{Concurrency: 8, Lease: lease, StopGrace: time.Second},
		OnFinish: func(id int64, _ string) { fmt.Printf("FINISHED %d\n", id) }}
	if spec := os.Getenv("CRAWLQ_HELPER_BROWSER_SPEC"); spec != "" { // a runner: renders the browser spider's pages
		cfg.Spiders, cfg.Queues, cfg.Browser = registry(t, spec), []string{"crawl", "long"}, &browser.Config{TabsPerBrowser: 2}
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signalContext()
	defer stop()
	n.Run(ctx)
}

// A node in this process that runs no workers: it schedules and sweeps.
func controlNode(t *testing.T, url string, finished *atomic.Int32) *node.Node {
	t.Helper()
	pool := dbtest.Open(t, url, 8)
	n, _ := startNode(t, pool, node.Config{Queues: []string{"control"}, MaintainEvery: 200 * time.Millisecond,
		OnFinish: func(int64, string) { finished.Add(1) }})
	return n
}

// Four workers in two processes crawl the demo site: exactly the expected items, every URL
// fetched once, the run finished exactly once.
func TestDemoCrawlTwoProcesses(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	site, base := serveDemo(t, demosite.Config{Items: 400, SlowDelay: 100 * time.Millisecond})
	var localFinish atomic.Int32
	ctl := controlNode(t, url, &localFinish)
	p1 := startWorkerProc(t, url, 2, 30*time.Second)
	p2 := startWorkerProc(t, url, 2, 30*time.Second)
	s, err := ctl.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, ctl.Crawler, s.RunID, 2*time.Minute)
	exp := site.Expected()
	if r.State != "succeeded" || r.Stats.Items != int64(exp.Items) {
		t.Fatalf("run %s with %d items, want succeeded with %d", r.State, r.Stats.Items, exp.Items)
	}
	checkHits(t, site)
	p1.stop(syscall.SIGTERM)
	p2.stop(syscall.SIGTERM)
	// The processes have exited, so their reports are in; the control node's OnFinish runs after
	// the finishing transaction commits, which waitRun may see first.
	testwait.Until(t, "the finish reported", func() bool { return localFinish.Load()+p1.finished.Load()+p2.finished.Load() > 0 })
	if total := localFinish.Load() + p1.finished.Load() + p2.finished.Load(); total != 1 {
		t.Fatalf("the run was finished %d times", total)
	}
	if p1.finished.Load()+p2.finished.Load() == 0 && localFinish.Load() == 0 {
		t.Fatal("nobody finished the run")
	}
}

// slowSite delays every request a little so a crawl lasts long enough to kill a worker in it.
func slowSite(site *demosite.Site, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(d) // the server's latency, not a wait of the test
		site.ServeHTTP(w, r)
	})
}

// A worker process killed with SIGKILL mid-crawl: its leased jobs come back after the lease
// and the run still ends with exactly the expected items.
func TestCrawlSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	site := demosite.New(demosite.Config{Items: 400, SlowDelay: 50 * time.Millisecond})
	base := serveHandler(t, slowSite(site, 10*time.Millisecond))
	var localFinish atomic.Int32
	ctl := controlNode(t, url, &localFinish)
	victim := startWorkerProc(t, url, 2, 2*time.Second)
	survivor := startWorkerProc(t, url, 1, 2*time.Second)
	s, err := ctl.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "more than 120 requests reached the site", func() bool {
		var n int64
		for _, h := range site.Hits() {
			n += h
		}
		return n > 120
	})
	victim.stop(syscall.SIGKILL)
	r := waitRun(t, ctl.Crawler, s.RunID, 2*time.Minute)
	exp := site.Expected()
	got, err := items.CountItems(context.Background(), ctl.Crawler.Pool(), s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "succeeded" || r.Stats.Items != int64(exp.Items) || got != int64(exp.Items) {
		t.Fatalf("run %s: stats %d items, sink %d; want succeeded with %d", r.State, r.Stats.Items, got, exp.Items)
	}
	survivor.stop(syscall.SIGTERM)
	if total := localFinish.Load() + survivor.finished.Load() + victim.finished.Load(); total != 1 {
		t.Fatalf("the run was finished %d times", total)
	}
}

func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: h}
	l, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// serveArrivals serves h on loopback and records when each request arrived: arrivals returns
// them so far, in order.
func serveArrivals(t *testing.T, h http.Handler) (base string, arrivals func() []time.Time) {
	t.Helper()
	var mu sync.Mutex
	var at []time.Time
	base = serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	return base, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(at)
	}
}

// checkGaps fails t when two requests arrived closer than delay.
func checkGaps(t *testing.T, arrivals []time.Time, delay time.Duration) {
	t.Helper()
	for i := 1; i < len(arrivals); i++ {
		if gap := arrivals[i].Sub(arrivals[i-1]); gap < delay {
			t.Fatalf("requests %d and %d arrived %s apart, less than the %s delay", i-1, i, gap, delay)
		}
	}
}

// Politeness across two processes: requests to one host are never closer than the delay,
// measured at the server.
func TestPolitenessAcrossProcesses(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	site := demosite.New(demosite.Config{Items: 16, PerPage: 8, SlowDelay: time.Millisecond})
	base, arrivals := serveArrivals(t, site)
	var localFinish atomic.Int32
	ctl := controlNode(t, url, &localFinish)
	startWorkerProc(t, url, 2, 30*time.Second)
	startWorkerProc(t, url, 2, 30*time.Second)
	delay := crawl.Duration(150 * time.Millisecond)
	s, err := ctl.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo",
		Args: map[string]string{"base_url": base}, Settings: crawl.Overrides{Delay: &delay}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, ctl.Crawler, s.RunID, 2*time.Minute)
	if r.State != "succeeded" || r.Stats.Items != int64(site.Expected().Items) {
		t.Fatalf("run %s with %d items", r.State, r.Stats.Items)
	}
	at := arrivals()
	if len(at) < 20 {
		t.Fatalf("only %d requests", len(at))
	}
	checkGaps(t, at, time.Duration(delay))
}

// The browser spider on two runner processes (each with its own Chromium), one killed with
// SIGKILL mid-run: its leased pages come back after the lease and are rendered by the other,
// and the run ends with exactly the script-drawn items, each once, finished once.
func TestBrowserCrawlSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	site := demosite.New(demosite.Config{Items: 24, PerPage: 6})
	base := serveHandler(t, site)
	spec := demosite.JSSpec("js", true)
	var localFinish atomic.Int32
	pool := dbtest.Open(t, url, 8)
	ctl, _ := startNode(t, pool, node.Config{Spiders: registry(t, spec), Queues: []string{"control"}, MaintainEvery: 200 * time.Millisecond,
		OnFinish: func(int64, string) { localFinish.Add(1) }})
	victim := startWorkerProc(t, url, 1, 3*time.Second, "CRAWLQ_HELPER_BROWSER_SPEC="+spec)
	survivor := startWorkerProc(t, url, 1, 3*time.Second, "CRAWLQ_HELPER_BROWSER_SPEC="+spec)
	s, err := ctl.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "js", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "6 item pages drawn", func() bool {
		var n int64
		for p, h := range site.Hits() {
			if strings.HasPrefix(p, demosite.JSPrefix+"api/item-") {
				n += h
			}
		}
		return n >= 6
	})
	victim.stop(syscall.SIGKILL)
	r := waitRun(t, ctl.Crawler, s.RunID, 4*time.Minute)
	exp := site.JSExpected()
	got, err := items.CountItems(context.Background(), pool, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "succeeded" || r.Stats.Items != int64(exp.Items) || got != int64(exp.Items) {
		t.Fatalf("run %s: stats %d items, sink %d (%v); want succeeded with %d", r.State, r.Stats.Items, got, r.Stats.ErrorsByKind, exp.Items)
	}
	survivor.stop(syscall.SIGTERM)
	if total := localFinish.Load() + survivor.finished.Load() + victim.finished.Load(); total != 1 {
		t.Fatalf("the run was finished %d times", total)
	}
}
