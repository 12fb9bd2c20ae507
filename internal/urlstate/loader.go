package urlstate

import (
	"context"
	"sync"
	"time"

	"crawlq/internal/dbsqlc"
)

// Loader reads URL states for many pages at once. A Load joins the keys waiting to be read; one
// batch is read at a time, each line's keys in one statement, so the keys asked while a batch is
// in flight gather for the next: under load one round trip serves the pages a process starts
// together (a recrawl's page costs no read of its own), and a page alone waits for one. The
// batches are read by a goroutine that lives while keys wait.
type Loader struct {
	q *dbsqlc.Queries

	mu      sync.Mutex
	waiting []*loadReq
	busy    bool // a goroutine is reading batches
}

// maxLoad bounds the keys of one batch (and so the array one statement carries).
const maxLoad = 1000

// loadTimeout bounds the read of one batch: it serves many callers, so no caller's context does.
const loadTimeout = 30 * time.Second

type loadReq struct {
	key  Key
	st   *State
	err  error
	done chan struct{}
}

// NewLoader returns a Loader reading through q.
func NewLoader(q *dbsqlc.Queries) *Loader { return &Loader{q: q} }

// Load returns the state of k, or nil when no run of the line has reached it.
func (l *Loader) Load(ctx context.Context, k Key) (*State, error) {
	r := &loadReq{key: k, done: make(chan struct{})}
	l.mu.Lock()
	l.waiting = append(l.waiting, r)
	if !l.busy {
		l.busy = true
		go l.serve()
	}
	l.mu.Unlock()
	select {
	case <-r.done:
		return r.st, r.err
	case <-ctx.Done():
		return nil, ctx.Err() // the batch is read anyway, for the others
	}
}

// serve reads batches until no key waits.
func (l *Loader) serve() {
	for {
		l.mu.Lock()
		n := min(len(l.waiting), maxLoad)
		if n == 0 {
			l.busy = false
			l.mu.Unlock()
			return
		}
		batch := l.waiting[:n:n]
		l.waiting = l.waiting[n:]
		if len(l.waiting) == 0 {
			l.waiting = nil
		}
		l.mu.Unlock()
		l.read(batch)
	}
}

// read reads one batch, a statement per line.
func (l *Loader) read(batch []*loadReq) {
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	type line struct{ spider, line string }
	byLine := map[line][]*loadReq{}
	for _, r := range batch {
		k := line{r.key.Spider, r.key.Line}
		byLine[k] = append(byLine[k], r)
	}
	for k, rs := range byLine {
		urls := make([]string, len(rs))
		for i, r := range rs {
			urls[i] = r.key.URL
		}
		states, err := LoadMany(ctx, l.q, k.spider, k.line, urls)
		for _, r := range rs {
			r.st, r.err = states[r.key.URL], err
			close(r.done)
		}
	}
}
