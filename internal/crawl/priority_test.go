package crawl_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/node"
	"crawlq/internal/queue"
)

// With revisit: adaptive, a run asks the pages likeliest to have changed first. The demo site is
// crawled, changes a quarter of its items, and is crawled again an hour later by the crawl's
// clock: the changed items' revisit interval stays at min (1h), the others' doubles (2h). Two
// hours later a third run, with a page budget too small for the site, ranks the changed items
// (due for twice their interval: 75% likely changed) above the others (just due: 50%): the
// budget admits the changed items of the listing it reads before any other, and they are
// requested before any other item. The run does not count the items of the pages its budget
// left out as gone. The site is the demo site with Seed 7, whose changed items include item 1
// (the home page links it), so no unchanged item is queued before the listing's items are.
func TestAdaptiveAsksLikelyChangedPagesFirst(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site := demosite.New(demosite.Config{Items: 48, PerPage: 24, SlowDelay: time.Millisecond, ChangePercent: 25, Seed: 7})
	var mu sync.Mutex
	var asked []int // the item pages the third run requested, in order
	var recording atomic.Bool
	base := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k, ok := itemNumber(r.URL.Path); ok && recording.Load() {
			mu.Lock()
			asked = append(asked, k)
			mu.Unlock()
		}
		site.ServeHTTP(w, r)
	}))
	var ahead atomic.Int64 // how far the crawl's clock is ahead of the wall
	clk := clock.Func(func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	spec := adaptiveSpec("64h")
	// One handler: the jobs run one after the other, in the order they are claimed.
	n, _ := startNode(t, pool, node.Config{Clock: clk, Spiders: registry(t, spec), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 1}})
	runDemo(t, n, base)
	changed := map[int]bool{}
	for _, sku := range site.Advance().Changed {
		changed[skuItem(sku)] = true
	}
	ahead.Add(int64(time.Hour))
	runDemo(t, n, base)
	ahead.Add(int64(2 * time.Hour))

	recording.Store(true)
	budget, prio := 20, 3
	s, err := n.Crawler.Schedule(ctxT(t, time.Minute), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base},
		Priority: prio, Settings: crawl.Overrides{MaxPages: &budget}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, time.Minute)
	if r.State != crawl.StateSucceeded || r.Stats.Changes == nil {
		t.Fatalf("third run: %s, changes %v; want succeeded", r.State, r.Stats.Changes)
	}
	if g := r.Stats.Changes.Gone; g != 0 {
		t.Errorf("third run counted %d items gone; its page budget left their pages out, they are not gone", g)
	}
	mu.Lock()
	defer mu.Unlock()
	var want []int // the changed items of the first listing and the home page (item 1)
	for k := 1; k <= 24; k++ {
		if changed[k] {
			want = append(want, k)
		}
	}
	got := map[int]bool{}
	unchanged := 0 // the first unchanged item asked
	for _, k := range asked {
		got[k] = true
		switch {
		case !changed[k] && unchanged == 0:
			unchanged = k
		case changed[k] && unchanged != 0:
			t.Errorf("third run requested item %d (unchanged since the last run) before item %d (changed); asked in order %v", unchanged, k, asked)
		}
	}
	for _, k := range want {
		if !got[k] {
			t.Errorf("third run never requested item %d, changed last time, within its budget; it asked %v (changed ones: %v)", k, asked, want)
		}
	}
	lo, hi := pagePriorities(t, pool, s.RunID)
	if lo < prio-10 || hi > prio || lo == hi {
		t.Errorf("third run's page jobs have priorities %d..%d; want within %d..%d (the run's, less up to 10), and not all alike", lo, hi, prio-10, prio)
	}
}

// itemNumber returns k of a demo item page's path.
func itemNumber(path string) (int, bool) {
	s, ok := strings.CutPrefix(path, "/catalogue/item-")
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(strings.TrimSuffix(s, ".html"))
	return k, err == nil
}

// skuItem returns k of a demo item's SKU (CQ-00000k).
func skuItem(sku string) int {
	k, _ := strconv.Atoi(strings.TrimLeft(strings.TrimPrefix(sku, "CQ-"), "0"))
	return k
}

// pagePriorities returns the lowest and highest priority of a run's page jobs.
func pagePriorities(t *testing.T, pool *pgxpool.Pool, run int64) (lo, hi int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT min(priority), max(priority) FROM crawlq_job WHERE parent_id = $1 AND kind = $2`,
		run, crawl.KindPage).Scan(&lo, &hi); err != nil {
		t.Fatal(err)
	}
	return lo, hi
}

// A run whose spider does not revisit adaptive gives every page job its run's priority, exactly:
// a full crawl, or a changed_only one, is ordered as it always was.
func TestPagesHaveTheRunPriorityUnlessAdaptive(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"always", "changed_only"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			_, base := serveDemo(t, demosite.Config{Items: 60, SlowDelay: time.Millisecond})
			n, _ := startNode(t, pool, node.Config{Spiders: registry(t, revisitSpec(policy)), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 4}})
			for range 2 { // the second run of changed_only has URL state to read
				s, err := n.Crawler.Schedule(ctxT(t, time.Minute), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}, Priority: -4})
				if err != nil {
					t.Fatal(err)
				}
				if r := waitRun(t, n.Crawler, s.RunID, time.Minute); r.State != crawl.StateSucceeded {
					t.Fatalf("run %d: %s", r.ID, r.State)
				}
				if lo, hi := pagePriorities(t, pool, s.RunID); lo != -4 || hi != -4 {
					t.Errorf("run %d (revisit: %s) has page jobs at priorities %d..%d; want all at the run's, -4", s.RunID, policy, lo, hi)
				}
			}
		})
	}
}
