package queue

import (
	"context"
	"testing"
)

// The claim loop returns room it cannot use and then waits for a wake; if returning room woke it,
// it would spin on a full buffer (it did, burning both cores while handlers were busy). Only room
// freed by others wakes it.
func TestOnlyOthersFreeingRoomWakeTheClaimLoop(t *testing.T) {
	w, err := NewWorker(&Client{}, WorkerConfig{Queue: "q", Concurrency: 1, BatchSize: 4}, func(ctx context.Context, j *Job) error { return nil })
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
