package api_test

import (
	"context"
	"fmt"
	"testing"

	"crawlq/internal/events"
	"crawlq/internal/spider"
)

// status and listjobs show a judged run's outcome, verdict and report (stats, coverage).
func TestStatusAndListJobsShowReports(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	var id int64
	if err := f.pool.QueryRow(ctx, `INSERT INTO crawlq_run (spider, queue) VALUES ('demo', 'crawl') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE crawlq_run SET state = 'succeeded', started_at = now(), finished_at = now(), items = 2, pages = 3 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO crawlq_item (run_id, key, spider, url, data) VALUES
		($1, 'a', 'demo', 'http://x/a', '{"title":"A"}'), ($1, 'b', 'demo', 'http://x/b', '{"title":" "}')`, id); err != nil {
		t.Fatal(err)
	}
	min := int64(5)
	p, err := events.New(events.Config{Pool: f.pool, Monitors: func(string, string) (spider.Monitors, error) { return spider.Monitors{MinItems: &min}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	job := f.ok(t, fmt.Sprintf(`{"action":"status","job":"%d"}`, id))["job"].(map[string]any)
	if job["outcome"] != "monitors_failed" || job["monitors"] != "failed" {
		t.Fatalf("status job %v", job)
	}
	rep := job["report"].(map[string]any)
	if cov := rep["field_coverage"].(map[string]any); cov["title"] != float64(1) || rep["items_stored"] != float64(2) {
		t.Fatalf("report %v", rep)
	}
	lj := f.ok(t, `{"action":"listjobs","spider":"demo"}`)
	fin := lj["finished"].([]any)
	if len(fin) != 1 || fin[0].(map[string]any)["outcome"] != "monitors_failed" {
		t.Fatalf("listjobs finished %v", fin)
	}
}
