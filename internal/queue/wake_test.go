package queue

import (
	"context"
	"testing"
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
