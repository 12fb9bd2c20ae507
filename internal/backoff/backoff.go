// Package backoff owns crawlq's one retry-delay rule: exponential growth from a base, capped,
// optionally with "equal jitter" (half fixed, half random) so that callers failing together do
// not retry together. Every retry loop in crawlq (job retries, page retries, host pauses, sink
// writes, completion writes) takes its delays from here.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff: Base after the first failure, doubling, never above Max.
type Policy struct {
	// Base is the delay after the first failure. Zero means no delay at all.
	Base time.Duration
	// Max caps the delay. Zero means Base (no growth).
	Max time.Duration
	// Jitter draws the delay uniformly from [d/2, d] instead of d.
	Jitter bool
}

// Delay is the wait after failure number attempt (1-based; values below 1 count as 1).
func (p Policy) Delay(attempt int) time.Duration {
	if p.Base <= 0 {
		return 0
	}
	limit := max(p.Max, p.Base)
	d := p.Base
	for i := 1; i < attempt && d < limit; i++ {
		if d > limit/2 {
			d = limit // doubling would pass the cap (or overflow)
			break
		}
		d *= 2
	}
	if p.Jitter {
		half := d / 2
		d = half + rand.N(d-half+1)
	}
	return d
}

// Spread is a wait of d (none when d is negative) plus a random spread of up to a quarter of it,
// at least a millisecond and at most a second: what a job put back until a known time (a host's
// pause, a proxy's rest) waits, so the pages put back together do not all come back at the same
// instant, and none comes back much later than the time it waits for.
func Spread(d time.Duration) time.Duration {
	d = max(d, 0)
	return d + rand.N(min(max(d/4, time.Millisecond), time.Second)+1)
}

// Sleep waits d or until ctx ends, and reports whether the full wait passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
