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
	// The events are published an hour after they happened: the log says when they happened.
	if _, err := pool.Exec(ctxT(t, 10*time.Second), `UPDATE crawlq_run_event SET created_at = created_at - interval '1 hour' WHERE run_id = $1`, id); err != nil {
		t.Fatal(err)
	}
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
	evs, err := events.RunEvents(ctxT(t, 10*time.Second), pool, id)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]time.Time{}
	for _, e := range evs {
		at[runlog.OwnPrefix+"state "+e.State] = e.At
	}
	var summary bool
	for i, l := range lines {
		if want, ok := at[l.Text]; ok && !l.At.Equal(want) {
			t.Errorf("line %q at %s; the event happened at %s", l.Text, l.At, want)
		}
		if strings.HasPrefix(l.Text, runlog.OwnPrefix+"pages 3, items 3, errors 0, retries 0") {
			summary = i > 0 && lines[i-1].Text == runlog.OwnPrefix+"state succeeded" && l.At.Equal(at[runlog.OwnPrefix+"state succeeded"])
		}
	}
	if !summary {
		t.Errorf("run log %q: want the final figures with the retries right after the final state, at its time", all)
	}
}
