//go:build chaos

package chaos

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/crawl"
	"crawlq/internal/demosite"
	"crawlq/internal/node"
	"crawlq/internal/spider"
	"crawlq/internal/testwait"
	"crawlq/internal/urlstate"
	"crawlq/spiders"
)

// URL state chaos: a spider that recrawls only what changed (revisit: changed_only) crawls the
// 5,000-item demo site three times with 3 `crawlq worker` processes: its first run while a random
// worker is SIGKILLed about every second, a second after the site changed 5% of its items and
// deleted 1% with PostgreSQL crashed (immediate stop) and restarted mid-run, and a third of the
// unchanged site under SIGKILLs again (walked: the pages behind each 304 asked within its job; every
// worker is killed once while a walk is under way). A page's state, its items' changes and their counts commit
// with the page, so each run's changes are exact (no URL's state lost, none counted twice), and
// the state holds exactly the live items.
func urlStateChaos(t *testing.T, bin string, sum *summary) {
	pg := startPG(t)
	pool := pg.pool(t, 8)
	instrument(t, pool)
	site, base := serveSite(t, demosite.Config{Items: 5000, SlowDelay: 20 * time.Millisecond, ChangePercent: 5, DeletePercent: 1, Seed: 3})
	spec := revisitDemo(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "demo_revisit.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := spider.NewRegistry()
	if err := reg.LoadFS(fstest.MapFS{"demo_revisit.yaml": {Data: []byte(spec)}}); err != nil {
		t.Fatal(err)
	}
	n, err := node.New(node.Config{Pool: pool, Spiders: reg, Queues: []string{"control"}})
	if err != nil {
		t.Fatal(err)
	}
	c := n.Crawler
	var ws []*workerProc
	for i := range 3 {
		ws = append(ws, newWorker(t, bin, pg.url("crawlq"), i, "--queues", "crawl", "--workers", "1",
			"--concurrency", "16", "--lease", "4s", "--spiders", dir))
	}
	run := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := c.Schedule(ctx, crawl.ScheduleParams{Spider: "demo_revisit", Args: map[string]string{"base_url": base}})
		if err != nil {
			t.Fatal(err)
		}
		return s.RunID
	}
	live := int64(5000)
	check := func(id int64, want urlstate.Counts, changed, gone []string) *crawl.Run {
		t.Helper()
		r := waitRun(t, c, id, 5*time.Minute, nil)
		if r.State != crawl.StateSucceeded || r.Stats.Changes == nil || *r.Stats.Changes != want {
			t.Fatalf("run %d: %s, changes %+v; want succeeded with %+v", id, r.State, r.Stats.Changes, want)
		}
		checkURLState(t, pool, id, live, int64(want.New+want.Changed), changed, gone)
		return r
	}

	stop := startKiller(t, ws)
	first := check(run(), urlstate.Counts{New: 5000}, nil, nil)
	kills1 := stop()

	ch := site.Advance()
	live -= int64(len(ch.Deleted))
	id := run()
	testwait.For(t, "a quarter of the second run's pages fetched", func() (int64, bool) {
		r, err := c.Get(context.Background(), id)
		if err != nil {
			return 0, false
		}
		return r.Stats.Pages, r.Stats.Pages >= first.Stats.Pages/4
	})
	logAt := make([]int64, len(ws))
	for i, w := range ws {
		logAt[i] = w.logSize(t)
	}
	stopped := time.Now()
	pg.stopImmediate(t)
	waitRefused(t, ws, logAt, stopped, time.Minute)
	down := time.Since(stopped)
	pg.start(t)
	second := check(id, urlstate.Counts{Changed: len(ch.Changed), Unchanged: 5000 - len(ch.Changed) - len(ch.Deleted), Gone: len(ch.Deleted)}, ch.Changed, ch.Deleted)

	// The third run: every worker is SIGKILLed at once while a walk is under way (far more pages
	// asked than recorded: page jobs in flight are 48 at most), then at random.
	site.ResetHits()
	id = run()
	testwait.For(t, "a walk under way in the third run", func() (int64, bool) {
		r, err := c.Get(context.Background(), id)
		if err != nil {
			return 0, false
		}
		var asked int64
		for p, h := range site.Hits() {
			if strings.HasPrefix(p, "/catalogue/") {
				asked += h
			}
		}
		if r.Finished() {
			t.Fatalf("the third run finished before a walk was seen under way (%d pages asked, %d recorded)", asked, r.Stats.Pages)
		}
		return asked - r.Stats.Pages, asked-r.Stats.Pages > 100
	})
	for _, w := range ws {
		w.kill(syscall.SIGKILL)
		w.start(t)
	}
	stop = startKiller(t, ws)
	third := check(id, urlstate.Counts{Unchanged: int(live)}, nil, nil)
	kills3 := stop() + int64(len(ws))
	// The unchanged site is walked: the pages behind a 304 are asked within its job, and a worker
	// killed mid-walk commits none of it, so its page, retried, walks again; each page still
	// counts once (all 304s), and few pages are jobs.
	var jobs int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM crawlq_job WHERE parent_id = $1 AND kind = $2`, third.ID, crawl.KindPage).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if nm := third.Stats.ErrorsByKind["not_modified"]; nm != third.Stats.Pages || third.Stats.Pages != live+(first.Stats.Pages-5000) || jobs*5 > third.Stats.Pages {
		t.Errorf("third run: %d pages (%d of them 304) in %d page jobs; want the %d live pages, each a 304 counted once, most walked (not a job each)",
			third.Stats.Pages, nm, jobs, live+(first.Stats.Pages-5000))
	}
	sum.add("url state: the 5,000-item demo site recrawled with revisit: changed_only by 3 `crawlq worker` processes: first run under %d SIGKILLs (changes %+v), second after 5%% changed and 1%% deleted with PostgreSQL stopped -m immediate mid-run (down %s; changes %+v), third of the unchanged site under %d SIGKILLs (changes %+v, %d of %d pages 304, %d page jobs: the rest walked); each run's changes exact, its changed and gone keys the site's, the state's items the %d live ones, no duplicate change",
		kills1, *first.Stats.Changes, down.Round(10*time.Millisecond), *second.Stats.Changes, kills3, *third.Stats.Changes,
		third.Stats.ErrorsByKind["not_modified"], third.Stats.Pages, jobs, live)
}

// revisitDemo is spiders/demo.yaml as demo_revisit with revisit: changed_only and no monitors
// (the scenario checks the run's figures itself).
func revisitDemo(t *testing.T) string {
	b, err := spiders.FS.ReadFile("demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := strings.Cut(string(b), "\n# Checked when each run ends")
	spec = strings.Replace(spec, "\nconcurrency: 4\n", "\nconcurrency: 16\n", 1)
	return strings.Replace(spec, "\nname: demo\n", "\nname: demo_revisit\n", 1) + "\nrevisit: changed_only\n"
}

// checkURLState checks the URL state a run of demo_revisit left: every URL's items are the live
// ones (live in all, none twice), the run recorded each new or changed item once (emitted: their
// number) and listed as changed and gone exactly the keys given (nil: none), and no change twice.
func checkURLState(t *testing.T, pool *pgxpool.Pool, run, live, emitted int64, changed, gone []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var keys, distinct, items, dupItems, changes int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT k) FROM crawlq_url_state, jsonb_object_keys(items) AS k
		WHERE spider = 'demo_revisit'`).Scan(&keys, &distinct); err != nil {
		t.Fatal(err)
	}
	if keys != live || distinct != live {
		t.Errorf("run %d: the URL state holds %d item keys (%d distinct); want the %d live items once each", run, keys, distinct, live)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) - count(DISTINCT key) FROM crawlq_item WHERE run_id = $1`, run).Scan(&items, &dupItems); err != nil {
		t.Fatal(err)
	}
	if items != emitted || dupItems != 0 {
		t.Errorf("run %d emitted %d items (%d twice); want %d, once each", run, items, dupItems, emitted)
	}
	for kind, want := range map[string][]string{urlstate.ChangeChanged: changed, urlstate.ChangeGone: gone} {
		var got []string
		if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(key ORDER BY key), '{}') FROM crawlq_item_change WHERE run_id = $1 AND change = $2`,
			run, kind).Scan(&got); err != nil {
			t.Fatal(err)
		}
		want = slices.Clone(want)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("run %d lists %d %s items; the site's are %d", run, len(got), kind, len(want))
		}
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM crawlq_item_change WHERE run_id = $1`, run).Scan(&changes); err != nil {
		t.Fatal(err)
	}
	if want := emitted + int64(len(gone)); changes != want {
		t.Errorf("run %d recorded %d item changes; want %d (its new and changed items, and the gone)", run, changes, want)
	}
}
