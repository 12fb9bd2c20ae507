// Package testwait is how tests wait: on a signal a service sends when it has done something
// (Signal), or, for what sends none (another process, a row, a file), on a condition polled
// until it holds (For, Until). Every wait ends at one deadline, Timeout, and fails the test
// naming what it waited for, so no test waits by sleeping a guessed time.
//
// Services carry Signals in a TestSignals struct of their own; a Signal does nothing until a
// test calls Init, so production code pays one nil check per send.
package testwait

import (
	"fmt"
	"time"
)

// Timeout bounds every wait. Generous: it is only reached when what is awaited never happens,
// and the machine running the tests may be loaded many times over.
const Timeout = 2 * time.Minute

// pollEvery paces For and Until: fast enough that a wait ends soon after its condition holds,
// slow enough that the polls (often a database query) cost little.
const pollEvery = 20 * time.Millisecond

// TB is the part of testing.TB a wait uses (so this package needs no testing import).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// signalBuffer is how many sends a Signal holds before the test takes them.
const signalBuffer = 1000

// Signal is a test signal: a service sends a value each time something happens, and a test
// waits for it. The zero value is off: Send does nothing until Init.
type Signal[T any] struct {
	ch chan T
}

// Init turns the signal on. Call it before the service starts (it is not safe beside Send).
func (s *Signal[T]) Init() { s.ch = make(chan T, signalBuffer) }

// Send records v for a waiting test; a no-op unless Init was called. It never blocks: a
// service must not stall on its tests, so a full buffer panics, saying the test does not take
// its signals.
func (s *Signal[T]) Send(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
		panic(fmt.Sprintf("testwait: %d signals of %T not taken by the test", signalBuffer, v))
	}
}

// Wait returns the next value sent, failing t if none comes within Timeout.
func (s *Signal[T]) Wait(t TB) T {
	t.Helper()
	var zero T
	if s.ch == nil {
		t.Fatalf("testwait: Wait on a signal that was not Init'ed")
		return zero
	}
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case v := <-s.ch:
		return v
	case <-timer.C:
		t.Fatalf("testwait: no %T signal within %v", zero, Timeout)
		return zero
	}
}

// WaitFor takes values until one satisfies ok and returns it, failing t if none does within
// Timeout.
func (s *Signal[T]) WaitFor(t TB, what string, ok func(T) bool) T {
	t.Helper()
	if s.ch == nil {
		t.Fatalf("testwait: WaitFor on a signal that was not Init'ed")
		var zero T
		return zero
	}
	deadline := time.Now().Add(Timeout)
	for {
		timer := time.NewTimer(time.Until(deadline))
		select {
		case v := <-s.ch:
			timer.Stop()
			if ok(v) {
				return v
			}
		case <-timer.C:
			t.Fatalf("testwait: %s: not within %v", what, Timeout)
			var zero T
			return zero
		}
	}
}

// For polls get until it reports done and returns its value, failing t with what and the
// last value if that does not happen within Timeout.
func For[T any](t TB, what string, get func() (T, bool)) T {
	t.Helper()
	return ForAtMost(t, Timeout, what, get)
}

// ForAtMost is For with a bound of its own, for what takes longer than Timeout even when all
// goes well (a crawl of thousands of pages through real processes).
func ForAtMost[T any](t TB, limit time.Duration, what string, get func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		v, done := get()
		if done {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("testwait: %s: not within %v (last: %+v)", what, limit, v)
			return v
		}
		time.Sleep(pollEvery)
	}
}

// Until polls cond until it holds, failing t with what if it does not within Timeout.
func Until(t TB, what string, cond func() bool) {
	t.Helper()
	For(t, what, func() (struct{}, bool) { return struct{}{}, cond() })
}
