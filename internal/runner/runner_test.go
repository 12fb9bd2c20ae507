package runner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/queue"
	"crawlq/internal/runner"
	"crawlq/internal/spider"
	"crawlq/internal/testwait"
)

// The runner tests run real runner processes: this test binary re-executed with
// CRAWLQ_RUNNER_CHILD=1, which makes TestMain run a runner instead of the tests. The child
// works a "sleep" job kind that prints "job <id> started" and sleeps CHILD_SLEEP (or until its
// context ends).
func TestMain(m *testing.M) {
	if os.Getenv("CRAWLQ_RUNNER_CHILD") == "1" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

func envDur(k string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(k))
	return d
}

func envInt(k string) int {
	n, _ := strconv.Atoi(os.Getenv(k))
	return n
}

func childMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	defer pool.Close()
	sleep := envDur("CHILD_SLEEP")
	r, err := runner.New(runner.Config{
		Pool: pool, WorkerID: os.Getenv("CHILD_ID"), Concurrency: envInt("CHILD_CONCURRENCY"),
		Lease: envDur("CHILD_LEASE"), StopGrace: envDur("CHILD_GRACE"), MaxJobs: envInt("CHILD_MAX_JOBS"),
		MaxMemory: int64(envInt("CHILD_MAX_MEMORY")), MemoryInterval: 50 * time.Millisecond, MaintainEvery: 200 * time.Millisecond,
		Handlers: map[string]queue.Handler{"sleep": func(ctx context.Context, j *queue.Job) error {
			fmt.Printf("job %d started\n", j.ID)
			select {
			case <-time.After(sleep):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	reason, err := r.Run(ctx)
	fmt.Printf("reason=%s\n", reason)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type child struct {
	cmd  *exec.Cmd
	out  *syncBuf
	done chan struct{}
	err  error
}

// startChild starts a runner process on the database at url; env adds CHILD_* settings.
func startChild(t *testing.T, url, id string, env ...string) *child {
	t.Helper()
	c := &child{out: &syncBuf{}, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), "CRAWLQ_RUNNER_CHILD=1", "DATABASE_URL="+url, "CHILD_ID="+id)
	c.cmd.Env = append(c.cmd.Env, env...)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			t.Logf("runner %s output:\n%s", id, c.out.String())
		}
	})
	return c
}

// wait waits for the child to exit and returns its error.
func (c *child) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(within):
		t.Fatalf("runner did not exit within %s", within)
		return nil
	}
}

// waitStarted waits until the child's handler has started job id. A job the database shows
// running is only claimed: its handler may not have begun yet.
func (c *child) waitStarted(t *testing.T, id int64) {
	t.Helper()
	line := fmt.Sprintf("job %d started\n", id)
	testwait.For(t, fmt.Sprintf("the runner starts job %d", id), func() (string, bool) {
		out := c.out.String()
		return out, strings.Contains(out, line)
	})
}

func waitJob(t *testing.T, qc *queue.Client, id int64, what string, ok func(*queue.Job) bool) *queue.Job {
	t.Helper()
	return testwait.For(t, fmt.Sprintf("job %d %s", id, what), func() (*queue.Job, bool) {
		j, err := qc.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return j, ok(j)
	})
}

func setup(t *testing.T) (string, *queue.Client) {
	t.Helper()
	_, url := dbtest.Schema(t)
	return url, queue.New(dbtest.Open(t, url, 4), queue.Config{})
}

func enqueue(t *testing.T, qc *queue.Client, n int) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		r, err := qc.Enqueue(context.Background(), queue.EnqueueParams{Queue: "long", Kind: "sleep", MaxAttempts: 5})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

func runningOn(worker string) func(*queue.Job) bool {
	return func(j *queue.Job) bool { return j.State == queue.StateRunning && j.Worker == worker }
}

func TestSIGKILLMidJobRedelivered(t *testing.T) {
	t.Parallel()
	url, qc := setup(t)
	id := enqueue(t, qc, 1)[0]
	a := startChild(t, url, "runner-a", "CHILD_SLEEP=10m", "CHILD_LEASE=2s")
	waitJob(t, qc, id, "running on runner-a", runningOn("runner-a"))

	live, err := qc.LiveWorkers(context.Background(), "long", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if live["long"]["ecs"] != 1 {
		t.Errorf("live workers %v, want one ecs runner on long", live)
	}

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := a.wait(t, 30*time.Second); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("runner a ended with %v, want killed by SIGKILL", err)
	}
	b := startChild(t, url, "runner-b", "CHILD_SLEEP=0s", "CHILD_LEASE=2s")
	j := waitJob(t, qc, id, "succeeded", func(j *queue.Job) bool { return j.State == queue.StateSucceeded })
	if j.Worker != "runner-b" || j.Attempt != 2 {
		t.Errorf("job finished by %q at attempt %d, want runner-b at attempt 2 (the killed one counts)", j.Worker, j.Attempt)
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	if err := b.wait(t, 30*time.Second); err != nil {
		t.Errorf("runner b: %v", err)
	}
}

func TestSIGTERMReleasesToSecondRunner(t *testing.T) {
	t.Parallel()
	url, qc := setup(t)
	id := enqueue(t, qc, 1)[0]
	// A long lease: the job must come back because it was released, not because it expired.
	a := startChild(t, url, "runner-a", "CHILD_SLEEP=10m", "CHILD_LEASE=5m", "CHILD_GRACE=1s")
	waitJob(t, qc, id, "running on runner-a", runningOn("runner-a"))
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.wait(t, 60*time.Second); err != nil {
		t.Fatalf("runner a after SIGTERM: %v, want a clean exit", err)
	}
	if !strings.Contains(a.out.String(), "reason=stopped") {
		t.Errorf("runner a output lacks reason=stopped")
	}
	j, err := qc.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != queue.StateAvailable || j.Attempt != 0 {
		t.Fatalf("after SIGTERM the job is %s at attempt %d, want available with the attempt not counted", j.State, j.Attempt)
	}
	startChild(t, url, "runner-b", "CHILD_SLEEP=0s")
	j = waitJob(t, qc, id, "succeeded", func(j *queue.Job) bool { return j.State == queue.StateSucceeded })
	if j.Worker != "runner-b" || j.Attempt != 1 {
		t.Errorf("job finished by %q at attempt %d, want runner-b at attempt 1", j.Worker, j.Attempt)
	}
}

func TestSIGTERMLetsRunningJobFinish(t *testing.T) {
	t.Parallel()
	url, qc := setup(t)
	ids := enqueue(t, qc, 2)
	a := startChild(t, url, "runner-a", "CHILD_SLEEP=2s", "CHILD_CONCURRENCY=1", "CHILD_GRACE=60s")
	// The handler must have begun: a job claimed but not yet started when SIGTERM comes is
	// released unstarted, as it should be, and this test would fail under load.
	a.waitStarted(t, ids[0])
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.wait(t, 60*time.Second); err != nil {
		t.Fatalf("runner a after SIGTERM: %v", err)
	}
	j0, err := qc.Get(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	j1, err := qc.Get(context.Background(), ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if j0.State != queue.StateSucceeded || j0.Worker != "runner-a" {
		t.Errorf("running job: %s by %q, want succeeded by runner-a within the grace period", j0.State, j0.Worker)
	}
	if j1.State != queue.StateAvailable || j1.Attempt != 0 {
		t.Errorf("unstarted job: %s at attempt %d (worker %q), want available, attempt not counted", j1.State, j1.Attempt, j1.Worker)
	}
}

func TestRecyclesAfterMaxJobs(t *testing.T) {
	t.Parallel()
	url, qc := setup(t)
	enqueue(t, qc, 5)
	a := startChild(t, url, "runner-a", "CHILD_SLEEP=0s", "CHILD_MAX_JOBS=3", "CHILD_CONCURRENCY=2")
	if err := a.wait(t, 60*time.Second); err != nil {
		t.Fatalf("runner: %v, want a clean exit after 3 jobs", err)
	}
	if !strings.Contains(a.out.String(), "reason=max-jobs") {
		t.Errorf("runner output lacks reason=max-jobs")
	}
	st, err := qc.Stats(context.Background())
	if err != nil || len(st) != 1 {
		t.Fatalf("stats %v %v", st, err)
	}
	if st[0].Succeeded != 3 || st[0].Available != 2 {
		t.Errorf("succeeded %d available %d, want 3 and 2", st[0].Succeeded, st[0].Available)
	}
}

func TestRecyclesPastMemoryLimit(t *testing.T) {
	t.Parallel()
	url, _ := setup(t)
	// 1 MiB: below any Go process's resident memory, so the first check trips it.
	a := startChild(t, url, "runner-a", "CHILD_SLEEP=0s", "CHILD_MAX_MEMORY=1048576")
	if err := a.wait(t, 60*time.Second); err != nil {
		t.Fatalf("runner: %v, want a clean exit", err)
	}
	if !strings.Contains(a.out.String(), "reason=memory") {
		t.Errorf("runner output lacks reason=memory")
	}
}

func TestRSS(t *testing.T) {
	n, err := runner.RSS()
	if err != nil || n < 1<<20 {
		t.Fatalf("RSS %d, %v", n, err)
	}
}

func TestConfigValidation(t *testing.T) {
	pool := dbtest.Pool(t)
	for _, c := range []struct {
		cfg  runner.Config
		want string
	}{
		{runner.Config{}, "Pool"},
		{runner.Config{Pool: pool, Queue: "Bad Queue"}, "Queue"},
		{runner.Config{Pool: pool, Concurrency: -1}, "Concurrency"},
		{runner.Config{Pool: pool, StopGrace: 115 * time.Second}, "stopTimeout"},
		{runner.Config{Pool: pool, MaxMemory: -1}, "MaxMemory"},
	} {
		if _, err := runner.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

// longSpec is a spider the runner works: runtime ecs puts its runs on the long queue.
const longSpec = `
name: long
start_urls: ["http://127.0.0.1:8088/"]
allowed_domains: ["127.0.0.1"]
follow: [{css: a}]
items:
  - match: '/catalogue/item-\d+\.html$'
    css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
runtime: ecs
concurrency: 4
`

// A runner with an events loop and no tick at all (no maintenance, no interval) publishes the events
// of the run it works as the run starts and finishes. Publishing is off here: the events are
// marked done with a note, which only a publish does.
func TestRunnerPublishesRunEvents(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	reg := spider.NewRegistry()
	if err := reg.LoadFS(fstest.MapFS{"long.yaml": {Data: []byte(longSpec)}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := demosite.New(demosite.Config{Items: 10, SlowDelay: time.Millisecond}).Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := events.New(events.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	loop, err := events.NewLoop(events.LoopConfig{Publisher: pub})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{Pool: pool, Spiders: reg, Concurrency: 4, MaintainEvery: -1, Events: loop, Fetch: fetch.Config{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := r.Run(ctx); done <- err }()
	s, err := r.Node().Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "long", Args: map[string]string{"base_url": "http://" + addr.String()}})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, fmt.Sprintf("run %d: its 3 events published", s.RunID), func() ([]events.Recorded, bool) {
		evs, err := events.RunEvents(ctx, pool, s.RunID)
		if err != nil {
			t.Fatal(err)
		}
		published := 0
		for _, e := range evs {
			if e.Done() { // publishing is off here: done, not published
				published++
			}
		}
		return evs, len(evs) == 3 && published == 3 && evs[2].State == "succeeded"
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
