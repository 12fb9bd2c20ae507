package bench_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"crawlq/internal/bench"
	"crawlq/internal/dbtest"
)

// The benchmark runs end to end on a small scale and prints the peers' RESULT format. (Its
// figures are for `crawlq bench`, never asserted here.)
func TestBenchPrintsResults(t *testing.T) {
	url := dbtest.URL(t)
	t.Cleanup(func() {
		dbtest.Open(t, url, 1).Exec(context.Background(), "DROP SCHEMA IF EXISTS crawlq_bench_test CASCADE")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := bench.Run(ctx, bench.Config{URL: url, Schema: "crawlq_bench_test", Jobs: 3000, Backlog: 2000,
		Ops: []string{"insert", "work", "unique"}, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`^RESULT system=crawlq op=insert jobs=3000 seconds=[0-9.]+ jobs_per_s=[0-9]+$`,
		`^RESULT system=crawlq op=work jobs=3000 seconds=[0-9.]+ jobs_per_s=[0-9]+$`,
		`^RESULT system=crawlq op=claim_latency backlog=2000 p50_ms=[0-9.]+ p99_ms=[0-9.]+ samples=1000$`,
		`^RESULT system=crawlq op=unique jobs=3000 seconds=[0-9.]+ jobs_per_s=[0-9]+$`,
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want) || len(res) != len(want) {
		t.Fatalf("output:\n%s", out.String())
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], w)
		}
	}
	if _, err := bench.Run(ctx, bench.Config{URL: url, Schema: "Bad Schema", Out: &out}); err == nil {
		t.Error("a bad schema name was accepted")
	}
}
