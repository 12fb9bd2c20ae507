//go:build chaos

// Package chaos is crawlq's reliability suite (`make chaos`): worker processes killed with
// SIGKILL mid-crawl, PostgreSQL restarted mid-run, a stalling and failing item sink, and a burst
// of concurrent schedule calls against `crawlq local`. Each scenario runs on its own throwaway
// PostgreSQL cluster, checks the exactly-once promises in SQL, and reports its figures in the
// summary printed at the end (RELIABILITY.md quotes the last one).
package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/crawl"
	"crawlq/internal/demosite"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

// summary collects each scenario's figures; TestChaos prints them at the end.
type summary struct {
	mu    sync.Mutex
	lines []string
}

func (s *summary) add(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, fmt.Sprintf(format, args...))
}

func TestChaos(t *testing.T) {
	bin := buildCLI(t)
	sum := &summary{}
	start := time.Now()
	t.Run("WorkerChaos", func(t *testing.T) { workerChaos(t, bin, sum) })
	t.Run("DatabaseRestart", func(t *testing.T) { databaseRestart(t, bin, sum) })
	t.Run("URLState", func(t *testing.T) { urlStateChaos(t, bin, sum) })
	t.Run("SlowFailingSink", func(t *testing.T) { slowFailingSink(t, sum) })
	t.Run("Load", func(t *testing.T) { load(t, bin, sum) })
	var b strings.Builder
	fmt.Fprintf(&b, "\n==== crawlq chaos summary (%s, %s total) ====\n", time.Now().UTC().Format(time.RFC3339), time.Since(start).Round(time.Second))
	for _, l := range sum.lines {
		fmt.Fprintln(&b, l)
	}
	fmt.Print(b.String())
	if out := os.Getenv("CHAOS_SUMMARY"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// buildCLI builds bin/crawlq into a temp dir: the worker processes are the real CLI.
func buildCLI(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "crawlq")
	cmd := exec.Command("go", "build", "-o", out, "crawlq/cmd/crawlq")
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build crawlq: %v\n%s", err, b)
	}
	return out
}

// instrument adds triggers to the scenario's own database that record every transition of a
// run to a final state and of a job to succeeded, so "finished exactly once" and "succeeded once"
// are counted by the database itself rather than inferred from the final rows.
func instrument(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
CREATE TABLE chaos_run_final (run_id bigint, state text, at timestamptz DEFAULT clock_timestamp());
CREATE TABLE chaos_job_done (job_id bigint, parent_id bigint, kind text, url text);
CREATE FUNCTION chaos_run_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO chaos_run_final (run_id, state) VALUES (NEW.id, NEW.state::text); RETURN NULL; END $$;
CREATE TRIGGER chaos_run_final AFTER UPDATE ON crawlq_run FOR EACH ROW
  WHEN (OLD.finished_at IS DISTINCT FROM NEW.finished_at OR
        (OLD.state IS DISTINCT FROM NEW.state AND NEW.state::text IN ('succeeded','failed','cancelled')))
  EXECUTE FUNCTION chaos_run_final();
CREATE FUNCTION chaos_job_done() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO chaos_job_done VALUES (NEW.id, NEW.parent_id, NEW.kind, NEW.args->>'url'); RETURN NULL; END $$;
CREATE TRIGGER chaos_job_done AFTER UPDATE ON crawlq_job FOR EACH ROW
  WHEN (NEW.state::text = 'succeeded' AND OLD.state::text <> 'succeeded')
  EXECUTE FUNCTION chaos_job_done();`)
	if err != nil {
		t.Fatalf("instrument: %v", err)
	}
}

// workerProc is one `crawlq worker` process, restartable.
type workerProc struct {
	bin, url, logPath string
	args              []string
	mu                sync.Mutex
	cmd               *exec.Cmd
	done              chan struct{}
	starts            int
}

func newWorker(t *testing.T, bin, url string, i int, args ...string) *workerProc {
	t.Helper()
	w := &workerProc{bin: bin, url: url, args: args, logPath: filepath.Join(t.TempDir(), fmt.Sprintf("worker%d.log", i))}
	w.start(t)
	t.Cleanup(func() { w.kill(syscall.SIGKILL) })
	return w
}

func (w *workerProc) start(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	f, err := os.OpenFile(w.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// --allow-loopback: the demo site is on loopback, which a worker refuses by default.
	cmd := exec.Command(w.bin, append([]string{"worker", "--allow-loopback"}, w.args...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+w.url)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(done) }()
	w.cmd, w.done = cmd, done
	w.starts++
}

// kill signals the process and waits for it to exit; it reports whether it was still running.
func (w *workerProc) kill(sig syscall.Signal) bool {
	w.mu.Lock()
	cmd, done := w.cmd, w.done
	w.mu.Unlock()
	select {
	case <-done:
		return false
	default:
	}
	cmd.Process.Signal(sig)
	<-done
	return true
}

func (w *workerProc) exited() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// logSize is the length of the worker's log so far.
func (w *workerProc) logSize(t *testing.T) int64 {
	t.Helper()
	st, err := os.Stat(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// logSince returns what the worker logged past offset at.
func (w *workerProc) logSince(t *testing.T, at int64) string {
	t.Helper()
	f, err := os.Open(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, at, 1<<40))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// refused is how a worker's log shows a connection attempt the database refused (pgconn's dial
// error, within a claim, heartbeat or handler error).
const refused = "connect: connection refused"

// waitRefused waits until the log of every worker, past its offset in at, shows a refused
// connection, and returns when each did, measured from since. It fails the test after d.
func waitRefused(t *testing.T, ws []*workerProc, at []int64, since time.Time, d time.Duration) []time.Duration {
	t.Helper()
	saw := make([]time.Duration, len(ws))
	seen := make([]bool, len(ws))
	testwait.ForAtMost(t, d, "every worker logs a refused connection after the database stopped", func() (string, bool) {
		var left []string
		for i, w := range ws {
			if !seen[i] && strings.Contains(w.logSince(t, at[i]), refused) {
				seen[i], saw[i] = true, time.Since(since).Round(10*time.Millisecond)
			}
			if !seen[i] {
				left = append(left, fmt.Sprintf("worker %d, its log ending:\n%s", i, w.logTail()))
			}
		}
		return strings.Join(left, "\n"), len(left) == 0
	})
	return saw
}

func (w *workerProc) logTail() string {
	b, _ := os.ReadFile(w.logPath)
	return tail(string(b), 15)
}

func serveSite(t *testing.T, cfg demosite.Config) (*demosite.Site, string) {
	t.Helper()
	site := demosite.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return site, "http://" + addr.String()
}

// control returns a crawler on pool for scheduling and reading runs; it works no queue.
func control(t *testing.T, pool *pgxpool.Pool) *crawl.Crawler {
	t.Helper()
	n, err := node.New(node.Config{Pool: pool, Queues: []string{"control"}})
	if err != nil {
		t.Fatal(err)
	}
	return n.Crawler
}

func schedule(t *testing.T, c *crawl.Crawler, base string, concurrency int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Schedule(ctx, crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base},
		Settings: crawl.Overrides{Concurrency: &concurrency}})
	if err != nil {
		t.Fatal(err)
	}
	return s.RunID
}

// waitRun polls until the run is final. Reads may fail while the database is down; they retry.
func waitRun(t *testing.T, c *crawl.Crawler, id int64, d time.Duration, progress func(*crawl.Run)) *crawl.Run {
	t.Helper()
	type read struct {
		Run *crawl.Run
		Err error
	}
	var last read
	testwait.ForAtMost(t, d, fmt.Sprintf("run %d final", id), func() (read, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := c.Get(ctx, id)
		cancel()
		if err != nil {
			last.Err = err // the database may be down: the read retries
			return last, false
		}
		last.Run = r
		if progress != nil {
			progress(r)
		}
		return last, r.Finished()
	})
	return last.Run
}

// runChecks are the exactly-once checks shared by the crawl scenarios.
type runChecks struct {
	items, statItems, pageJobs, distinctURLs, dupSucceeded, leftRunning, unfinished, finals int64
}

func checkRun(t *testing.T, pool *pgxpool.Pool, c *crawl.Crawler, runID int64, exp demosite.Expected) runChecks {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rc runChecks
	q := func(dst *int64, sql string) {
		if err := pool.QueryRow(ctx, sql, runID).Scan(dst); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	q(&rc.items, `SELECT count(*) FROM crawlq_item WHERE run_id = $1`)
	q(&rc.pageJobs, `SELECT count(*) FROM crawlq_job WHERE parent_id = $1 AND kind = 'page'`)
	q(&rc.distinctURLs, `SELECT count(DISTINCT args->>'url') FROM crawlq_job WHERE parent_id = $1 AND kind = 'page'`)
	q(&rc.dupSucceeded, `SELECT count(*) FROM (SELECT url FROM chaos_job_done WHERE parent_id = $1 AND kind = 'page'
		GROUP BY url HAVING count(*) > 1) d`)
	q(&rc.leftRunning, `SELECT count(*) FROM crawlq_job WHERE (parent_id = $1 OR id IN (SELECT parent_id FROM crawlq_job WHERE parent_id = $1)) AND state = 'running'`)
	q(&rc.unfinished, `SELECT count(*) FROM crawlq_job WHERE parent_id = $1 AND state::text IN ('available','scheduled','running','retryable')`)
	q(&rc.finals, `SELECT count(*) FROM chaos_run_final WHERE run_id = $1`)
	var finishedAt *time.Time
	var state string
	if err := pool.QueryRow(ctx, `SELECT state::text, finished_at FROM crawlq_run WHERE id = $1`, runID).Scan(&state, &finishedAt); err != nil {
		t.Fatal(err)
	}
	r, err := c.Get(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	rc.statItems = r.Stats.Items
	want := int64(exp.Items)
	if state != "succeeded" || finishedAt == nil {
		t.Errorf("run state %s, finished_at %v; want succeeded with finished_at set", state, finishedAt)
	}
	if rc.items != want || rc.statItems != want {
		t.Errorf("items: %d in crawlq_item, %d in run stats; want exactly %d", rc.items, rc.statItems, want)
	}
	if rc.dupSucceeded != 0 {
		t.Errorf("%d URLs have more than one succeeded page job in the run", rc.dupSucceeded)
	}
	if rc.leftRunning != 0 || rc.unfinished != 0 {
		t.Errorf("%d jobs left leased (running), %d unfinished", rc.leftRunning, rc.unfinished)
	}
	if rc.finals != 1 {
		t.Errorf("the run reached a final state %d times, want exactly once", rc.finals)
	}
	// One page job per distinct URL: the fetched pages plus the robots-disallowed links, which
	// are jobs that end without a fetch.
	if want := int64(exp.Pages + exp.Disallowed); rc.pageJobs != want || rc.distinctURLs != want {
		t.Errorf("%d page jobs for %d distinct URLs, want one per URL: %d", rc.pageJobs, rc.distinctURLs, want)
	}
	return rc
}

func refetches(site *demosite.Site) (total, extra int64) {
	for p, n := range site.Hits() {
		if p == demosite.RobotsPath {
			continue
		}
		total += n
		extra += n - 1
	}
	return total, extra
}

// Worker chaos: 4 worker processes crawl 20,000 item pages while about every second a random one
// is killed with SIGKILL and restarted.
func workerChaos(t *testing.T, bin string, sum *summary) {
	pg := startPG(t)
	pool := pg.pool(t, 8)
	instrument(t, pool)
	site, base := serveSite(t, demosite.Config{Items: 20000, SlowDelay: 50 * time.Millisecond})
	exp := site.Expected()
	const lease = 4 * time.Second
	var ws []*workerProc
	for i := range 4 {
		ws = append(ws, newWorker(t, bin, pg.url("crawlq"), i, "--queues", "crawl", "--workers", "1",
			"--concurrency", "16", "--lease", lease.String()))
	}
	c := control(t, pool)
	start := time.Now()
	runID := schedule(t, c, base, 32)

	stopKiller := startKiller(t, ws)
	r := waitRun(t, c, runID, 6*time.Minute, nil)
	kills := stopKiller()
	elapsed := time.Since(start)
	for i, w := range ws {
		if w.exited() {
			t.Errorf("worker %d exited by itself:\n%s", i, w.logTail())
		}
	}
	rc := checkRun(t, pool, c, runID, exp)
	total, extra := refetches(site)
	sum.add("worker chaos: %d item pages (%d pages) by 4 `crawlq worker` processes, %d SIGKILLs (every 0.5-1.5s), lease %s: run %s in %s (%.0f pages/s); items %d in crawlq_item / %d in stats (want %d); duplicate succeeded page jobs %d; jobs left running %d; final-state transitions %d; %d fetches, %d re-fetches after kills",
		exp.Items, exp.Pages, kills, lease, r.State, elapsed.Round(time.Second), float64(exp.Pages)/elapsed.Seconds(),
		rc.items, rc.statItems, exp.Items, rc.dupSucceeded, rc.leftRunning, rc.finals, total, extra)
	if kills < 8 {
		t.Errorf("only %d kills happened during the crawl; the scenario needs several", kills)
	}
}

// startKiller SIGKILLs a random one of ws about every second (0.5-1.5 s) and starts it again,
// until the returned function is called; that returns how many it killed while they ran.
func startKiller(t *testing.T, ws []*workerProc) func() int64 {
	stop := make(chan struct{})
	var kills atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(500+rand.IntN(1000)) * time.Millisecond):
			}
			w := ws[rand.IntN(len(ws))]
			if w.kill(syscall.SIGKILL) {
				kills.Add(1)
			}
			w.start(t)
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return kills.Load()
	}
}

// Database restart: PostgreSQL crashes (immediate stop, no checkpoint: it recovers from WAL) and
// starts again mid-run; the worker processes reconnect with backoff and the run finishes exactly.
// The leases are a minute long, so the crawl can only move again soon after the restart if the
// workers record what their held jobs did themselves (their lease tokens are still valid) instead
// of leaving them to expire and be rescued.
func databaseRestart(t *testing.T, bin string, sum *summary) {
	pg := startPG(t)
	pool := pg.pool(t, 8)
	instrument(t, pool)
	site, base := serveSite(t, demosite.Config{Items: 5000, SlowDelay: 50 * time.Millisecond})
	exp := site.Expected()
	var ws []*workerProc
	for i := range 2 {
		ws = append(ws, newWorker(t, bin, pg.url("crawlq"), i, "--queues", "crawl", "--workers", "1",
			"--concurrency", "16", "--lease", "60s"))
	}
	c := control(t, pool)
	start := time.Now()
	runID := schedule(t, c, base, 16)
	// Restart once a fair part of the crawl is done, so jobs are leased and items in flight.
	testwait.For(t, "a quarter of the crawl's pages fetched", func() (int64, bool) {
		hits := site.TotalHits()
		return hits, hits >= int64(exp.Pages)/4
	})
	atStop := site.TotalHits()
	logAt := make([]int64, len(ws))
	for i, w := range ws {
		logAt[i] = w.logSize(t)
	}
	stopped := time.Now()
	pg.stopImmediate(t)
	// The outage lasts until every worker process has seen it: its log shows a connection the
	// stopped server refused, so it lost its connections and tried to make new ones (in a claim, a
	// handler's write or a heartbeat; the heartbeat, every 20 s with 60 s leases, bounds the wait).
	// No minimum length: the leases must not expire while the database is down (the scenario is
	// that the workers record what their held jobs did themselves), so nothing needs time to pass.
	saw := waitRefused(t, ws, logAt, stopped, time.Minute)
	down := time.Since(stopped)
	pg.start(t)
	restarted := time.Now()
	// Progress: a page fetched after the restart. Fetches still in flight at the crash add to the
	// count while the database is down, so the baseline is taken after it is back.
	base0 := site.TotalHits()
	testwait.ForAtMost(t, 45*time.Second, "a page fetched after the restart, before the 60 s leases expire (else the workers wait for them)",
		func() (int64, bool) {
			hits := site.TotalHits()
			return hits, hits > base0
		})
	moving := time.Since(restarted)
	r := waitRun(t, c, runID, 5*time.Minute, nil)
	elapsed := time.Since(start)
	for i, w := range ws {
		if w.exited() {
			t.Errorf("worker %d exited instead of reconnecting:\n%s", i, w.logTail())
		}
	}
	rc := checkRun(t, pool, c, runID, exp)
	var claimWarn int
	for _, w := range ws {
		b, _ := os.ReadFile(w.logPath)
		claimWarn += strings.Count(string(b), "claim failed; retrying")
	}
	_, extra := refetches(site)
	// Jobs that waited for their lease to expire and a rescue: what a worker that records its held
	// jobs itself after the outage should leave to nobody.
	var rescued int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM crawlq_job WHERE parent_id = $1 AND errors::text LIKE '%lease expired%'`, runID).Scan(&rescued); err != nil {
		t.Fatal(err)
	}
	if moving > 5*time.Second {
		t.Errorf("the crawl moved again %s after the restart; want within 5 s", moving.Round(10*time.Millisecond))
	}
	sum.add("database restart: %d item pages (%d pages), 2 worker processes, 60 s leases; pg_ctl stop -m immediate after %d fetches, down %s (until every worker had a connection refused: %s after the stop), restarted: first fetch %s after the restart, %d jobs rescued after their lease expired; run %s in %s; items %d / stats %d (want %d); duplicate succeeded page jobs %d; jobs left running %d; final-state transitions %d; %d claim retries logged; %d re-fetches",
		exp.Items, exp.Pages, atStop, down.Round(10*time.Millisecond), saw, moving.Round(10*time.Millisecond), rescued, r.State, elapsed.Round(time.Second), rc.items, rc.statItems, exp.Items,
		rc.dupSucceeded, rc.leftRunning, rc.finals, claimWarn, extra)
}

// post sends one Invoke API call to crawlq local and returns the decoded api response.
func post(client *http.Client, endpoint string, body []byte) (map[string]any, error) {
	resp, err := client.Post(endpoint+"/2015-03-31/functions/crawlq-api/invocations", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Amz-Function-Error") != "" {
		return nil, fmt.Errorf("status %d %s: %s", resp.StatusCode, resp.Header.Get("X-Amz-Function-Error"), b)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", b, err)
	}
	if out["status"] != "ok" {
		return out, fmt.Errorf("api answered %s", b)
	}
	return out, nil
}

// Load: 200 concurrent schedule calls against `crawlq local`, 150 of them over 50 unique keys
// (3 each) and 50 without a key: exactly 100 runs, no errors, latency percentiles reported.
func load(t *testing.T, bin string, sum *summary) {
	pg := startPG(t)
	pool := pg.pool(t, 4)
	port := freePort(t)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	logPath := filepath.Join(t.TempDir(), "local.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "local", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--tick", "1h")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+pg.url("crawlq"))
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait(); f.Close() })
	testwait.For(t, "crawlq local listens", func() (string, bool) {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			conn.Close()
			return "", true
		}
		b, _ := os.ReadFile(logPath)
		return fmt.Sprintf("%v; its log ends:\n%s", err, tail(string(b), 20)), false
	})
	const calls, keys = 200, 50
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: calls}}
	lat := make([]time.Duration, calls)
	errs := make([]error, calls)
	runByKey := make([]string, calls)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := map[string]any{"action": "schedule", "spider": "demo",
				"args": map[string]string{"base_url": "http://127.0.0.1:9/"}, "delay_seconds": 3600}
			if i < 3*keys {
				req["unique_key"] = fmt.Sprintf("load-%d", i%keys)
			}
			body, _ := json.Marshal(req)
			<-gate
			t0 := time.Now()
			out, err := post(client, endpoint, body)
			lat[i] = time.Since(t0)
			errs[i] = err
			if err == nil {
				runByKey[i] = fmt.Sprint(out["jobid"])
			}
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	wall := time.Since(start)
	var nerr int
	for i, err := range errs {
		if err != nil {
			nerr++
			if nerr <= 5 {
				t.Errorf("call %d: %v", i, err)
			}
		}
	}
	// Every call with the same key got the same run.
	for k := range keys {
		if a, b, c := runByKey[k], runByKey[k+keys], runByKey[k+2*keys]; a != b || b != c {
			t.Errorf("key load-%d answered runs %s, %s, %s; want one", k, a, b, c)
		}
	}
	var runs, keyed int64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.QueryRow(ctx, `SELECT count(*), count(idempotency_key) FROM crawlq_run`).Scan(&runs, &keyed); err != nil {
		t.Fatal(err)
	}
	if runs != calls-2*keys || keyed != keys {
		t.Errorf("%d runs (%d with a key); want %d (%d with a key)", runs, keyed, calls-2*keys, keys)
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(time.Millisecond)
	}
	sum.add("load: %d concurrent schedule calls to crawlq local's Invoke API (%d over %d unique keys, %d unkeyed): %d errors, %d runs created (want %d), %d keyed; wall %s; latency p50 %s, p90 %s, p99 %s, max %s",
		calls, 3*keys, keys, calls-3*keys, nerr, runs, calls-2*keys, keyed, wall.Round(time.Millisecond), pct(0.5), pct(0.9), pct(0.99), lat[len(lat)-1].Round(time.Millisecond))
}

// flakySink wraps the Postgres sink: once `after` items have been written it stalls every write
// for `stall` (each blocked write ends only when the pipeline's write timeout cancels it), and
// throughout it fails writes at random, some before and some after the inner write succeeded,
// so the pipeline and the page jobs must re-send items the table already has.
type flakySink struct {
	inner      items.Sink
	after      int64
	stall      time.Duration
	written    atomic.Int64
	stallStart atomic.Int64 // unix nanos, 0 until the stall begins
	stalled    atomic.Int64 // writes that hit the stall
	failBefore atomic.Int64
	failAfter  atomic.Int64
}

func (s *flakySink) Name() string { return "flaky(" + s.inner.Name() + ")" }

func (s *flakySink) Write(ctx context.Context, batch []items.Item) error {
	if s.written.Load() >= s.after {
		s.stallStart.CompareAndSwap(0, time.Now().UnixNano())
	}
	if st := s.stallStart.Load(); st != 0 {
		if end := time.Unix(0, st).Add(s.stall); time.Now().Before(end) {
			s.stalled.Add(1)
			t := time.NewTimer(time.Until(end))
			defer t.Stop()
			select {
			case <-ctx.Done():
				return fmt.Errorf("flaky sink stalled: %w", ctx.Err())
			case <-t.C:
			}
		}
	}
	switch n := rand.IntN(100); {
	case n < 15:
		s.failBefore.Add(1)
		return errors.New("flaky sink: injected failure before writing")
	case n < 25:
		if err := s.inner.Write(ctx, batch); err != nil {
			return err
		}
		s.written.Add(int64(len(batch)))
		s.failAfter.Add(1)
		return errors.New("flaky sink: injected failure after writing")
	}
	if err := s.inner.Write(ctx, batch); err != nil {
		return err
	}
	s.written.Add(int64(len(batch)))
	return nil
}

// Slow and failing sink: the item sink stalls for 30s and fails intermittently. The pipeline's
// buffer stays within its bounds, pages that cannot get their items written in time are put
// back, and every item lands exactly once by key.
func slowFailingSink(t *testing.T, sum *summary) {
	pg := startPG(t)
	pool := pg.pool(t, 20)
	instrument(t, pool)
	site, base := serveSite(t, demosite.Config{Items: 3000, SlowDelay: 50 * time.Millisecond})
	exp := site.Expected()
	sink := &flakySink{inner: items.NewPostgresSink(pool), after: 500, stall: 30 * time.Second}
	// Bounds far below what 32 page handlers would buffer freely, so the bound is what holds.
	pcfg := items.Config{MaxItems: 16, MaxBytes: 4 << 10, BatchSize: 8, SubmitTimeout: 3 * time.Second,
		WriteTimeout: 2 * time.Second, RetryBackoff: 50 * time.Millisecond}
	var finishes atomic.Int32
	// The sink's retries log a warning each; keep them in a file rather than the summary.
	logf, err := os.Create(filepath.Join(t.TempDir(), "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	n, err := node.New(node.Config{Pool: pool, Workers: 2, Sink: sink, Logger: slog.New(slog.NewTextHandler(logf, nil)), Pipeline: pcfg, ItemTimeout: 5 * time.Second,
		Worker:   queue.WorkerConfig{Concurrency: 16, Lease: 10 * time.Second, StopGrace: 5 * time.Second},
		Fetch:    fetch.Config{AllowLoopback: true},
		OnFinish: func(int64, string) { finishes.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	nodeDone := make(chan struct{})
	go func() { defer close(nodeDone); n.Run(ctx) }()
	defer func() { cancel(); <-nodeDone }()

	var peakHeap uint64
	start := time.Now()
	runID := schedule(t, n.Crawler, base, 16)
	r := waitRun(t, n.Crawler, runID, 5*time.Minute, func(*crawl.Run) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapInuse)
	})
	elapsed := time.Since(start)
	st := n.Pipeline.Stats()
	rc := checkRun(t, pool, n.Crawler, runID, exp)
	if st.MaxBufferedItems > pcfg.MaxItems || st.MaxBufferedBytes > pcfg.MaxBytes {
		t.Errorf("pipeline buffered up to %d items / %d bytes; bounds are %d / %d", st.MaxBufferedItems, st.MaxBufferedBytes, pcfg.MaxItems, pcfg.MaxBytes)
	}
	if sink.stallStart.Load() == 0 || sink.stalled.Load() == 0 {
		t.Error("the sink never stalled: the scenario did not happen")
	}
	if got := finishes.Load(); got != 1 {
		t.Errorf("the node finished the run %d times", got)
	}
	stallAt := time.Unix(0, sink.stallStart.Load()).Sub(start)
	sum.add("slow and failing sink: %d item pages in-process (2 workers x 16); sink stalled 30s from %s in (%d writes blocked), %d writes failed before and %d after writing: run %s in %s; items %d / stats %d (want %d, exactly once by key); buffer high-water %d items / %d bytes (bounds %d / %d); %d items written incl. %d re-sends; %d sink retries, %d backpressure, %d dropped-then-retried; peak Go heap %.1f MiB; final-state transitions %d",
		exp.Items, stallAt.Round(time.Second), sink.stalled.Load(), sink.failBefore.Load(), sink.failAfter.Load(), r.State, elapsed.Round(time.Second),
		rc.items, rc.statItems, exp.Items, st.MaxBufferedItems, st.MaxBufferedBytes, pcfg.MaxItems, pcfg.MaxBytes,
		sink.written.Load(), sink.written.Load()-rc.items, st.Retries, st.Backpressure, st.Dropped, float64(peakHeap)/(1<<20), rc.finals)
}
