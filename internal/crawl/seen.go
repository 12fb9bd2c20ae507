package crawl

import "sync"

// seenCache remembers links this process knows its run has queued (their once keys have
// committed), so pages need not send them again: a site's navigation links appear on every page,
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
		k := seenKeyOf(run, p.URL)
		if _, ok := s.cur[k]; ok {
			continue
		}
		if _, ok := s.prev[k]; ok {
			continue
		}
		out = append(out, p)
	}
	return out
}

// add records keys whose seen rows have committed.
func (s *seenCache) add(keys []seenKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if len(s.cur) >= s.max {
			s.prev, s.cur = s.cur, make(map[seenKey]struct{}, len(s.cur))
		}
		s.cur[k] = struct{}{}
	}
}
