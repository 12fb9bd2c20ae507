package local_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/lambdafn"
	"crawlq/internal/local"
)

// crawlq local ticks dispatch as it starts, then every Tick: a run scheduled while no crawlq
// local ran (its wake went to nobody) starts at that first tick, not a Tick later. The test waits
// on the dispatcher's Ticked signal for the tick to end, then reads what it did.
func TestFirstTickStartsWhatWaitedWhileNothingRan(t *testing.T) {
	_, url := dbtest.Schema(t)
	pool := dbtest.Open(t, url, 16)
	// Scheduled before the stack serves: no listener hears its wake, no api pokes.
	id, err := strconv.ParseInt(crawlqCLI(t, url, "schedule", "--spider", "demo", "--arg", "base_url=http://127.0.0.1:9"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CRAWLQ_EVENT_BUS": lambdafn.EventsOff}
	deps, err := lambdafn.NewDeps(pool, aws.Config{Region: "us-east-1"}, nil, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := local.New(local.Config{Deps: deps, Tick: time.Hour, NoWake: true, Metrics: os.Stderr,
		Worker: lambdafn.WorkerOptions{IdleExit: 2 * time.Second, Margin: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	st.DispatchSignals().Ticked.Init()
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

	tick := st.DispatchSignals().Ticked.Wait(t)
	if tick.Err != nil || tick.Result.Invoked["crawl"] == 0 {
		t.Fatalf("the first tick: %+v; want a crawl worker invoked for the run that waited", tick)
	}
	// The worker it invoked starts the run (the tick does not wait for that).
	waitRun(t, deps.Control.Crawler, id, "started", func(r *crawl.Run) bool { return r.StartedAt != nil })
}
