package queue

import "crawlq/internal/clock"

// The ready buffer (Worker.ready) hands claimed jobs to the handlers. Its producers, the claim
// loop and reservations, take room in it before they claim or insert jobs, then fill it (hand) or
// give the room back (giveBack). Room that a handler or a reservation frees wakes the claim loop
// if it waits for room; room the claim loop gives back itself does not.
//
// The claim loop fills BatchSize of it; reservations may fill HoldAhead more (holdLocked), so
// that work a busy process finds waits here rather than being inserted, claimed and only then
// started: a row update fewer per job. They stop doing so while the jobs waiting here are slow
// to start (waitingLongLocked): then the queue, where other workers can take them, is the
// better place, and a lease held in here would soon need extending by the heartbeat.

// takeRoom takes up to n free places in ready for a producer and returns how many it took.
func (w *Worker) takeRoom(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return 0
	}
	k := max(min(n, w.freeLocked()), 0)
	w.reserved += k
	return k
}

// freeLocked is the room in ready the claim loop may fill; w.mu is held.
func (w *Worker) freeLocked() int { return w.cfg.BatchSize - len(w.ready) - w.reserved }

// idleLocked is how many more jobs the handlers could start at once: those not working, less the
// jobs already waiting for them or on their way; w.mu is held.
func (w *Worker) idleLocked() int {
	return min(w.cfg.Concurrency-w.busy-len(w.ready)-w.reserved, w.freeLocked())
}

// holdLocked is how many more jobs a reservation may hand this worker: what idle handlers would
// start at once, and up to HoldAhead more waiting for a handler unless those waiting now are slow
// to start; w.mu is held.
func (w *Worker) holdLocked() int {
	// ready's capacity is BatchSize+HoldAhead, so both of idleLocked's bounds grow by HoldAhead.
	if w.cfg.HoldAhead == 0 || w.waitingLongLocked() {
		return w.idleLocked()
	}
	return w.idleLocked() + w.cfg.HoldAhead
}

// waitingLongLocked reports whether the jobs waiting in ready wait half a heartbeat interval or
// more to start: the last one a handler took had, or none was taken for that long; w.mu is held.
func (w *Worker) waitingLongLocked() bool {
	if len(w.ready) == 0 {
		return false
	}
	limit := w.cfg.HeartbeatInterval / 2
	return w.lastWait >= limit || w.sinceTake.Elapsed() >= limit
}

// giveBack frees n places a producer took and did not fill; wake tells a claim loop waiting for
// room about them (the claim loop's own returns must not, or it would wake itself in a loop).
func (w *Worker) giveBack(n int, wake bool) {
	w.mu.Lock()
	w.reserved -= n
	w.mu.Unlock()
	if wake {
		w.wakeClaimer()
	}
}

// wakeClaimer tells a claim loop waiting for room that some may have freed up.
func (w *Worker) wakeClaimer() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// hand gives held jobs to the handlers, filling places taken with takeRoom (room of them,
// len(jobs) <= room); what is left of room is freed (see giveBack for wake). It reports false,
// doing nothing else, when the worker has stopped: the caller then still holds the jobs.
func (w *Worker) hand(jobs []*Job, room int, wake bool) bool {
	if wake && len(jobs) < room {
		defer w.wakeClaimer()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reserved -= room
	if w.stopped {
		return false
	}
	w.claimed.Add(int64(len(jobs)))
	now := clock.StartStopwatch()
	if len(w.ready) == 0 {
		w.sinceTake = now // nothing waited before these
	}
	for _, j := range jobs {
		w.inflight[j.ID] = &held{job: j, handed: now}
		w.ready <- j // never blocks: the room was taken
	}
	return true
}
