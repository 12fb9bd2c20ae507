package demosite

import (
	"cmp"
	"slices"
	"time"
)

// The site changes between the runs of a spider the way a real catalogue does: each generation
// (Advance) gives a share of the live items a new price and deletes another share. Which items is
// a pure function of Config.Seed and the generation number, so a test that advances a site twice
// sees the same changes every time, and can ask (Changes) which SKUs a step changed and deleted.

// maxGeneration bounds Config.Generation.
const maxGeneration = 10_000

// modTime is when generation gen began: the Last-Modified of the pages it last changed, and
// their sitemap lastmod. Generation 0 began when the site was made (so did those New advanced
// to Config.Generation); each later one when Advance made it. Wall-clock times, so a crawler
// comparing lastmod with the start of its last run sees exactly the items changed since.
func (s *Site) modTime(gen int) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen.at[gen]
}

// generations is the catalogue's history: per item (index k-1), how many times it changed, the
// generation that last changed or deleted it, and whether it is deleted.
type generations struct {
	n       int         // the current generation
	at      []time.Time // when each generation began
	rev     []uint16
	changed []int
	deleted []bool
	last    Changes // what the step to n did
}

func newGenerations(items int, now time.Time) generations {
	return generations{rev: make([]uint16, items), changed: make([]int, items), deleted: make([]bool, items), at: []time.Time{now}}
}

// Changes is what one generation step did, by SKU, sorted.
type Changes struct {
	Generation int
	Changed    []string
	Deleted    []string
}

// Advance moves the site to its next generation: ChangePercent of the live items get a new price
// and DeletePercent of the others are deleted. It returns what changed.
func (s *Site) Advance() Changes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.advance()
}

// advance is Advance with s.mu held (or before s is shared).
func (s *Site) advance() Changes {
	g := &s.gen
	g.n++
	at := s.cfg.Clock.Now()
	if s.cfg.Generation >= g.n { // New advancing to Config.Generation: one catalogue, one time
		at = g.at[0]
	}
	g.at = append(g.at, at)
	live := make([]int, 0, len(g.deleted))
	for i, d := range g.deleted {
		if !d {
			live = append(live, i+1)
		}
	}
	// A deterministic shuffle: live items ordered by a hash of (seed, generation, item).
	slices.SortFunc(live, func(a, b int) int {
		return cmp.Compare(mix(s.cfg.Seed, g.n, a), mix(s.cfg.Seed, g.n, b))
	})
	nChange := len(live) * s.cfg.ChangePercent / 100
	nDelete := min(len(live)-nChange, len(live)*s.cfg.DeletePercent/100)
	ch := Changes{Generation: g.n}
	for _, k := range live[:nChange] {
		g.rev[k-1]++
		g.changed[k-1] = g.n
		ch.Changed = append(ch.Changed, sku(k))
	}
	for _, k := range live[nChange : nChange+nDelete] {
		g.deleted[k-1] = true
		g.changed[k-1] = g.n
		ch.Deleted = append(ch.Deleted, sku(k))
	}
	slices.Sort(ch.Changed)
	slices.Sort(ch.Deleted)
	g.last = ch
	return ch
}

// Generation returns the site's current generation.
func (s *Site) Generation() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen.n
}

// LastChanges returns what the step to the current generation changed (nothing at generation 0).
func (s *Site) LastChanges() Changes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen.last
}

// LiveItems returns how many items are not deleted.
func (s *Site) LiveItems() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.gen.deleted {
		if !d {
			n++
		}
	}
	return n
}

// live reports whether item k is not deleted.
func (s *Site) live(k int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.gen.deleted[k-1]
}

// mix is splitmix64 of (seed, generation, item): a well-spread order that any process computes
// the same.
func mix(seed int64, gen, k int) uint64 {
	z := uint64(seed) ^ uint64(gen)<<32 ^ uint64(k)
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
