package crawl_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
	"crawlq/internal/urlstate"
)

// homeTrouble serves the demo site, with its home page in one of three moods: as it is (0), a
// maintenance page without links (1), or 403 Forbidden (2).
type homeTrouble struct {
	site *demosite.Site
	mood atomic.Int32
}

func (h *homeTrouble) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" {
		switch h.mood.Load() {
		case 1:
			_, _ = w.Write([]byte("<html><body><p>Down for maintenance.</p></body></html>"))
			return
		case 2:
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
	}
	h.site.ServeHTTP(w, r)
}

// A run that fails (its home page refused) reached nothing, and counts nothing gone: the next run
// finds every item unchanged. A site whose items a run found gone (its home page showed no links
// for a while) gives them back as new when they are there again: their pages are fetched and
// parsed again, not answered 304 from a state that no longer holds their items.
func TestGoneItemsComeBackAndAFailedRunCountsNoneGone(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	h := &homeTrouble{site: demosite.New(demosite.Config{Items: 60, SlowDelay: time.Millisecond})}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, revisitSpec("changed_only")), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 8}})

	if c := *runDemo(t, n, srv.URL).Stats.Changes; c != (urlstate.Counts{New: 60}) {
		t.Fatalf("first run: changes %+v; want 60 new", c)
	}

	h.mood.Store(2)
	s, err := n.Crawler.Schedule(ctxT(t, time.Minute), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	failed := waitRun(t, n.Crawler, s.RunID, 3*time.Minute)
	if failed.State != crawl.StateFailed {
		t.Errorf("run with the home page refused: %s; want failed", failed.State)
	}
	if c := failed.Stats.Changes; c != nil && c.Gone != 0 {
		t.Errorf("run with the home page refused counted %d items gone; want none: it reached nothing", c.Gone)
	}
	lines, err := runlog.ReadAll(context.Background(), runlog.Postgres{Pool: pool}, s.RunID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var said bool
	for _, l := range lines {
		said = said || strings.Contains(l.Text, "items of pages not reached are not counted gone: it fetched no page")
	}
	if !said {
		t.Errorf("the failed run's log does not say why nothing was counted gone: %+v", lines)
	}
	h.mood.Store(0)
	if c := *runDemo(t, n, srv.URL).Stats.Changes; c != (urlstate.Counts{Unchanged: 60}) {
		t.Errorf("run after the refused one: changes %+v; want all 60 unchanged", c)
	}

	h.mood.Store(1)
	if c := *runDemo(t, n, srv.URL).Stats.Changes; c != (urlstate.Counts{Gone: 60}) {
		t.Fatalf("run with the home page down for maintenance: changes %+v; want all 60 gone", c)
	}
	h.mood.Store(0)
	if c := *runDemo(t, n, srv.URL).Stats.Changes; c != (urlstate.Counts{New: 60}) {
		t.Errorf("run with the home page back: changes %+v; want the 60 items back as new", c)
	}
}
