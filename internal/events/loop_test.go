package events_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/awstest"
	"crawlq/internal/dbtest"
	"crawlq/internal/events"
	"crawlq/internal/testwait"
)

func newLoop(t *testing.T, cfg events.LoopConfig) *events.Loop {
	t.Helper()
	l, err := events.NewLoop(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// motoEventBridge returns an EventBridge client of the emulator awstest.Moto started.
func motoEventBridge(t *testing.T) *eventbridge.Client {
	t.Helper()
	cfg := awstest.Config(t)
	return eventbridge.NewFromConfig(cfg)
}

// collect reads b's queue until the run's events are exactly want, or fails at the deadline.
func (b *bus) collect(t *testing.T, run int64, want string) []received {
	t.Helper()
	var got []received
	testwait.Until(t, fmt.Sprintf("run %d events %s", run, want), func() bool {
		got = append(got, b.drain()...)
		return strings.Join(states(got, run), ",") == want
	})
	return got
}

// A poke publishes a run's events at once, with no tick at all (Interval 0): the loop a process
// runs beside its own state changes.
func TestLoopPublishesWhenPoked(t *testing.T) {
	awstest.Moto(t)
	pool := dbtest.Pool(t)
	b := newBus(t, "all-runs", `{"source":["crawlq"]}`)
	l := newLoop(t, events.LoopConfig{Publisher: newPublisher(t, events.Config{Pool: pool, Putter: motoEventBridge(t)})})
	l.Start(context.Background())
	t.Cleanup(l.Stop)

	other := fixtureRun(t, pool, "shop", 1, 1, "running")
	id := fixtureRun(t, pool, "shop", 3, 3, "running", "succeeded")
	l.Poke(id)
	got := b.collect(t, id, "pending,running,succeeded")
	if len(got) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(got), got)
	}
	// The poke published the poked run's events only: the rest of the outbox is the ticks'.
	evs, err := events.RunEvents(context.Background(), pool, other)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Done() || e.Attempts != 0 {
			t.Fatalf("run %d was not poked, yet its event %+v was taken", other, e)
		}
	}
}

// Stop publishes the runs poked since the last publish, so a process that exits right after
// finishing a run does not leave its events to another process's tick.
func TestLoopStopPublishes(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	l := newLoop(t, events.LoopConfig{Publisher: newPublisher(t, events.Config{Pool: pool})})
	ended, cancel := context.WithCancel(context.Background())
	cancel() // the process is stopping: the loop itself publishes nothing more
	l.Start(ended)
	id := fixtureRun(t, pool, "shop", 1, 1, "running", "succeeded")
	l.Poke(id)
	l.Stop() // only its final publish can take them
	evs, err := events.RunEvents(context.Background(), pool, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if !e.Done() {
			t.Fatalf("event %+v left after Stop", e)
		}
	}
	l.Stop()   // twice: nothing
	l.Poke(id) // after Stop: kept for a later Start, never blocks
	l.Poke(id)
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// A publish failure during a prompt publish (EventBridge unreachable) leaves the run as it was,
// logs a warning and keeps the events; a later drain publishes them, once each and in order.
func TestLoopPublishFailureLeftForLaterDrain(t *testing.T) {
	awstest.Moto(t)
	pool := dbtest.Pool(t)
	b := newBus(t, "all-runs", `{"source":["crawlq"]}`)
	cfg := awstest.Config(t)
	down := eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) {
		o.BaseEndpoint = aws.String("http://127.0.0.1:1")
		o.RetryMaxAttempts = 1
	})
	var logs lockedBuf
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	l := newLoop(t, events.LoopConfig{Logger: logger, Publisher: newPublisher(t, events.Config{Pool: pool, Putter: down, Logger: logger})})
	l.TestSignals.Published.Init()
	l.Start(context.Background())
	t.Cleanup(l.Stop)

	id := fixtureRun(t, pool, "shop", 2, 2, "running", "succeeded")
	before := runRow(t, pool, id)
	l.Poke(id)
	if err := l.TestSignals.Published.Wait(t); err == nil {
		t.Fatal("the poke's publish to an unreachable EventBridge reported no error")
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "run events not published now") {
		t.Fatalf("log:\n%s", logs.String())
	}
	if after := runRow(t, pool, id); after != before {
		t.Fatalf("a publish failure changed the run:\nbefore %s\nafter  %s", before, after)
	}
	evs, err := events.RunEvents(context.Background(), pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[0].PublishedAt != nil || evs[0].Attempts != 1 || evs[0].LastError == "" {
		t.Fatalf("events after the failure %+v, want the first tried once with its error, none published", evs)
	}
	if got := b.drain(); len(got) != 0 {
		t.Fatalf("%d events arrived though publishing failed", len(got))
	}

	// A later drain (a tick's) publishes them once the backoff passed.
	up := newPublisher(t, events.Config{Pool: pool, Putter: motoEventBridge(t)})
	var got []received
	testwait.Until(t, "the later drain publishes the run's events", func() bool {
		if _, err := up.Drain(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		got = append(got, b.drain()...)
		return len(states(got, id)) == 3
	})
	if s := strings.Join(states(got, id), ","); s != "pending,running,succeeded" || len(got) != 3 {
		t.Fatalf("run %d events %s (%d in all)", id, s, len(got))
	}
}

// Pokes from many goroutines while two loops (one ticking every few milliseconds, as another
// process's maintenance loop) and a dispatch-style drain run: every event is published exactly once.
func TestConcurrentLoopsPublishOnce(t *testing.T) {
	awstest.Moto(t)
	pool := dbtest.Pool(t)
	b := newBus(t, "all-runs", `{"source":["crawlq"]}`)
	eb := motoEventBridge(t)
	poked := newLoop(t, events.LoopConfig{Publisher: newPublisher(t, events.Config{Pool: pool, Putter: eb, Batch: 2})})
	ticking := newLoop(t, events.LoopConfig{Publisher: newPublisher(t, events.Config{Pool: pool, Putter: eb, Batch: 3}), Interval: 5 * time.Millisecond})
	poked.Start(context.Background())
	ticking.Start(context.Background())
	t.Cleanup(poked.Stop)
	t.Cleanup(ticking.Stop)
	tick := newPublisher(t, events.Config{Pool: pool, Putter: eb})

	const runs = 20
	var ids []int64
	var wg sync.WaitGroup
	for i := range runs {
		id := fixtureRun(t, pool, "shop", 1, 1, "running", "succeeded")
		ids = append(ids, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				poked.Poke(id)
			}
			if i%5 == 0 {
				if _, err := tick.Drain(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	var got []received
	distinct := func() int {
		seen := map[int64]bool{}
		for _, r := range got {
			seen[r.Detail.Sequence] = true
		}
		return len(seen)
	}
	testwait.Until(t, "every run's three events", func() bool {
		got = append(got, b.drain()...)
		return distinct() >= 3*runs
	})
	if n, _, err := events.Backlog(context.Background(), pool); err != nil || n != 0 {
		t.Fatalf("backlog %d %v", n, err)
	}
	got = append(got, b.drain()...)
	got = withoutRetriedTwins(t, pool, got)
	for _, id := range ids {
		if s := strings.Join(states(got, id), ","); s != "pending,running,succeeded" {
			t.Errorf("run %d events %s", id, s)
		}
	}
	if len(got) != 3*runs {
		t.Fatalf("%d events arrived, want %d: some were published twice", len(got), 3*runs)
	}
}

// withoutRetriedTwins drops the second copy of an event that was claimed more than once: a publish
// call that timed out on a slow emulator (or outlived its lease) may have been accepted all the
// same, and its retry sends it again; publishing is at least once. A copy of an event claimed once
// stays, for the caller to count as published twice: two loops sending one claim is the race this
// test is for.
func withoutRetriedTwins(t *testing.T, pool *pgxpool.Pool, got []received) []received {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id FROM crawlq_run_event WHERE attempts > 1`)
	if err != nil {
		t.Fatal(err)
	}
	retried, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	var out []received
	for _, r := range got {
		if seen[r.Detail.Sequence] && slices.Contains(retried, r.Detail.Sequence) {
			t.Logf("event %d (run %d %s) came twice: its first publish call failed (%d events were retried)", r.Detail.Sequence, r.Detail.RunID, r.Detail.State, len(retried))
			continue
		}
		seen[r.Detail.Sequence] = true
		out = append(out, r)
	}
	return out
}
