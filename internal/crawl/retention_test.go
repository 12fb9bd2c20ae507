package crawl_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/dbsqlc"
	"crawlq/internal/dbtest"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/urlstate"
)

// Retention soak: a site whose pages are replaced every generation (its home links ten pages, new
// ones each time) is recrawled six times, 40 minutes of the crawl's clock apart, with state_ttl
// 1h and retention's pass after each run. A URL's state is kept state_ttl from the last run that
// reached it by the crawl's clock, so after each pass the state holds what the last run reached
// and nothing older: bounded, where without retention it grows by ten URLs a run. The clock is
// moved, not waited for.
func TestRetentionBoundsURLState(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	var gen atomic.Int64
	base := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := gen.Load()
		switch {
		case r.URL.Path == "/":
			var b strings.Builder
			for i := range 10 {
				fmt.Fprintf(&b, `<a href="/p/%d">p</a>`, g*10+int64(i))
			}
			fmt.Fprintf(w, "<html><body><h1>home %d</h1>%s</body></html>", g, b.String())
		case strings.HasPrefix(r.URL.Path, "/p/"):
			fmt.Fprintf(w, "<html><body><h1>%s</h1></body></html>", r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	}))
	var ahead atomic.Int64 // how far the crawl's clock is ahead of the wall
	clk := clock.Func(func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	spec := strings.Replace(edgeSpec, "name: edge\n", "name: edge\nrevisit: changed_only\nstate_ttl: 1h\n", 1)
	n, _ := startNode(t, pool, node.Config{Clock: clk, MaintainEvery: -1, Spiders: registry(t, spec), Workers: 1,
		Worker: queue.WorkerConfig{Concurrency: 8}})
	ctx := ctxT(t, 3*time.Minute)
	q := dbsqlc.New(pool)
	var expired int64
	for g := range int64(6) {
		gen.Store(g)
		s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "edge", Args: map[string]string{"base_url": base}})
		if err != nil {
			t.Fatal(err)
		}
		if r := waitRun(t, n.Crawler, s.RunID, time.Minute); r.State != crawl.StateSucceeded || r.Stats.Items != 10 {
			t.Fatalf("run %d (generation %d): %s with %d items; want succeeded with the 10 new pages' items", s.RunID, g, r.State, r.Stats.Items)
		}
		ahead.Add(int64(40 * time.Minute))
		gone, err := urlstate.Expire(ctx, q, clk.Now(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		expired += gone
		var rows, last int64
		if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE run_id = $1) FROM crawlq_url_state WHERE spider = 'edge'`,
			s.RunID).Scan(&rows, &last); err != nil {
			t.Fatal(err)
		}
		// The last run reached the home and its ten pages (robots.txt is no page).
		if rows != 11 || last != 11 {
			t.Errorf("after generation %d and retention at +%s: %d URL states (%d of the last run); want the last run's 11 alone",
				g, time.Duration(ahead.Load()), rows, last)
		}
	}
	if expired != 50 {
		t.Errorf("retention removed %d URL states over the soak; want the 10 pages each of the 5 generations before the last", expired)
	}
}
