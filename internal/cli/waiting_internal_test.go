package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbsqlc"
	"crawlq/internal/dbtest"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/node"
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
	"crawlq/internal/testwait"
	"crawlq/internal/view"
)

// --watch says what a live run with nothing running waits for, instead of a bare "0 running":
// its start time, or a worker of its queue when none is alive.
func TestWaitingForSaysWhatARunWaitsFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, err := node.New(node.Config{Pool: dbtest.Pool(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Pipeline.Close(ctx)
	why := func(p crawl.ScheduleParams) string {
		t.Helper()
		s, err := n.Crawler.Schedule(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		r, waiting, running := runDepth(t, n, s.RunID)
		w, err := waitingFor(ctx, n, r, waiting, running, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		line := progressLine(r, waiting, running, 0) + "  " + w
		t.Log(line)
		return line
	}
	if line := why(crawl.ScheduleParams{Spider: "demo", Delay: time.Hour}); !strings.Contains(line, "waits to start at") ||
		!strings.Contains(line, "(in 1h0m0s)") && !strings.Contains(line, "(in 59m59s)") {
		t.Errorf("a run delayed an hour: %q", line)
	}
	if line := why(crawl.ScheduleParams{Spider: "demo"}); !strings.Contains(line, "waits for a worker of queue crawl: none alive") {
		t.Errorf("a due run without workers: %q", line)
	}
}

// A running run whose pages wait for their host's pause: --watch names the host, since when it
// fails, its probes, when the next one is due, instead of a page due "in 58s", and when the run
// gives up on the host.
func TestWaitingForNamesAPausedHost(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	n, s := runOneWorker(t, ctx, "down", "start_urls: ["+dead+"/]\nobey_robots: false\nretry:\n  host_pause: 1m\n  max_host_pause: 1m\n")
	line := testwait.For(t, "--watch names the paused host", func() (string, bool) {
		r, waiting, running := runDepth(t, n, s.RunID)
		line, err := waitingFor(ctx, n, r, waiting, running, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return line, strings.Contains(line, "is down")
	})
	t.Log(line)
	host := strings.TrimPrefix(dead, "http://")
	if !strings.Contains(line, "host "+host+" is down") || !strings.Contains(line, "1 failed probes") || !strings.Contains(line, "then one probes it") {
		t.Errorf("--watch of a run whose host is paused: %q", line)
	}
	// Nothing was fetched, so the start limit (1m by default) applies: the line says when the run
	// stops waiting.
	if !strings.Contains(line, "the run gives up on it if it is still down at ") || !strings.Contains(line, "down limit 1m0s") {
		t.Errorf("--watch does not say when the run gives up on the host: %q", line)
	}
	// crawlq run shows the pause as a wait, apart from the errors: no page failed.
	r, err := n.Crawler.Get(ctx, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(view.NewRun(r, nil))
	if err != nil {
		t.Fatal(err)
	}
	var shown struct {
		Stats map[string]json.RawMessage `json:"stats"`
	}
	if err := json.Unmarshal(b, &shown); err != nil {
		t.Fatal(err)
	}
	st := shown.Stats
	if string(st["host_pauses"]) != "1" || string(st["errors"]) != "0" || strings.Contains(string(st["errors_by_kind"]), "host_paused") {
		t.Errorf("crawlq run's stats of a run whose one host is paused: %s; want host_pauses 1, errors 0, and no host_paused among the errors", b)
	}
}

// A page put off for its host's turn (the spider's delay) is said to wait for that, not for a
// retry's backoff: a newcomer's run with delay 100ms and no retries read "a retry's backoff".
func TestWaitingForNamesTheHostsDelayTurn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<html><body>a page</body></html>")
	}))
	defer site.Close()
	n, s := runOneWorker(t, ctx, "polite", "start_urls: ["+site.URL+"/a, "+site.URL+"/b]\nobey_robots: false\ndelay: 1h\n")
	line := testwait.For(t, "--watch says the second page waits", func() (string, bool) {
		r, waiting, running := runDepth(t, n, s.RunID)
		line, err := waitingFor(ctx, n, r, waiting, running, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return line, strings.Contains(line, "next page due")
	})
	t.Log(line)
	if !strings.Contains(line, "its host's turn: the spider waits 1h0m0s between requests to a host") || strings.Contains(line, "backoff") {
		t.Errorf("--watch of a page waiting for its host's delay: %q", line)
	}
}

// runOneWorker starts a node with one worker (loopback allowed) and the spider name whose spec
// is the rest of its YAML, stopped when the test ends, and schedules a run of it.
func runOneWorker(t *testing.T, ctx context.Context, name, rest string) (*node.Node, crawl.Scheduled) {
	t.Helper()
	reg := spider.NewRegistry()
	if err := reg.LoadFS(fstest.MapFS{name + ".yaml": {Data: []byte("name: " + name + "\n" + rest)}}); err != nil {
		t.Fatal(err)
	}
	n, err := node.New(node.Config{Pool: dbtest.Pool(t), Spiders: reg, Workers: 1, Fetch: fetch.Config{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	nctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); n.Run(nctx) }()
	t.Cleanup(func() { stop(); <-done })
	s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: name})
	if err != nil {
		t.Fatal(err)
	}
	return n, s
}

// runDepth reads run id and how many of its jobs wait and run.
func runDepth(t *testing.T, n *node.Node, id int64) (r *crawl.Run, waiting, running int64) {
	t.Helper()
	r, err := n.Crawler.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if waiting, running, err = events.Depth(context.Background(), n.Queue.Pool(), id); err != nil {
		t.Fatal(err)
	}
	return r, waiting, running
}

// lineWriter hands each write to a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) { w <- string(p); return len(p), nil }

// A spider with runtime ecs runs on the long queue, which crawlq worker does not work by default:
// crawlq schedule says so on standard error and in the run's log when no live worker works it,
// and crawlq run --wait says what the run waits for instead of waiting silently.
func TestRunOnTheLongQueueSaysNoWorkerWorksIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := spider.NewRegistry()
	spec := "name: big\nstart_urls: [http://127.0.0.1:1/]\nruntime: ecs\nrevisit: changed_only\n"
	small := "name: small\nstart_urls: [http://127.0.0.1:1/]\n"
	if err := reg.LoadFS(fstest.MapFS{"big.yaml": {Data: []byte(spec)}, "small.yaml": {Data: []byte(small)}}); err != nil {
		t.Fatal(err)
	}
	n, err := node.New(node.Config{Pool: dbtest.Pool(t), Spiders: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Pipeline.Close(ctx)
	s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "big"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := n.Crawler.Get(ctx, s.RunID)
	if err != nil || r.Queue != "long" {
		t.Fatalf("run %+v, %v: want it on queue long", r, err)
	}
	var said strings.Builder
	if err := noteQueue(ctx, &said, n, s.RunID, r.Queue); err != nil {
		t.Fatal(err)
	}
	note := strings.TrimSpace(said.String())
	logged, _, err := runlog.Postgres{Pool: n.Queue.Pool()}.Read(ctx, s.RunID, "")
	if err != nil || len(logged) != 1 || logged[0].Text != note {
		t.Errorf("the run's log %+v, %v; want the note %q", logged, err, note)
	}
	if !strings.Contains(note, "waits on queue long, which no live worker works now") || !strings.Contains(note, "crawlq worker --queues crawl,long") {
		t.Errorf("schedule's note: %q", note)
	}
	if d, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "small"}); err != nil {
		t.Fatal(err)
	} else if note, err := queueNote(ctx, n, d.RunID, spider.DefaultQueue); err != nil || note != "" {
		t.Errorf("a run on the crawl queue: note %q, %v; want none", note, err)
	}

	w := make(lineWriter, 8)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := awaitFinish(wctx, w, n, r, 10*time.Millisecond); done <- err }()
	select {
	case line := <-w:
		if want := "run " + strconv.FormatInt(s.RunID, 10) + " waits for a worker of queue long: none alive"; !strings.HasPrefix(line, want) ||
			!strings.Contains(line, "crawlq runner") {
			t.Errorf("run --wait said %q, want it to start %q and name crawlq runner", line, want)
		}
	case <-ctx.Done():
		t.Fatal("run --wait of a run no worker works said nothing")
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("awaitFinish ended with %v", err)
	}
	if len(w) != 0 {
		t.Errorf("the same wait said again: %q", <-w)
	}
}

// A wait that changes only in its figures is said once and again every sayAgain; one that
// changes otherwise is said at once. A newcomer's run waiting 10 minutes on a down host printed
// 868 lines of countdowns.
func TestSayerSaysAWaitWhenItChanges(t *testing.T) {
	start := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	down := func(in int) string {
		return fmt.Sprintf("waits: host 127.0.0.1:8088 is down (failing since 04:00:00, %d failed probes); its pages wait until 04:00:%02d (in %ds)", in/10, in, in)
	}
	var s sayer
	var said []int
	for sec := 0; sec < 600; sec++ { // a reading a second for ten minutes
		if s.due(down(sec%60), start.Add(time.Duration(sec)*time.Second)) {
			said = append(said, sec)
		}
	}
	if len(said) != 20 || said[0] != 0 || said[1] != 30 {
		t.Fatalf("a ten-minute wait said at %v; want every 30 s (20 lines)", said)
	}
	if !s.due("waits for a worker of queue crawl: none alive", start.Add(600*time.Second)) {
		t.Fatal("a different wait was not said at once")
	}
}

// A run just scheduled while an idle worker is alive waits for nothing yet: the worker claims it
// within its poll interval. --wait said "waits for room ... busy with other jobs" though nothing
// else ran. Past claimGrace the line says what is late: the claim, the workers running nothing.
func TestWaitingForSaysNothingOfARunAnIdleWorkerIsAboutToClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	n, err := node.New(node.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Pipeline.Close(ctx)
	// An idle worker of queue crawl, as its heartbeat shows it (queue.Worker writes this row).
	now := time.Now()
	if err := dbsqlc.New(pool).WorkerBeat(ctx, dbsqlc.WorkerBeatParams{ID: "idle-worker", Queue: spider.DefaultQueue, Kind: "process", Now: &now}); err != nil {
		t.Fatal(err)
	}
	s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	r, waiting, running := runDepth(t, n, s.RunID)
	if waiting != 1 || running != 0 {
		t.Fatalf("depth %d waiting, %d running; want the run's job waiting", waiting, running)
	}
	if w, err := waitingFor(ctx, n, r, waiting, running, r.RunAt); err != nil || w != "" {
		t.Errorf("a run due this moment, an idle worker alive: %q, %v; want nothing said", w, err)
	}
	w, err := waitingFor(ctx, n, r, waiting, running, r.RunAt.Add(claimGrace+time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(w, "waits for a worker to claim it: 1 live worker(s) of queue crawl run nothing") || strings.Contains(w, "room") {
		t.Errorf("a run due for %s, an idle worker alive: %q", claimGrace+time.Second, w)
	}
}
