package bench_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"regexp"
	"testing"
	"time"

	"crawlq/internal/bench"
	"crawlq/internal/clock"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/maintain"
)

// The soak's correctness on a small scale: runs back to back with maintenance on, its clock moved
// two days ahead so every finished run is past its windows. What the runs leave behind is deleted
// while they go on, and after the last pass only the runs' rows and their items are left.
func TestSoakMaintenanceKeepsTablesSmall(t *testing.T) {
	url := dbtest.URL(t)
	const schema = "crawlq_soak_test"
	t.Cleanup(func() {
		dbtest.Open(t, url, 1).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	site := demosite.New(demosite.Config{Items: 40, PerPage: 10, SlowDelay: time.Millisecond})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: site}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	perRun := int64(len(site.Expected().Paths))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := dbtest.Open(t, url+"&search_path="+schema, 2)
	count := func(sql string) int {
		var n int
		if err := pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
		return n
	}
	// Maintenance keeps up while the runs go on: at no report do the once keys (one per page, on
	// its page job since migration 0015, or stored apart before it) hold more than the run going on and the two a pass may be behind by. Counted
	// exactly at each report, not from the report's n_live_tup: a backend flushes its statistics
	// up to 10 s late, so the statistic can still count keys a pass already deleted.
	var reports []bench.SoakReport
	maxOnce := 0
	onReport := func(r bench.SoakReport) {
		reports = append(reports, r)
		if n := count("SELECT (SELECT count(*) FROM crawlq_job_once) + (SELECT count(*) FROM crawlq_job WHERE once_h IS NOT NULL)"); n > maxOnce {
			maxOnce = n
		}
	}
	var out bytes.Buffer
	reps, err := bench.Soak(ctx, bench.Config{URL: url, Schema: schema, Workers: 1, Concurrency: 8, Out: &out},
		bench.SoakConfig{Site: "http://" + l.Addr().String(), Spider: "demo", Pages: 5 * perRun, Every: 100 * time.Millisecond,
			Maintain: maintain.Config{Interval: 10 * time.Millisecond, Clock: clock.Func(func() time.Time { return time.Now().Add(48 * time.Hour) })},
			Report:   onReport})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(reps) < 2 || len(reports) != len(reps) {
		t.Fatalf("%d reports (%d passed to Report)", len(reps), len(reports))
	}
	if !regexp.MustCompile(`(?m)^SOAK t=\d+s pages=\d+ runs=\d+ pages_per_s=\d+ total_mb=[0-9.]+ without_items_mb=[0-9.]+ oldest_xact_s=[0-9.]+`).MatchString(out.String()) ||
		!regexp.MustCompile(`(?m)^RESULT system=crawlq op=soak pages=\d+ runs=\d+ `).MatchString(out.String()) {
		t.Errorf("output:\n%s", out.String())
	}
	last := reps[len(reps)-1]
	runs := last.Runs
	if !last.Maintenance.Ran || runs < 3 || last.Pages < 5*perRun {
		t.Errorf("last report %+v", last)
	}
	for table, want := range map[string]int{"crawlq_job": 0, "crawlq_job_once": 0, "crawlq_run_stat": 0, "crawlq_robots": 0,
		"crawlq_domain": 0, "crawlq_run": runs, "crawlq_item": runs * site.Expected().Items} {
		if got := count("SELECT count(*) FROM " + table); got != want {
			t.Errorf("%s holds %d rows after the soak's last pass, want %d", table, got, want)
		}
	}
	if n := count("SELECT count(*) FROM crawlq_run WHERE purged_at IS NULL OR state <> 'succeeded'"); n != 0 {
		t.Errorf("%d runs not succeeded and purged", n)
	}
	if maxOnce > 3*int(perRun) {
		t.Errorf("%d once keys at a report, more than three runs' worth (%d)", maxOnce, 3*perRun)
	}
}
