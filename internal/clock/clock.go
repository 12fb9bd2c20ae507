// Package clock is the one source of the current time for crawlq's services (queue, crawl,
// maintain, events, dispatch): each takes a Clock in its config, set where a process is
// assembled, so a test can stop time and move it instead of sleeping until a window passes.
// This file is the only place in those packages that reads the wall clock
// (clock_lint_test.go checks that).
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock.
func Real() Clock { return wall{} }

type wall struct{}

func (wall) Now() time.Time { return time.Now() }

// Or returns c, or the wall clock when c is nil: the default of every service's Clock field.
func Or(c Clock) Clock {
	if c == nil {
		return wall{}
	}
	return c
}

// Since is how long ago t was by c.
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// DeadlineIn is how long until ctx's deadline, and whether it has one. A context's deadline
// is wall time whatever a service's Clock says, so this reads the wall clock.
func DeadlineIn(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return time.Until(dl), true
}

// Stopwatch measures wall time that really passes: how long a piece of work took, how long a
// retry has been trying, how long since a paced step last ran. That is not the service's "now":
// a test's stopped Clock must neither keep a retry loop from ever giving up nor make every
// measured duration zero. So services take the time of day (timestamps, schedules, windows,
// expiries) from their Clock and elapsed time from a Stopwatch. The zero Stopwatch started
// long ago: its Elapsed is larger than any bound.
type Stopwatch struct{ start time.Time }

// StartStopwatch returns a stopwatch started now.
func StartStopwatch() Stopwatch { return Stopwatch{start: time.Now()} }

// Elapsed is the wall time since the stopwatch started (on the monotonic clock).
func (s Stopwatch) Elapsed() time.Duration { return time.Since(s.start) }

// Deadline is the wall-clock time d from now, for what runs on wall time whatever a service's
// Clock says: the deadlines of I/O (an os.File, a net.Conn) and of contexts.
func Deadline(d time.Duration) time.Time { return time.Now().Add(d) }

// Func adapts a func() time.Time (a Now field of an older config) to a Clock.
type Func func() time.Time

// Now calls f.
func (f Func) Now() time.Time { return f() }

// Stopped is a clock for tests: it stands still until moved. Safe for concurrent use.
type Stopped struct {
	mu  sync.Mutex
	now time.Time
}

// NewStopped returns a clock stopped at t.
func NewStopped(t time.Time) *Stopped { return &Stopped{now: t} }

// Now returns the time the clock stands at.
func (s *Stopped) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Advance moves the clock d ahead and returns the new time.
func (s *Stopped) Advance(d time.Duration) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
	return s.now
}

// Set moves the clock to t.
func (s *Stopped) Set(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = t
}
