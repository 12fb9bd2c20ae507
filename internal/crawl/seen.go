package crawl

import "sync"

// seenCache remembers links this process knows its run has queued (their once keys have
// committed) or reached in a walk (walk.go; marked while the walk is under way), so pages need
// not send them again: a site's navigation links appear on every page,
// and without it each page would re-send them all. A run's once keys are never forgotten, so a hit
// is always right; a miss costs a skipped insert. Two generations
// bound the memory: when the current one fills up it becomes the previous one, and the older is
// dropped.
type seenCache struct {
	mu        sync.Mutex
	cur, prev map[seenKey]struct{}
	max       int
}

func newSeenCache(max int) *seenCache {
	return &seenCache{cur: map[seenKey]struct{}{}, max: max}
}

func seenKeyOf(run int64, url string) seenKey { return seenKey{run, urlHash(url)} }

// unknown returns the pages of run not known to be seen (reusing the slice).
func (s *seenCache) unknown(run int64, pages []pageArgs) []pageArgs {
	if len(pages) == 0 {
		return pages
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := pages[:0]
	for _, p := range pages {
		if !s.has(seenKeyOf(run, p.URL)) {
			out = append(out, p)
		}
	}
	return out
}

// has reports whether k is in either generation; the caller holds mu.
func (s *seenCache) has(k seenKey) bool {
	if _, ok := s.cur[k]; ok {
		return true
	}
	_, ok := s.prev[k]
	return ok
}

// add records keys whose seen rows have committed.
func (s *seenCache) add(keys []seenKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		s.put(k)
	}
}

// mark returns the pages of run not known to be seen and records them seen, in one step, so two
// walks of this process never both take a page (walk.go).
func (s *seenCache) mark(run int64, pages []pageArgs) []pageArgs {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []pageArgs
	for _, p := range pages {
		if k := seenKeyOf(run, p.URL); !s.has(k) {
			s.put(k)
			out = append(out, p)
		}
	}
	return out
}

// put adds k to the current generation, starting a new one when it is full; the caller holds mu.
func (s *seenCache) put(k seenKey) {
	if len(s.cur) >= s.max {
		s.prev, s.cur = s.cur, make(map[seenKey]struct{}, len(s.cur))
	}
	s.cur[k] = struct{}{}
}

// remove forgets keys a walk marked and did not take after all (left to page jobs, or its page
// did not commit), so that they are queued or walked again.
func (s *seenCache) remove(keys []seenKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.cur, k)
		delete(s.prev, k)
	}
}
