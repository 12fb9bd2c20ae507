package node

import (
	"context"
	"testing"

	"crawlq/internal/queue"
)

// Found work that idle handlers can start at once goes to one worker; more than that is spread
// over the node's workers by their room, so that none is left holding a longer queue of it while
// the others idle (on the old code one worker held it all, and the wide bench site's crawl ended
// with one worker working through its tail alone).
func TestReserveSpreadsHeldWorkOverTheWorkers(t *testing.T) {
	qc := queue.New(nil, queue.Config{})
	var ws []*queue.Worker
	for range 2 {
		w, err := queue.NewWorker(qc, queue.WorkerConfig{Queue: "q", Concurrency: 10, BatchSize: 20, HoldAhead: 1000},
			func(context.Context, *queue.Job) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	n := &Node{workers: ws}
	rs := n.reserve("q", 8)
	if len(rs) != 1 || rs[0].Len() != 8 {
		t.Fatalf("8 jobs for 10 idle handlers: %d reservations, want 1 of 8", len(rs))
	}
	rs[0].Cancel()
	rs = n.reserve("q", 2000)
	if len(rs) != 2 || rs[0].Len() != 1000 || rs[1].Len() != 1000 {
		t.Fatalf("2,000 jobs for two workers of 1,010 places each: %d reservations, want 2 of 1,000", len(rs))
	}
	for _, r := range rs {
		r.Cancel()
	}
	if got := n.reserve("other", 5); len(got) != 0 {
		t.Fatalf("reserved %d on a queue no worker works", len(got))
	}
}
