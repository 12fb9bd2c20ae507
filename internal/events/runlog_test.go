package events_test

import (
	"strings"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/events"
	"crawlq/internal/runlog"
)

// A run's published events land in its own log (what `crawlq logs RUN` and the Scrapyd
// log_url read), one line per state change, in order, beside the verdict of its monitors.
func TestEventsInTheRunLog(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	id := fixtureRun(t, pool, "shop", 3, 3, "running", "succeeded")
	store := runlog.Postgres{Pool: pool}
	p := newPublisher(t, events.Config{Pool: pool, Log: runlog.EventLog{Store: store}})
	if _, err := p.Drain(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	lines, _, err := store.Read(ctxT(t, 10*time.Second), id, "")
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, l := range lines {
		text = append(text, l.Text)
	}
	all := strings.Join(text, "\n")
	running, succeeded := strings.Index(all, "running"), strings.Index(all, "succeeded")
	if running < 0 || succeeded < running {
		t.Fatalf("run log %q: want the running and succeeded events, in order", all)
	}
}
