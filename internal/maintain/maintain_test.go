package maintain_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/fetch"
	"crawlq/internal/maintain"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
	"crawlq/internal/testwait"
)

func TestConfigRejectsBadValues(t *testing.T) {
	t.Parallel()
	base := maintain.Config{}.WithDefaults()
	if err := base.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for field, mod := range map[string]func(*maintain.Config){
		"Succeeded":    func(c *maintain.Config) { c.Succeeded = -time.Hour },
		"Cancelled":    func(c *maintain.Config) { c.Cancelled = time.Second },
		"Dead":         func(c *maintain.Config) { c.Dead = -1 },
		"RunData":      func(c *maintain.Config) { c.RunData = time.Second },
		"IdleHosts":    func(c *maintain.Config) { c.IdleHosts = 30 * time.Minute },
		"Interval":     func(c *maintain.Config) { c.Interval = -time.Minute },
		"Budget":       func(c *maintain.Config) { c.Budget = -1 },
		"QueryTimeout": func(c *maintain.Config) { c.QueryTimeout = time.Microsecond },
		"Batch":        func(c *maintain.Config) { c.Batch = 1_000_000 },
	} {
		c := base
		mod(&c)
		err := c.Validate()
		if !errors.Is(err, maintain.ErrInvalid) || !strings.Contains(err.Error(), ": "+field+" ") {
			t.Errorf("%s: got %v, want ErrInvalid naming the field", field, err)
		}
	}
	if _, err := maintain.New(nil, nil, maintain.Config{}); !errors.Is(err, maintain.ErrInvalid) {
		t.Errorf("New without a queue client: %v", err)
	}
}

// site is a small site of three pages and two item pages; home links to the extra links, the
// item page /p/2 (found last) to the tail links. /flaky answers 503 while failing is set, and
// /hang holds its request until release is closed. It counts every request by path.
type site struct {
	base    string
	failing atomic.Bool
	release chan struct{}
	mu      sync.Mutex
	hits    map[string]int
}

func newSite(t *testing.T, links, tail []string) *site {
	t.Helper()
	s := &site{release: make(chan struct{}), hits: map[string]int{}}
	s.failing.Store(true)
	page := func(w http.ResponseWriter, title string, links ...string) {
		fmt.Fprintf(w, "<html><body><h1>%s</h1>", title)
		for _, l := range links {
			fmt.Fprintf(w, `<a href="%s">%s</a> `, l, l)
		}
		fmt.Fprint(w, "</body></html>")
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nAllow: /\n")
		case "/":
			page(w, "home", append([]string{"/a", "/p/1"}, links...)...)
		case "/a":
			page(w, "a", "/", "/p/1", "/p/2")
		case "/flaky":
			if s.failing.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			// Everything it links to but /p/new was fetched before it died.
			page(w, "flaky", "/", "/a", "/p/1", "/p/2", "/p/new")
		case "/hang":
			select {
			case <-s.release:
			case <-r.Context().Done():
			}
			page(w, "hang")
		case "/p/2":
			page(w, "2", tail...)
		default:
			page(w, strings.TrimPrefix(r.URL.Path, "/p/"))
		}
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	s.base = "http://" + l.Addr().String()
	return s
}

func (s *site) count() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.hits {
		out[k] = v
	}
	return out
}

// The retry backoff is milliseconds, not the default 1 s doubling: /flaky's five attempts then
// take milliseconds rather than 15 s, and what these tests check is what maintenance deletes.
const spec = `
name: m
start_urls: [http://127.0.0.1/]
follow: [{css: a}]
delay: 1ms
retry: {backoff: 10ms, max_backoff: 20ms}
items:
  - match: '/p/'
    key: title
    fields:
      title: {css: h1, required: true}
`

func registry(t *testing.T) *spider.Registry {
	t.Helper()
	s, err := spider.ParseSpec([]byte(spec), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spider.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	reg := spider.NewRegistry()
	if err := reg.Register(sp); err != nil {
		t.Fatal(err)
	}
	return reg
}

// startNode runs a worker process's node until the test ends or stop is called; it reports the
// runs it finishes on finished.
func startNode(t *testing.T, pool *pgxpool.Pool, finished chan<- int64) (n *node.Node, stop func()) {
	t.Helper()
	n, err := node.New(node.Config{Pool: pool, Spiders: registry(t), Workers: 1, Fetch: fetch.Config{AllowLoopback: true},
		Worker:   queue.WorkerConfig{Concurrency: 8, StopGrace: 100 * time.Millisecond}, // the hanging page need not finish
		Queue:    queue.Config{RetryBase: 5 * time.Millisecond, RetryMax: 10 * time.Millisecond},
		OnFinish: func(id int64, _ string) { finished <- id }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); n.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-stopped }) }
	t.Cleanup(stop)
	return n, stop
}

// rows counts what a run has in each table maintenance deletes from: once counts its once keys,
// on its page jobs (which are also in jobs) and stored apart.
type rows struct{ once, robots, stats, jobs, dead, items int }

func count(t *testing.T, pool *pgxpool.Pool, run int64) rows {
	t.Helper()
	var r rows
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM crawlq_job_once WHERE parent_id = $1) + (SELECT count(*) FROM crawlq_job WHERE parent_id = $1 AND once_h IS NOT NULL),
		(SELECT count(*) FROM crawlq_robots WHERE run_id = $1),
		(SELECT count(*) FROM crawlq_run_stat WHERE run_id = $1),
		(SELECT count(*) FROM crawlq_job WHERE parent_id = $1),
		(SELECT count(*) FROM crawlq_job WHERE parent_id = $1 AND state = 'dead'),
		(SELECT count(*) FROM crawlq_item WHERE run_id = $1)`, run).Scan(&r.once, &r.robots, &r.stats, &r.jobs, &r.dead, &r.items)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func scalar(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// pass runs one maintenance pass as of now. The lease row is reset first: the passes of a test
// follow each other closer than any Interval, and the lease itself has its own test.
func pass(t *testing.T, svc *maintain.Service, pool *pgxpool.Pool, now time.Time) maintain.Result {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `DELETE FROM crawlq_leader`); err != nil {
		t.Fatal(err)
	}
	res, err := svc.RunOnce(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Ran || res.Partial {
		t.Fatalf("pass did not run to the end: %+v", res)
	}
	return res
}

// Maintenance deletes exactly what it should: finished jobs past their state's window; the once
// keys, robots.txt copies and stat rows of a finished run past the run window, and nothing of a
// live run or of a run with a dead page; and a redrive of that dead page, after the window, fetches
// nothing the run had fetched. Time moves through RunOnce's now, not by waiting.
func TestMaintenanceDeletesExactlyWhatItShould(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	finished := make(chan int64, 10)
	n, stop := startNode(t, pool, finished)
	schedule := func(s *site) int64 {
		t.Helper()
		r, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "m", Args: map[string]string{"base_url": s.base}})
		if err != nil {
			t.Fatal(err)
		}
		return r.RunID
	}
	waitFinished := func(id int64) {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			select {
			case got := <-finished:
				if got == id {
					return
				}
				t.Fatalf("run %d finished, want %d", got, id)
			case <-timeout:
				t.Fatalf("run %d not finished within a minute", id)
			}
		}
	}

	// The live run's last page hangs on a host of its own: a host's requests are serial (the
	// spider has a delay), and the hanging one must not hold back the run's other pages.
	hang := newSite(t, nil, nil)
	done, done2, dead, live := newSite(t, nil, nil), newSite(t, nil, nil), newSite(t, []string{"/flaky"}, nil), newSite(t, nil, []string{hang.base + "/hang"})
	t.Cleanup(func() { close(hang.release) }) // before the node stops (cleanups run last first)
	runDone := schedule(done)
	waitFinished(runDone)
	runDone2 := schedule(done2)
	waitFinished(runDone2)
	runDead := schedule(dead)
	waitFinished(runDead)
	runLive := schedule(live)
	// The live run is live for good: its /hang request (found last) waits for the test's end.
	// Wait until it has fetched everything else and its /hang request has reached the hanging
	// site (so that site's politeness row exists: the job alone may not have started yet), so its
	// rows no longer change.
	testwait.For(t, "the live run reaches its hanging page", func() (string, bool) {
		c := count(t, pool, runLive)
		if c.items >= 2 && hang.count()["/hang"] > 0 && scalar(t, pool, `SELECT count(*) FROM crawlq_job WHERE parent_id = $1 AND state <> 'succeeded'`, runLive) == 1 {
			return "", true
		}
		var dump string
		if err := pool.QueryRow(context.Background(), `SELECT string_agg(id || ' ' || state || ' ' || args::text || ' ' || COALESCE(errors::text, ''), E'\n' ORDER BY id) FROM crawlq_job WHERE parent_id = $1`, runLive).Scan(&dump); err != nil {
			dump = "(jobs not readable: " + err.Error() + ")"
		}
		return fmt.Sprintf("%+v\n%s\nhits %v", c, dump, live.count()), false
	})

	before := map[int64]rows{}
	for _, id := range []int64{runDone, runDone2, runDead, runLive} {
		before[id] = count(t, pool, id)
		if c := before[id]; c.once == 0 || c.robots == 0 || c.stats == 0 || c.items == 0 {
			t.Fatalf("run %d left nothing to delete: %+v", id, c)
		}
	}
	if before[runDead].dead != 1 {
		t.Fatalf("the flaky page did not die: %+v", before[runDead])
	}
	hosts := scalar(t, pool, `SELECT count(*) FROM crawlq_domain`)
	if hosts != 5 {
		t.Fatalf("%d politeness rows, want 5 (one per site)", hosts)
	}
	// The job window takes finished jobs without once keys; a run's page jobs carry its keys and go
	// with them.
	finishedJobs := scalar(t, pool, `SELECT count(*) FROM crawlq_job WHERE state IN ('succeeded', 'cancelled') AND once_h IS NULL`)
	runDoneRow, err := n.Crawler.Get(context.Background(), runDone)
	if err != nil {
		t.Fatal(err)
	}

	svc, err := maintain.New(n.Queue, n.Crawler, maintain.Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()

	// Within every window: nothing goes.
	if res := pass(t, svc, pool, now); res.Deleted() != 0 {
		t.Fatalf("pass within the windows deleted %+v", res)
	}

	// Past the 24h windows, within the dead jobs' 7 days.
	res := pass(t, svc, pool, now.Add(25*time.Hour))
	if res.Jobs != finishedJobs || res.Runs != 2 || res.Hosts != 5 {
		t.Errorf("pass after 25h: %+v; want %d jobs, 2 runs, 5 hosts", res, finishedJobs)
	}
	for _, id := range []int64{runDone, runDone2} {
		if c := count(t, pool, id); c != (rows{items: before[id].items}) {
			t.Errorf("finished run %d after the window: %+v; want only its %d items", id, c, before[id].items)
		}
	}
	if c := count(t, pool, runDead); c.once != before[runDead].once || c.robots != before[runDead].robots ||
		c.stats != before[runDead].stats || c.jobs != c.once || c.dead != 1 {
		t.Errorf("run with a dead page after the window: %+v, before %+v; want all kept but its jobs without once keys", c, before[runDead])
	}
	if c := count(t, pool, runLive); c.once != before[runLive].once || c.robots != before[runLive].robots ||
		c.stats != before[runLive].stats || c.jobs != c.once {
		t.Errorf("live run after the window: %+v, before %+v; want all kept but its jobs without once keys", c, before[runLive])
	}
	if got, err := n.Crawler.Get(context.Background(), runDone); err != nil || got.Stats.Pages != runDoneRow.Stats.Pages ||
		got.Stats.Items != runDoneRow.Stats.Items || got.State != runDoneRow.State {
		t.Errorf("purged run reads %+v (%v), before %+v", got, err, runDoneRow)
	}
	checkCounts(t, n.Queue, pool)

	// The dead page, redriven after the window, finds the run's pages again: only the one it had
	// never found is fetched. It runs in a new process, which has not seen the run's links (a
	// process remembers those it queued, and would skip them without asking the database).
	stop()
	n, _ = startNode(t, pool, finished)
	hitsBefore := dead.count()
	dead.failing.Store(false)
	ids, err := n.Queue.Redrive(context.Background(), "crawl", nil, 10)
	if err != nil || len(ids) != 1 {
		t.Fatalf("redrive: %v %v", ids, err)
	}
	testwait.Until(t, "the redriven page and what it found are done", func() bool {
		return scalar(t, pool, `SELECT count(*) FROM crawlq_job WHERE parent_id = $1 AND state NOT IN ('succeeded')`, runDead) == 0
	})
	hitsAfter := dead.count()
	for path, n := range hitsAfter {
		want := hitsBefore[path]
		switch path {
		case "/flaky", "/p/new":
			want++
		}
		if n != want {
			t.Errorf("%s fetched %d times in all, %d before the redrive; want %d", path, n, hitsBefore[path], want)
		}
	}
	if hitsAfter["/p/new"] != 1 {
		t.Errorf("/p/new fetched %d times, want once", hitsAfter["/p/new"])
	}

	// Nothing of it is dead any more, so the next pass past the window purges it.
	res = pass(t, svc, pool, now.Add(25*time.Hour))
	if c := count(t, pool, runDead); res.Runs != 1 || c.once != 0 || c.robots != 0 || c.stats != 0 {
		t.Errorf("run after its redrive finished: pass %+v, rows %+v; want purged", res, c)
	}
	// Much later, a live run still keeps everything.
	pass(t, svc, pool, now.Add(30*24*time.Hour))
	if c := count(t, pool, runLive); c.once != before[runLive].once || c.robots != before[runLive].robots || c.stats != before[runLive].stats {
		t.Errorf("live run after 30 days: %+v, before %+v", c, before[runLive])
	}
	checkCounts(t, n.Queue, pool)
}

// A run whose dead page is never redriven keeps its once keys until the dead job itself goes, 7
// days on by default; then everything of it goes in the same pass.
func TestDeadRetentionEndsARunsKeys(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	finished := make(chan int64, 1)
	n, _ := startNode(t, pool, finished)
	s := newSite(t, []string{"/flaky"}, nil)
	r, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "m", Args: map[string]string{"base_url": s.base}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished:
	case <-time.After(time.Minute):
		t.Fatal("run not finished within a minute")
	}
	svc, err := maintain.New(n.Queue, n.Crawler, maintain.Config{Batch: 2}) // small batches: many statements per pass
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	before := count(t, pool, r.RunID)
	pass(t, svc, pool, now.Add(6*24*time.Hour))
	if c := count(t, pool, r.RunID); c.once != before.once || c.dead != 1 {
		t.Fatalf("after 6 days: %+v, before %+v", c, before)
	}
	res := pass(t, svc, pool, now.Add(8*24*time.Hour))
	// The dead job goes with the dead window, its key with it; the run's other keys with the run.
	if c := count(t, pool, r.RunID); c != (rows{items: before.items}) || res.Runs != 1 || res.OnceKeys != before.once-before.dead {
		t.Fatalf("after 8 days: rows %+v, pass %+v; want only the items left", c, res)
	}
	if ids, err := n.Queue.Redrive(context.Background(), "crawl", nil, 10); err != nil || len(ids) != 0 {
		t.Fatalf("redrive after the dead job went: %v %v", ids, err)
	}
	checkCounts(t, n.Queue, pool)
}

// checkCounts compares the queue's state counts with the job rows: deletes record their count
// changes.
func checkCounts(t *testing.T, q *queue.Client, pool *pgxpool.Pool) {
	t.Helper()
	st, err := q.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		got := map[string]int64{"succeeded": s.Succeeded, "dead": s.Dead, "cancelled": s.Cancelled, "running": s.Running}
		for state, n := range got {
			if want := scalar(t, pool, `SELECT count(*) FROM crawlq_job WHERE queue = $1 AND state = $2::crawlq_job_state`, s.Queue, state); int64(want) != n {
				t.Errorf("queue %s: %s counted %d, rows %d", s.Queue, state, n, want)
			}
		}
	}
}

// One pass at a time and at most one per Interval across processes; a lease whose holder died
// expires and another process takes it.
func TestLease(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	q := queue.New(pool, queue.Config{})
	a, err := maintain.New(q, nil, maintain.Config{Holder: "a", Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b, err := maintain.New(q, nil, maintain.Config{Holder: "b", Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if r, err := a.RunOnce(ctx, time.Now()); err != nil || !r.Ran {
		t.Fatalf("first pass: %+v %v", r, err)
	}
	for _, s := range []*maintain.Service{a, b} {
		if r, err := s.RunOnce(ctx, time.Now()); err != nil || r.Ran {
			t.Fatalf("a pass within the interval ran: %+v %v", r, err)
		}
	}
	// A holder that died mid-pass: its lease is still valid, so nobody runs.
	if _, err := pool.Exec(ctx, `UPDATE crawlq_leader SET holder = 'dead', expires_at = now() + interval '1 hour', next_at = '-infinity'`); err != nil {
		t.Fatal(err)
	}
	if r, err := b.RunOnce(ctx, time.Now()); err != nil || r.Ran {
		t.Fatalf("a pass ran while another held the lease: %+v %v", r, err)
	}
	// Its lease expired: b takes over.
	if _, err := pool.Exec(ctx, `UPDATE crawlq_leader SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if r, err := b.RunOnce(ctx, time.Now()); err != nil || !r.Ran {
		t.Fatalf("b after the dead holder's lease expired: %+v %v", r, err)
	}
	var holder string
	if err := pool.QueryRow(ctx, `SELECT holder FROM crawlq_leader`).Scan(&holder); err != nil || holder != "b" {
		t.Fatalf("holder %q %v", holder, err)
	}
}

// A pass stopped while it takes the lease leaves the lease free. The statement that takes it can
// take it on the server after its caller has given up (pgx abandons the connection; a backend
// waiting for a lock does not notice): a process stopped at that moment, as a soak's node was,
// left the lease held for its ttl and every other process's passes waiting.
func TestAPassStoppedWhileTakingTheLeaseLeavesItFree(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	const app = "maintain_lease_stop_test" // this test's backends, apart from the others'
	pool := dbtest.Open(t, url+"&application_name="+app, 4)
	ctx := context.Background()
	s, err := maintain.New(queue.New(pool, queue.Config{}), nil, maintain.Config{Holder: "stopping", Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A free lease whose row another transaction has locked: the take waits for it.
	if _, err := pool.Exec(ctx, `INSERT INTO crawlq_leader (name, holder, expires_at, next_at) VALUES ('maintain', 'before', now() - interval '1 second', '-infinity')`); err != nil {
		t.Fatal(err)
	}
	blocker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM crawlq_leader WHERE name = 'maintain' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	taking := func(waiting string) int {
		return scalar(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND pid <> pg_backend_pid()
			AND query LIKE '%INSERT INTO crawlq_leader%' AND ($2 = '' OR wait_event_type = $2)`, app, waiting)
	}
	pctx, stop := context.WithCancel(ctx)
	ran := make(chan maintain.Result, 1)
	go func() {
		r, _ := s.RunOnce(pctx, time.Now())
		ran <- r
	}()
	testwait.Until(t, "the pass's take of the lease waiting for the row lock", func() bool { return taking("Lock") == 1 })
	stop()
	if err := blocker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-ran
	testwait.Until(t, "no statement taking the lease", func() bool { return taking("") == 0 })
	var holder string
	var held bool
	if err := pool.QueryRow(ctx, `SELECT holder, expires_at > now() FROM crawlq_leader WHERE name = 'maintain'`).Scan(&holder, &held); err != nil {
		t.Fatal(err)
	}
	if held {
		t.Fatalf("the stopped pass left the lease held by %q", holder)
	}
}

// Start runs passes by itself and Stop waits for the loop; both are safe to call twice.
func TestStartStop(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	q := queue.New(pool, queue.Config{})
	s, err := maintain.New(q, nil, maintain.Config{Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.TestSignals.PassDone.Init()
	s.Start(context.Background())
	s.Start(context.Background())
	s.TestSignals.PassDone.WaitFor(t, "a pass of Start's loop that ran", func(p maintain.PassDone) bool {
		if p.Err != nil {
			t.Fatalf("pass: %v", p.Err)
		}
		return p.Result.Ran
	})
	if n := scalar(t, pool, `SELECT count(*) FROM crawlq_leader`); n == 0 {
		t.Fatal("a pass ran without taking the lease")
	}
	s.Stop()
	s.Stop()
}

// A pass deletes the URL states kept past their spider's state_ttl, in batches, and no other.
func TestMaintenanceExpiresURLStates(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	now := time.Now()
	if _, err := pool.Exec(context.Background(), `INSERT INTO crawlq_url_state (spider, line, url, run_id, fetched_at, keep_until, status)
		SELECT 's', '', 'http://x/' || i, 1, $1::timestamptz, $1::timestamptz + CASE WHEN i <= 25 THEN interval '-1 second' ELSE interval '1 hour' END, 200
		FROM generate_series(1, 30) i`, now); err != nil {
		t.Fatal(err)
	}
	svc, err := maintain.New(queue.New(pool, queue.Config{}), nil, maintain.Config{Interval: time.Hour, Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	res := pass(t, svc, pool, now)
	if left := scalar(t, pool, `SELECT count(*) FROM crawlq_url_state`); res.URLStates != 25 || left != 5 {
		t.Errorf("pass deleted %d URL states, %d left; want the 25 expired deleted and 5 left", res.URLStates, left)
	}
}
