package queue

import (
	"context"
	"testing"
	"time"

	"crawlq/internal/testwait"
)

// The claim loop returns room it cannot use and then waits for a wake; if returning room woke it,
// it would spin on a full buffer (it did, burning both cores while handlers were busy). Only room
// freed by others wakes it.
func TestOnlyOthersFreeingRoomWakeTheClaimLoop(t *testing.T) {
	w, err := NewWorker(&Client{}, WorkerConfig{Queue: "q", Concurrency: 4, BatchSize: 4}, func(ctx context.Context, j *Job) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	woken := func() bool {
		select {
		case <-w.wake:
			return true
		default:
			return false
		}
	}
	n := w.takeRoom(4)
	w.giveBack(n, false) // the claim loop's own
	w.hand(nil, w.takeRoom(4), false)
	if woken() {
		t.Fatal("the claim loop's own returned room woke it")
	}
	r := w.Reserve(2)
	r.Cancel()
	if !woken() {
		t.Fatal("a cancelled reservation did not wake the claim loop")
	}
	r = w.Reserve(2)
	r.Hand() // nothing inserted: all its room comes back
	if !woken() {
		t.Fatal("a reservation handing back unused room did not wake the claim loop")
	}
	if room := w.Room(); room != 4 {
		t.Fatalf("room %d after everything was given back, want 4", room)
	}
}

// A reservation takes only handlers that are idle: a busy worker's finds go to the queue.
func TestReserveCountsIdleHandlersOnly(t *testing.T) {
	w, err := NewWorker(&Client{}, WorkerConfig{Queue: "q", Concurrency: 3, BatchSize: 10}, func(ctx context.Context, j *Job) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if room := w.Room(); room != 3 {
		t.Fatalf("room %d with 3 idle handlers and 10 places, want 3", room)
	}
	w.mu.Lock()
	w.busy = 2
	w.mu.Unlock()
	if r := w.Reserve(5); r == nil || r.Len() != 1 {
		t.Fatalf("reserve with 1 idle handler: %v, want room for 1", r)
	}
	if r := w.Reserve(5); r != nil {
		t.Fatalf("reserved %d with no idle handler left", r.Len())
	}
}

// With HoldAhead, a reservation takes up to that many jobs beyond the idle handlers, to wait in
// the worker already leased (no claim); the claim loop's share of the buffer stays BatchSize, and
// held jobs waiting there fill it. Once the waiting jobs are slow to start (half a heartbeat
// interval), only idle handlers count again, until the buffer empties.
func TestReserveHoldsAheadWhileJobsStartPromptly(t *testing.T) {
	w, err := NewWorker(&Client{}, WorkerConfig{Queue: "q", Concurrency: 2, BatchSize: 4, HoldAhead: 5, Lease: time.Minute,
		HeartbeatInterval: 40 * time.Millisecond}, func(ctx context.Context, j *Job) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if room := w.Room(); room != 7 {
		t.Fatalf("room %d with 2 idle handlers and 5 ahead, want 7", room)
	}
	w.mu.Lock()
	w.busy = 2
	w.mu.Unlock()
	r := w.Reserve(100)
	if r == nil || r.Len() != 5 {
		t.Fatalf("reserve with every handler busy: %v, want room for the 5 ahead", r)
	}
	for i := range 5 {
		r.jobs = append(r.jobs, &Job{ID: int64(i + 1)})
	}
	r.Hand()
	if n := w.takeRoom(4); n != 0 {
		t.Fatalf("the claim loop took %d places with 5 held jobs waiting, want 0", n)
	}
	if room := w.Room(); room != 0 {
		t.Fatalf("room %d with 5 held jobs waiting for 2 busy handlers, want 0", room)
	}
	w.mu.Lock()
	w.busy = 0
	w.mu.Unlock()
	j := <-w.ready // a handler takes one at once
	if _, ok := w.begin(j, func(error) {}); !ok {
		t.Fatal("begin refused a held job")
	}
	if room := w.Room(); room != 3 {
		t.Fatalf("room %d with 4 waiting, 2 idle handlers, 5 ahead, want 3", room)
	}
	testwait.Until(t, "the waiting jobs to be slow to start", func() bool { return w.Room() == 0 })
	for len(w.ready) > 0 {
		<-w.ready
	}
	if room := w.Room(); room != 7 {
		t.Fatalf("room %d once nothing waits, want 7", room)
	}
}
