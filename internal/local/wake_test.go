package local_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"crawlq/internal/cli"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/lambdafn"
	"crawlq/internal/local"
	"crawlq/internal/testwait"
)

// serveLocal runs a local stack on url's schema until the test ends. tick is Config.Tick.
// It returns the stack's crawler, to read runs through.
func serveLocal(t *testing.T, url string, tick time.Duration) *crawl.Crawler {
	t.Helper()
	return runLocal(t, url, nil, tick).deps.Control.Crawler
}

// crawlqCLI runs the crawlq CLI in this process, as a user's shell would beside `crawlq local`:
// its own connections to the same database, nothing shared with the stack.
func crawlqCLI(t *testing.T, url string, args ...string) string {
	t.Helper()
	return crawlqCLIEnv(t, map[string]string{"DATABASE_URL": url}, args...)
}

// crawlqCLIEnv is crawlqCLI with the environment env.
func crawlqCLIEnv(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	if code != 0 {
		t.Fatalf("crawlq %s: exit %d: %s %s", strings.Join(args, " "), code, out.String(), errb.String())
	}
	return strings.TrimSpace(out.String())
}

// waitRun polls run id until ok holds and returns the run. (How soon it held, where that is
// the point, the test measures from the run's own timestamps.)
func waitRun(t *testing.T, c *crawl.Crawler, id int64, what string, ok func(*crawl.Run) bool) *crawl.Run {
	t.Helper()
	return testwait.For(t, fmt.Sprintf("run %d %s", id, what), func() (*crawl.Run, bool) {
		r, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return r, ok(r)
	})
}

// flakySite is the demo site with one item page answering 500 until fixed; it records when that
// page was first asked for after the fix.
type flakySite struct {
	*demosite.Site
	path string

	mu      sync.Mutex
	broken  bool
	fixedAt time.Time // when fixed; zero while broken
	hitAt   time.Time // first request for path after the fix
}

func (f *flakySite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == f.path {
		f.mu.Lock()
		broken := f.broken
		if !broken && f.hitAt.IsZero() {
			f.hitAt = time.Now()
		}
		f.mu.Unlock()
		if broken {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
	}
	f.Site.ServeHTTP(w, r)
}

func (f *flakySite) fix() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken, f.fixedAt = false, time.Now()
	return f.fixedAt
}

func (f *flakySite) hit() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hitAt
}

// Under `crawlq local`, what a user does through the CLI takes effect within 2 s, without waiting
// for a dispatch tick: a scheduled run starts, a pending run is cancelled, a redriven run's pages
// are fetched. The stack never ticks by itself here (Tick < 0), so only the CLI's wake can start
// anything; with the one-minute tick of a real `crawlq local`, each waited up to a minute.
func TestCLIActionsTakeEffectWithoutATick(t *testing.T) {
	_, url := dbtest.Schema(t)
	site := &flakySite{Site: demosite.New(demosite.Config{Items: 12, PerPage: 6, SlowDelay: 10 * time.Millisecond}),
		path: "/catalogue/item-3.html", broken: true}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: site}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	base := "http://" + ln.Addr().String()

	// A spider whose pages die at their first failure, so the broken page leaves a dead page.
	spec, err := os.ReadFile("../../spiders/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	flaky := strings.Replace(string(spec), "name: demo", "name: flaky", 1)
	flaky = flaky[:strings.Index(flaky, "monitors:")] + "retry:\n  attempts: 1\n"
	specPath := filepath.Join(t.TempDir(), "flaky.yaml")
	if err := os.WriteFile(specPath, []byte(flaky), 0o644); err != nil {
		t.Fatal(err)
	}
	crawlqCLI(t, url, "spider", "push", specPath)

	c := serveLocal(t, url, -1)

	// A CLI schedule starts at once.
	t0 := time.Now()
	id, err := strconv.ParseInt(crawlqCLI(t, url, "schedule", "--spider", "flaky", "--arg", "base_url="+base), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, c, id, "started", func(r *crawl.Run) bool { return r.StartedAt != nil })
	t.Logf("schedule → started: %s", r.StartedAt.Sub(t0))
	if d := r.StartedAt.Sub(t0); d > 2*time.Second {
		t.Errorf("a CLI schedule started %s later; want within 2s", d)
	}
	r = waitRun(t, c, id, "finished", (*crawl.Run).Finished)
	if r.State != "incomplete" || r.DeadPages != 1 {
		t.Fatalf("run with one broken page: %s with %d dead pages; want incomplete with 1", r.State, r.DeadPages)
	}

	// A redrive's pages are fetched at once.
	site.fix()
	t1 := time.Now()
	crawlqCLI(t, url, "redrive", "--run", strconv.FormatInt(id, 10))
	r = waitRun(t, c, id, "finished again", (*crawl.Run).Finished)
	hit := site.hit()
	if hit.IsZero() {
		t.Fatalf("the redriven page was never fetched (run %s)", r.State)
	}
	t.Logf("redrive → dead page fetched: %s", hit.Sub(t1))
	if d := hit.Sub(t1); d > 2*time.Second {
		t.Errorf("a redriven page was fetched %s after the redrive; want within 2s", d)
	}
	if r.State != "succeeded" {
		t.Errorf("redriven run: %s, want succeeded", r.State)
	}

	// A pending run's cancel is in effect at once.
	later, err := strconv.ParseInt(crawlqCLI(t, url, "schedule", "--spider", "flaky", "--arg", "base_url="+base, "--delay", "1h"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()
	crawlqCLI(t, url, "cancel-run", strconv.FormatInt(later, 10))
	r = waitRun(t, c, later, "cancelled", (*crawl.Run).Finished)
	t.Logf("cancel of a pending run → %s: %s", r.State, time.Since(t2))
	if r.State != "cancelled" || time.Since(t2) > 2*time.Second {
		t.Errorf("cancelled pending run: %s after %s; want cancelled within 2s", r.State, time.Since(t2))
	}
}

// A cancelled command run's process is stopped within 3 s of the cancel (it took 10 s, the
// runner's heartbeat), and the run shows cancelled within 2 s of its process exiting, without a
// tick or a sweep: it used to stay running until the next tick's sweep.
func TestCancelledCommandRunEndsWhenItsProcessExits(t *testing.T) {
	_, url := dbtest.Schema(t)
	dir := t.TempDir()
	exited := filepath.Join(dir, "exited")
	started := filepath.Join(dir, "started")
	// Exits 1 at SIGINT or SIGTERM, writing the time it did (a process that stops as asked).
	script := `echo > ` + started + `; trap 'date +%s.%N > ` + exited + `; exit 1' INT TERM; while :; do sleep 0.05; done`
	spec := "name: stubborn\nkind: command\ncommand: [sh, -c, \"" + strings.ReplaceAll(script, `"`, `\"`) + "\"]\n"
	specPath := filepath.Join(dir, "stubborn.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	crawlqCLI(t, url, "spider", "push", specPath)

	pool := dbtest.Open(t, url, 16)
	env := map[string]string{"CRAWLQ_EVENT_BUS": lambdafn.EventsOff}
	deps, err := lambdafn.NewDeps(pool, aws.Config{Region: "us-east-1"}, nil, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No tick and no sweep: the runner that stopped the command finishes the run itself, as an
	// ECS runner must on AWS, where the next sweep is a minute away.
	st, err := local.New(local.Config{Deps: deps, Tick: -1, Sweep: -1, Runners: 1, Metrics: os.Stderr,
		Worker: lambdafn.WorkerOptions{IdleExit: 2 * time.Second, Margin: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		deps.Control.Pipeline.Close(context.Background())
	})
	c := deps.Control.Crawler

	id := crawlqCLI(t, url, "schedule", "--spider", "stubborn")
	run, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	waitFile := func(path string) []byte {
		t.Helper()
		return testwait.For(t, filepath.Base(path)+" written", func() ([]byte, bool) {
			b, err := os.ReadFile(path)
			return b, err == nil && len(b) > 0
		})
	}
	waitFile(started)
	cancelled := time.Now()
	crawlqCLI(t, url, "cancel-run", id)
	b := waitFile(exited)
	f, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatalf("%s: %q", exited, b)
	}
	exit := time.Unix(0, int64(f*1e9))
	t.Logf("cancel → process exited: %s", exit.Sub(cancelled))
	if d := exit.Sub(cancelled); d > 3*time.Second {
		t.Errorf("the cancelled command was stopped %s after the cancel; want within 3s (crawlq local's runner heartbeats every second)", d)
	}
	r := waitRun(t, c, run, "finished", (*crawl.Run).Finished)
	t.Logf("process exited → run %s: %s", r.State, r.FinishedAt.Sub(exit))
	if r.State != "cancelled" || r.FinishedAt.Sub(exit) > 2*time.Second {
		t.Errorf("cancelled command run: %s %s after its process exited; want cancelled within 2s", r.State, r.FinishedAt.Sub(exit))
	}
}

// A spider pushed through the CLI can be scheduled through the api of a running crawlq local at
// once, even one whose name the api had just answered unknown (it cached that for 2 s).
func TestPushedSpiderIsInEffectAtOnce(t *testing.T) {
	_, url := dbtest.Schema(t)
	s := startLocal(t, url)
	schedule := []byte(`{"action":"schedule","spider":"fresh","args":{"base_url":"http://127.0.0.1:9"},"delay_seconds":3600}`)
	if r := s.st.API().Handle(context.Background(), schedule); r["status"] != "error" || !strings.Contains(fmt.Sprint(r["message"]), "fresh") {
		t.Fatalf("schedule of a spider not pushed yet: %v", r)
	}
	spec, err := os.ReadFile("../../spiders/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fresh.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(spec), "name: demo", "name: fresh", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	crawlqCLI(t, url, "spider", "push", path)
	pushed := time.Now()
	testwait.For(t, "the pushed spider is schedulable", func() (map[string]any, bool) {
		r := s.st.API().Handle(context.Background(), schedule)
		return r, r["status"] == "ok"
	})
	t.Logf("push → schedulable: %s", time.Since(pushed))
	if d := time.Since(pushed); d > time.Second {
		t.Errorf("the pushed spider was schedulable %s after the push; want within 1s", d)
	}
}

// On a deployed stack nothing listens on the database: with CRAWLQ_DISPATCH_FUNCTION set, the
// CLI pokes the dispatch function through the Lambda Invoke API, as the api does after a schedule.
// Here that API is crawlq local's, with its listener off, so only the poke can start the run.
func TestCLIPokesTheDispatchFunction(t *testing.T) {
	_, url := dbtest.Schema(t)
	rs := serveStack(t, url, nil, func(c *local.Config) { c.Tick, c.NoWake = -1, true },
		func(st *local.Stack) { st.DispatchSignals().Poked.Init() })
	st, deps := rs.st, rs.deps
	// The CLI reads the AWS variables from its environment, as on an operator's machine; the
	// SDK's shared files, which it reads itself, are none.
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)

	t0 := time.Now()
	out := crawlqCLIEnv(t, map[string]string{"DATABASE_URL": url, "CRAWLQ_DISPATCH_FUNCTION": "crawlq-dispatch",
		"AWS_ENDPOINT_URL": "http://" + rs.addr, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"},
		"schedule", "--spider", "demo", "--arg", "base_url=http://127.0.0.1:9")
	id, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The CLI's poke is the only way dispatch learns of the run: it invokes a worker.
	poke := st.DispatchSignals().Poked.Wait(t)
	if poke.Err != nil || poke.Result.Invoked["crawl"] == 0 {
		t.Fatalf("the CLI's poke: %+v; want a crawl worker invoked", poke)
	}
	r := waitRun(t, deps.Control.Crawler, id, "started", func(r *crawl.Run) bool { return r.StartedAt != nil })
	t.Logf("schedule → started through the poke: %s", r.StartedAt.Sub(t0))
	if d := r.StartedAt.Sub(t0); d > 2*time.Second {
		t.Errorf("a CLI schedule with CRAWLQ_DISPATCH_FUNCTION started %s later; want within 2s", d)
	}
}
