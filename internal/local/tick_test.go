package local_test

import (
	"strconv"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/local"
)

// crawlq local ticks dispatch as it starts, then every Tick: a run scheduled while no crawlq
// local ran (its wake went to nobody) starts at that first tick, not a Tick later. The test waits
// on the dispatcher's Ticked signal for the tick to end, then reads what it did.
func TestFirstTickStartsWhatWaitedWhileNothingRan(t *testing.T) {
	_, url := dbtest.Schema(t)
	// Scheduled before the stack serves: no listener hears its wake, no api pokes.
	id, err := strconv.ParseInt(crawlqCLI(t, url, "schedule", "--spider", "demo", "--arg", "base_url=http://127.0.0.1:9"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	rs := serveStack(t, url, nil, func(c *local.Config) { c.Tick, c.NoWake = time.Hour, true },
		func(st *local.Stack) { st.DispatchSignals().Ticked.Init() })

	tick := rs.st.DispatchSignals().Ticked.Wait(t)
	if tick.Err != nil || tick.Result.Invoked["crawl"] == 0 {
		t.Fatalf("the first tick: %+v; want a crawl worker invoked for the run that waited", tick)
	}
	// The worker it invoked starts the run (the tick does not wait for that).
	waitRun(t, rs.deps.Control.Crawler, id, "started", func(r *crawl.Run) bool { return r.StartedAt != nil })
}
