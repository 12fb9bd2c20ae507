package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/events"
	"crawlq/internal/node"
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
		r, err := n.Crawler.Get(ctx, s.RunID)
		if err != nil {
			t.Fatal(err)
		}
		waiting, running, err := events.Depth(ctx, n.Queue.Pool(), s.RunID)
		if err != nil {
			t.Fatal(err)
		}
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
