package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"crawlq/internal/dbtest"
)

// A crawled page writes at most 2.5 rows (its job's insert and completion, and a share of its
// group commit's item set, stats and count rows), counted by pg_stat on the crawl's own schema,
// TOAST included, on both shapes of the bench site: a chain of listing pages (hops, small
// groups) and a wide one (two listing pages open the whole frontier). An item a row made it 3 and
// more. Its statements are logged, not checked: how many a page costs depends on how full its
// groups get, which the machine's load decides (0.07 a page on the quiet chain benchmark, 0.26
// in a loaded CI run); the statements a transaction sends are checked by
// TestTxSendsOnlyItsStatementsAsOneTransaction (internal/queue).
func TestCrawlWritesAtMostTwoAndAHalfRowsPerPage(t *testing.T) {
	const items, maxRows = 2000, 2.5
	url := dbtest.URL(t)
	for _, c := range []struct {
		name string
		per  int
	}{{"chain", 20}, {"wide", items / 2}} {
		t.Run(c.name, func(t *testing.T) {
			site := httptest.NewServer(catalogue(items, c.per))
			defer site.Close()
			schema := "crawlq_bench_rows_" + c.name
			t.Cleanup(func() {
				dbtest.Open(t, url, 1).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var out bytes.Buffer
			if _, err := Crawl(ctx, Config{URL: url, Schema: schema, Out: &out}, site.URL); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("op=crawl pages=%d items=%d ", 1+(items+c.per-1)/c.per+items, items); !bytes.Contains(out.Bytes(), []byte(want)) {
				t.Fatalf("want %q in\n%s", want, out.String())
			}
			m := regexp.MustCompile(`op=crawl_dbcost .* schema_rows_written_per=([0-9.]+)`).FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no schema_rows_written_per in %q", out.String())
			}
			rows, _ := strconv.ParseFloat(m[1], 64)
			t.Logf("%s: %.2f rows written per page", c.name, rows)
			// Statements as sent (or pg_stat_statements' calls): where pages finish in small groups
			// (the chain), a page's share of its group's statements and of its listing page's
			// discovery is what the database parses and runs for it.
			m = regexp.MustCompile(`op=crawl_dbcost .*statements_per=([0-9.]+) round_trips_per=([0-9.]+)`).FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no statements_per in %q", out.String())
			}
			t.Logf("%s: %s statements, %s round trips per page", c.name, m[1], m[2])
			if rows > maxRows {
				t.Errorf("a page wrote %.2f rows, want at most %.1f\n%s", rows, maxRows, out.String())
			}
			var stored, keys int64
			err := dbtest.Open(t, url, 1).QueryRow(ctx, fmt.Sprintf("SELECT count(*), count(DISTINCT key) FROM %s.crawlq_item", schema)).Scan(&stored, &keys)
			if err != nil {
				t.Fatal(err)
			}
			if stored != items || keys != items {
				t.Errorf("%d items stored, %d keys, want %d", stored, keys, items)
			}
		})
	}
}
