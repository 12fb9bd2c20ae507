package crawl_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/items"
	"crawlq/internal/maintain"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

// Runs that end in real time. Time is the point of these tests: the host limits are the spider's
// defaults (a first pause of 1 s doubling to 1 min, a start down limit of 1 min, a down limit of
// 10 min), and maintenance passes run beside the crawl every 10 s, as they run in production
// every minute. The other truth tests shrink every limit to milliseconds and never cross a pass.

// demoDefaults is the demo spider with the default retry settings.
const demoDefaults = `
name: demo
start_urls: [http://127.0.0.1:8088/]
allowed_domains: [127.0.0.1]
follow:
  - css: a
items:
  - match: '/catalogue/item-\d+\.html$'
    css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
      title: {css: h1.title, required: true}
      price: {css: p.price, required: true}
concurrency: 8
`

// maintainEvery runs a maintenance pass of n's tables every interval until the test ends, and
// returns the number of passes that ran so far.
func maintainEvery(t *testing.T, n *node.Node, interval time.Duration) func() int64 {
	t.Helper()
	svc, err := maintain.New(n.Queue, n.Crawler, maintain.Config{Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			res, err := svc.RunOnce(ctx, time.Now())
			if err != nil && ctx.Err() == nil {
				t.Errorf("maintenance pass: %v", err)
			}
			if res.Ran {
				ran.Add(1)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ran.Load
}

// A start URL whose host never answers, with the default spider settings: the run ends failed
// within the start down limit and a few probes, however many maintenance passes run meanwhile.
// A pass used to delete the paused host's row, resetting its streak, so the run never ended.
func TestDeadStartURLWithDefaultsFailsAcrossMaintenancePasses(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	pool := dbtest.Pool(t)
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, demoDefaults), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 2}})
	passes := maintainEvery(t, n, 10*time.Second)
	start := time.Now()
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, 150*time.Second)
	took := time.Since(start)
	if r.State != crawl.StateFailed || r.DeadPages != 1 || len(r.FailedPages) != 1 {
		t.Fatalf("run %s, dead %d, failed %v after %s; want failed with the start page dead", r.State, r.DeadPages, r.FailedPages, took)
	}
	if e := r.FailedPages[0].Error; !strings.Contains(e, "refused") || !strings.Contains(e, "past its down limit of 1m0s") {
		t.Errorf("failed page error %q: want the connection error and the start down limit", e)
	}
	if p := passes(); p < 3 {
		t.Errorf("%d maintenance passes ran during the %s the run took; want at least 3", p, took)
	}
	t.Logf("failed after %s with %d maintenance passes: %s", took.Round(time.Second), passes(), r.FailedPages[0].Error)
}

// hostStreak is the failing streak and start of the outage on record for the host of base.
func hostStreak(t *testing.T, n *node.Node, base string) (int, time.Time) {
	t.Helper()
	var streak int
	var since time.Time
	err := n.Crawler.Pool().QueryRow(context.Background(),
		`SELECT fail_streak, COALESCE(down_since, '-infinity') FROM crawlq_domain WHERE host = $1`,
		strings.TrimPrefix(base, "http://")).Scan(&streak, &since)
	if err != nil {
		t.Fatalf("the host's row: %v", err)
	}
	return streak, since
}

// A site down for longer than two maintenance passes, with the default host limits: the passes
// keep the paused host's streak (the outage is one streak from start to end) and the run ends
// succeeded with every item, no page having counted an attempt for the outage.
func TestOutageAcrossMaintenancePassesLosesNothing(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site := demosite.New(demosite.Config{Items: 240, PerPage: 12, SlowDelay: time.Millisecond})
	sw := serveSwitchable(t, slowSite(site, 5*time.Millisecond))
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, demoDefaults), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 8}})
	passes := maintainEvery(t, n, 10*time.Second)
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": sw.base()}})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "len(site.Hits()) > 60", func() bool { return len(site.Hits()) > 60 })
	sw.down()
	testwait.Until(t, "streak >= 1", func() bool { streak, _ := hostStreakOr0(n, sw.base()); return streak >= 1 })
	_, since := hostStreak(t, n, sw.base())
	p0 := passes()
	testwait.Until(t, "passes() >= p0+2", func() bool { return passes() >= p0+2 })
	streak, since2 := hostStreak(t, n, sw.base())
	if !since2.Equal(since) || streak < 4 {
		t.Errorf("after two maintenance passes the host's streak is %d since %s (was since %s): the passes reset the outage", streak, since2, since)
	}
	sw.up()
	r := waitRun(t, n.Crawler, s.RunID, 2*time.Minute)
	want := int64(site.Expected().Items)
	stored, err := items.CountItems(context.Background(), pool, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != crawl.StateSucceeded || r.DeadPages != 0 || stored != want {
		// Say what is missing: a run that succeeds short of its items is a loss, and it was seen
		// once under heavy load; the paths the site never served and the run's stats tell where.
		hits := site.Hits()
		var never []string
		for _, p := range site.Expected().Paths {
			if hits[p] == 0 {
				never = append(never, p)
			}
		}
		t.Fatalf("run %s, %d dead pages, %d items stored; want succeeded with %d (stats: %d pages, %d items, %d errors, %v; paths never served: %v)",
			r.State, r.DeadPages, stored, want, r.Stats.Pages, r.Stats.Items, r.Stats.Errors, r.Stats.ErrorsByKind, never)
	}
	if n := attemptsNotCutOff(t, n, s.RunID); n > 0 {
		t.Errorf("%d page jobs used more than one attempt for another reason than a request cut off", n)
	}
}

// hostStreakOr0 is hostStreak for a host that may have no row yet.
func hostStreakOr0(n *node.Node, base string) (int, error) {
	var streak int
	err := n.Crawler.Pool().QueryRow(context.Background(),
		`SELECT COALESCE(max(fail_streak), 0) FROM crawlq_domain WHERE host = $1`, strings.TrimPrefix(base, "http://")).Scan(&streak)
	return streak, err
}

// failingSite answers every request with status (and Retry-After, when set) while it is failing,
// else passes it to h: a site whose servers are up but overloaded.
type failingSite struct {
	h          http.Handler
	status     int
	retryAfter string
	mu         sync.Mutex
	failing    bool
	failed     int
}

func (f *failingSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	failing := f.failing
	if failing {
		f.failed++
	}
	f.mu.Unlock()
	if !failing {
		f.h.ServeHTTP(w, r)
		return
	}
	if f.retryAfter != "" {
		w.Header().Set("Retry-After", f.retryAfter)
	}
	http.Error(w, "overloaded", f.status)
}

func (f *failingSite) set(failing bool) {
	f.mu.Lock()
	f.failing = failing
	f.mu.Unlock()
}

func (f *failingSite) answered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// A site answering 503, or 429 with Retry-After, for a minute in the middle of a crawl, with the
// default spider settings: the host pauses as it does when its connections fail, its probes count
// no attempt, and the run ends succeeded with every item and no page past its first attempt.
func TestOverloadedSiteForAMinuteLosesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
	}{{"503", http.StatusServiceUnavailable, ""}, {"429-retry-after", http.StatusTooManyRequests, "2"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			site := demosite.New(demosite.Config{Items: 240, PerPage: 12, SlowDelay: time.Millisecond})
			fs := &failingSite{h: slowSite(site, 5*time.Millisecond), status: tc.status, retryAfter: tc.retryAfter}
			sw := serveSwitchable(t, fs)
			n, _ := startNode(t, pool, node.Config{Spiders: registry(t, demoDefaults), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 8}})
			s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": sw.base()}})
			if err != nil {
				t.Fatal(err)
			}
			testwait.Until(t, "len(site.Hits()) > 60", func() bool { return len(site.Hits()) > 60 })
			fs.set(true)
			failFrom := time.Now()
			testwait.Until(t, "time.Since(failFrom) >= time.Minute", func() bool { return time.Since(failFrom) >= time.Minute })
			fs.set(false)
			r := waitRun(t, n.Crawler, s.RunID, 3*time.Minute)
			want := int64(site.Expected().Items)
			stored, err := items.CountItems(context.Background(), pool, s.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if r.State != crawl.StateSucceeded || r.DeadPages != 0 || stored != want {
				t.Fatalf("run %s, %d dead pages, %d items stored; want succeeded with %d", r.State, r.DeadPages, stored, want)
			}
			if m := maxPageAttempt(t, n, s.RunID); m > 1 {
				t.Errorf("a page reached attempt %d: the overload cost pages attempts", m)
			}
			if r.Stats.HostPauses < 1 {
				t.Errorf("host pauses %d: want the host pause recorded", r.Stats.HostPauses)
			}
			t.Logf("%d answers of %d during the minute; stats %+v", fs.answered(), tc.status, r.Stats.ErrorsByKind)
		})
	}
}
