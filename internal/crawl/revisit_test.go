package crawl_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/dbsqlc"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/urlstate"
)

// revisitSpec is the demo spider with a revisit policy.
func revisitSpec(policy string) string {
	return strings.Replace(demoWithRetry("  attempts: 2\n"), "concurrency: 8\n", "concurrency: 8\nrevisit: "+policy+"\n", 1)
}

// adaptiveSpec is the demo spider revisiting adaptive, its interval between 1h and longest.
func adaptiveSpec(longest string) string {
	return strings.Replace(revisitSpec("adaptive"), "revisit: adaptive\n", "revisit: adaptive\nrevisit_interval: {min: 1h, max: "+longest+"}\n", 1)
}

// runDemo runs the spider "demo" against base and waits for its end.
func runDemo(t *testing.T, n *node.Node, base string) *crawl.Run {
	t.Helper()
	s, err := n.Crawler.Schedule(ctxT(t, time.Minute), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, 3*time.Minute)
	if r.State != crawl.StateSucceeded || r.Stats.Changes == nil {
		t.Fatalf("run %d: %s, changes %v; want succeeded with its item changes; failed pages %+v", r.ID, r.State, r.Stats.Changes, r.FailedPages)
	}
	return r
}

// changedKeys lists a run's item changes of one kind.
func changedKeys(t *testing.T, pool *pgxpool.Pool, run int64, kind string) []string {
	t.Helper()
	all, err := urlstate.Changes(context.Background(), dbsqlc.New(pool), run, "", "", 100000)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range all {
		if c.Change == kind {
			keys = append(keys, c.Key)
		}
	}
	return keys
}

// With revisit: changed_only, a second run of the unchanged site asks every page with its
// validators and gets 304s only: nothing is parsed or emitted, and every item is reported
// unchanged. After the site changes 5% of its items and deletes 1%, the next run reports exactly
// those as changed and gone, and emits only the changed ones.
func TestChangedOnlyRecrawlsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site, base := serveDemo(t, demosite.Config{Items: 1000, SlowDelay: time.Millisecond, ChangePercent: 5, DeletePercent: 1, Seed: 3})
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, revisitSpec("changed_only")), Workers: 2, Worker: queue.WorkerConfig{Concurrency: 8}})

	first := runDemo(t, n, base)
	if c := *first.Stats.Changes; c != (urlstate.Counts{New: 1000}) || first.Stats.Items != 1000 {
		t.Fatalf("first run: changes %+v, %d items; want 1000 new items", c, first.Stats.Items)
	}

	second := runDemo(t, n, base)
	if c := *second.Stats.Changes; c != (urlstate.Counts{Unchanged: 1000}) {
		t.Errorf("second run: changes %+v; want all 1000 unchanged", c)
	}
	stored, err := items.CountItems(context.Background(), pool, second.ID)
	if err != nil || second.Stats.Items != 0 || stored != 0 {
		t.Errorf("second run emitted %d items (%d stored, %v); want none", second.Stats.Items, stored, err)
	}
	// Every page that answered with a body the first time answered 304.
	if nm := second.Stats.ErrorsByKind["not_modified"]; nm != first.Stats.Pages || second.Stats.Pages != first.Stats.Pages {
		t.Errorf("second run: %d pages, %d of them 304; want all %d", second.Stats.Pages, nm, first.Stats.Pages)
	}

	// The pages behind an unchanged page are asked within its job (a walk): few are jobs.
	jobs, walked := pageJobs(t, pool, second.ID), second.Stats.ErrorsByKind["walked"]
	if jobs*10 > second.Stats.Pages || walked+jobs < second.Stats.Pages {
		t.Errorf("second run: %d page jobs and %d pages walked for %d pages; want the unchanged pages walked, not a job each", jobs, walked, second.Stats.Pages)
	}

	ch := site.Advance()
	third := runDemo(t, n, base)
	if c, want := *third.Stats.Changes, (urlstate.Counts{Changed: 50, Unchanged: 940, Gone: 10}); c != want {
		t.Errorf("third run: changes %+v; want %+v", c, want)
	}
	if got := changedKeys(t, pool, third.ID, urlstate.ChangeChanged); !slices.Equal(got, ch.Changed) {
		t.Errorf("third run lists %d changed items, the site changed %d (first: %v vs %v)", len(got), len(ch.Changed), head(got), head(ch.Changed))
	}
	if got := changedKeys(t, pool, third.ID, urlstate.ChangeGone); !slices.Equal(got, ch.Deleted) {
		t.Errorf("third run lists %d gone items, the site deleted %d (first: %v vs %v)", len(got), len(ch.Deleted), head(got), head(ch.Deleted))
	}
	if third.Stats.Items != 50 {
		t.Errorf("third run emitted %d items; want the 50 changed", third.Stats.Items)
	}
}

// pageJobs counts the page jobs of a run.
func pageJobs(t *testing.T, pool *pgxpool.Pool, run int64) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM crawlq_job WHERE parent_id = $1 AND kind = $2`, run, crawl.KindPage).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func head(s []string) []string { return s[:min(3, len(s))] }

// With revisit: adaptive, a page fetched again before its revisit interval has passed is not
// requested at all: a second run at once requests no page of the site, follows the stored links
// and reports every item unchanged.
func TestAdaptiveSkipsPagesNotDue(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site, base := serveDemo(t, demosite.Config{Items: 60, SlowDelay: time.Millisecond})
	spec := adaptiveSpec("24h")
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, spec), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 8}})
	first := runDemo(t, n, base)
	site.ResetHits()
	second := runDemo(t, n, base)
	if c := *second.Stats.Changes; c != (urlstate.Counts{Unchanged: 60}) {
		t.Errorf("second run: changes %+v; want all 60 unchanged", c)
	}
	if nd := second.Stats.ErrorsByKind["not_due"]; nd != first.Stats.Pages {
		t.Errorf("second run: %d pages not due; want all %d the first run fetched", nd, first.Stats.Pages)
	}
	for p, h := range site.Hits() {
		if strings.HasPrefix(p, "/catalogue/") && p != demosite.NotFoundPath && p != demosite.RedirectPath && p != demosite.FeaturedPath {
			t.Errorf("second run requested %s %d times; it was not due", p, h)
		}
	}
}

// With revisit: adaptive, a page that yields no item but links others (a listing) changed when its
// links did: after the demo site deletes some items, the listings that no longer link them keep
// the shortest interval, where one whose links stayed (the home page) has its interval doubled.
func TestAdaptiveListingWithOtherLinksChanged(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site, base := serveDemo(t, demosite.Config{Items: 48, PerPage: 24, SlowDelay: time.Millisecond, DeletePercent: 10, Seed: 3})
	var ahead atomic.Int64 // how far the crawl's clock is ahead of the wall
	clk := clock.Func(func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	spec := adaptiveSpec("24h")
	n, _ := startNode(t, pool, node.Config{Clock: clk, Spiders: registry(t, spec), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 8}})
	runDemo(t, n, base)
	deleted := site.Advance().Deleted
	ahead.Add(int64(time.Hour))
	runDemo(t, n, base)
	listing := func(k int) string { return base + "/catalogue/page-" + strconv.Itoa((k-1)/24+1) + ".html" }
	lost := map[string]bool{} // the listings that no longer link a deleted item
	for _, sku := range deleted {
		lost[listing(skuItem(sku))] = true
	}
	if len(lost) == 0 {
		t.Fatal("the site deleted no item")
	}
	for _, u := range []string{base + "/", listing(1), listing(48)} {
		want := 2 * time.Hour
		if lost[u] {
			want = time.Hour
		}
		var s int64
		if err := pool.QueryRow(context.Background(), `SELECT interval_s FROM crawlq_url_state WHERE spider = 'demo' AND url = $1`, u).Scan(&s); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if got := time.Duration(s) * time.Second; got != want {
			t.Errorf("%s (links a deleted item: %v): revisit interval %s after the second run; want %s", u, lost[u], got, want)
		}
	}
}
