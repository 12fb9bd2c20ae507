package proxy

import (
	"sync"
	"time"

	"crawlq/internal/backoff"
)

// Rotation hands out a spider's proxies in turn and rests one that fails or is banned: for
// RestBase after its first failure in a row, doubling with each further one up to RestMax, and
// back in turn after its first success. A rest decided elsewhere (shared by several processes)
// is taken with RestUntil. Safe for concurrent use.
type Rotation struct {
	mu      sync.Mutex
	entries []*entry
	next    int
	base    time.Duration
	max     time.Duration
}

type entry struct {
	p      *Proxy
	streak int // failures in a row
	until  time.Time
	uses   int64
	fails  int64
}

// Default rest bounds of a failed proxy.
const (
	DefaultRestBase = 10 * time.Second
	DefaultRestMax  = 10 * time.Minute
)

// NewRotation rotates ps. restBase and restMax bound a failed proxy's rest; zero takes the
// defaults (DefaultRestBase, DefaultRestMax).
func NewRotation(ps []*Proxy, restBase, restMax time.Duration) *Rotation {
	if restBase <= 0 {
		restBase = DefaultRestBase
	}
	if restMax <= 0 {
		restMax = DefaultRestMax
	}
	r := &Rotation{base: restBase, max: max(restMax, restBase)}
	for _, p := range ps {
		r.entries = append(r.entries, &entry{p: p})
	}
	return r
}

// Next returns the next proxy that is not resting. When all are resting it returns nil and how
// long until the first of them is back.
func (r *Rotation) Next(now time.Time) (*Proxy, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var soonest time.Duration = -1
	for i := range r.entries {
		e := r.entries[(r.next+i)%len(r.entries)]
		if wait := e.until.Sub(now); wait > 0 {
			if soonest < 0 || wait < soonest {
				soonest = wait
			}
			continue
		}
		r.next = (r.next + i + 1) % len(r.entries)
		e.uses++
		return e.p, 0
	}
	return nil, soonest
}

// Rest benches p after a failure or a ban, and returns for how long. fresh is false when p was
// already resting (another request through it failed meanwhile): its rest is not lengthened.
func (r *Rotation) Rest(p *Proxy, now time.Time) (d time.Duration, fresh bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.find(p)
	if e == nil {
		return 0, false
	}
	e.fails++
	if left := e.until.Sub(now); left > 0 {
		return left, false
	}
	e.streak++
	d = backoff.Policy{Base: r.base, Max: r.max}.Delay(e.streak)
	e.until = now.Add(d)
	return d, true
}

// RestUntil rests p until until, a rest decided elsewhere (a row several processes share, which
// doubles it itself): its rest ends at the later of until and its own. failed says a failure of
// p here led to it, counted in States and ended by OK; false: another process benched it.
func (r *Rotation) RestUntil(p *Proxy, until time.Time, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.find(p)
	if e == nil {
		return
	}
	if failed {
		e.fails++
		e.streak++
	}
	if until.After(e.until) {
		e.until = until
	}
}

// OK records that a request through p got an answer: its streak of failures ends. It reports
// whether p had failed here since its last answer.
func (r *Rotation) OK(p *Proxy) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.find(p)
	if e == nil || e.streak == 0 {
		return false
	}
	e.streak = 0
	return true
}

// Proxies returns the proxies, in the order given to NewRotation.
func (r *Rotation) Proxies() []*Proxy {
	out := make([]*Proxy, len(r.entries))
	for i, e := range r.entries {
		out[i] = e.p
	}
	return out
}

func (r *Rotation) find(p *Proxy) *entry {
	for _, e := range r.entries {
		if e.p == p {
			return e
		}
	}
	return nil
}

// State is one proxy's standing in a Rotation.
type State struct {
	Proxy    string    // redacted URL
	Uses     int64     // times handed out
	Failures int64     // failures and bans
	Until    time.Time // end of its rest; zero or past when in turn
}

// States returns each proxy's standing, in the order given to NewRotation.
func (r *Rotation) States() []State {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]State, len(r.entries))
	for i, e := range r.entries {
		out[i] = State{Proxy: e.p.String(), Uses: e.uses, Failures: e.fails, Until: e.until}
	}
	return out
}

// Index is p's place in the list given to NewRotation, or -1: what a session keeps to come back
// to the same proxy (At), in another process too.
func (r *Rotation) Index(p *Proxy) int {
	for i, e := range r.entries {
		if e.p == p {
			return i
		}
	}
	return -1
}

// At returns the proxy at index i, and whether it is in turn (not resting) at now; nil when i
// is out of range.
func (r *Rotation) At(i int, now time.Time) (*Proxy, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i < 0 || i >= len(r.entries) {
		return nil, false
	}
	e := r.entries[i]
	if !e.until.After(now) {
		e.uses++
		return e.p, true
	}
	return e.p, false
}
