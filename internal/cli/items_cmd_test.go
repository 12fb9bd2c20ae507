package cli_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"crawlq/internal/dbtest"
)

// crawlq items exports every item of a 12,000-item run (it stopped at 10,000, and printed 100 by
// default), as JSON Lines or CSV, to standard output or whole to a file; --limit stops early.
func TestItemsExportsEveryItem(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	code, out, errs := run(t, url, "schedule", "--spider", "demo", "--delay", "1h")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("schedule: %d %q %q", code, out, errs)
	}
	pool := dbtest.Open(t, url, 1)
	const n = 12000
	if _, err := pool.Exec(context.Background(), `INSERT INTO crawlq_item (run_id, key, spider, url, data)
		SELECT $1, 'k' || lpad(i::text, 6, '0'), 'demo', 'http://x/' || i,
		       jsonb_build_object('title', 'Item, "' || i || '"', 'price', i, 'tags', CASE WHEN i % 2 = 0 THEN '["a"]'::jsonb END,
		                          'url', 'http://own/' || i)
		FROM generate_series(1, $2::int) i`, id, n); err != nil {
		t.Fatal(err)
	}

	code, out, errs = run(t, url, "items", id)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != n {
		t.Fatalf("items: exit %d, %d lines, %q; want %d lines", code, len(lines), errs, n)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		var it struct {
			Key, URL string
			Data     map[string]any
		}
		if err := json.Unmarshal([]byte(l), &it); err != nil || it.URL == "" || it.Data["title"] == nil || seen[it.Key] {
			t.Fatalf("line %q: %v (or a repeat, or without url/data)", l, err)
		}
		seen[it.Key] = true
	}

	code, out, errs = run(t, url, "items", id, "--format", "csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != 0 || err != nil || len(recs) != n+1 {
		t.Fatalf("items --format csv: exit %d, %d records, %v %q; want a header and %d rows", code, len(recs), err, errs, n)
	}
	// The item's own url field is a column of its own (data.url), not a second "url".
	if strings.Join(recs[0], ",") != "key,url,price,tags,title,data.url" {
		t.Fatalf("csv header %q", recs[0])
	}
	if got := strings.Join(recs[2], "|"); got != `k000002|http://x/2|2|["a"]|Item, "2"|http://own/2` {
		t.Errorf("csv row %q", got)
	}
	if got := strings.Join(recs[1], "|"); got != `k000001|http://x/1|1||Item, "1"|http://own/1` {
		t.Errorf("csv row of an item whose tags are null: %q", got)
	}

	if code, out, _ := run(t, url, "items", id, "--limit", "11000"); code != 0 || strings.Count(out, "\n") != 11000 {
		t.Errorf("items --limit 11000: exit %d, %d lines", code, strings.Count(out, "\n"))
	}
	file := filepath.Join(t.TempDir(), "items.csv")
	if code, out, errs := run(t, url, "items", id, "--format", "csv", "--output", file); code != 0 || out != "" {
		t.Fatalf("items --output: exit %d, %q %q", code, out, errs)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll(); err != nil || len(recs) != n+1 {
		t.Errorf("--output file: %d records, %v; want %d", len(recs), err, n+1)
	}
	if _, err := os.Stat(file + ".partial"); !os.IsNotExist(err) {
		t.Errorf("the partial file is left: %v", err)
	}
	// A file that cannot be written is an error, not a short export.
	if code, _, errs := run(t, url, "items", id, "--output", filepath.Join(t.TempDir(), "no", "such", "dir")); code != 1 || !strings.Contains(errs, "--output") {
		t.Errorf("items --output into a missing directory: exit %d, %q; want 1 naming --output", code, errs)
	}
}

// crawlq items --changes lists a run's new, changed and gone items by change then key, all of
// them across pages of 1000.
func TestItemsChangesListsEveryChange(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	code, out, errs := run(t, url, "schedule", "--spider", "demo", "--delay", "1h")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("schedule: %d %q %q", code, out, errs)
	}
	pool := dbtest.Open(t, url, 1)
	if _, err := pool.Exec(context.Background(), `INSERT INTO crawlq_item_change (run_id, key, change, url)
		SELECT $1, 'k' || lpad(i::text, 5, '0'), (ARRAY['new', 'changed', 'gone'])[i % 3 + 1], 'http://x/' || i
		FROM generate_series(1, 2500) i`, id); err != nil {
		t.Fatal(err)
	}
	code, out, errs = run(t, url, "items", id, "--changes")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2500 {
		t.Fatalf("items --changes: exit %d, %d lines, %q; want 2500", code, len(lines), errs)
	}
	var first, last struct{ Key, Change, URL string }
	if json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[2499]), &last) != nil ||
		first.Change != "changed" || first.Key != "k00001" || last.Change != "new" || first.URL != "http://x/1" {
		t.Errorf("first %+v, last %+v; want changed k00001 first and a new one last", first, last)
	}
	code, out, _ = run(t, url, "items", id, "--changes", "--format", "csv", "--limit", "2")
	if code != 0 || out != "key,change,url\nk00001,changed,http://x/1\nk00004,changed,http://x/4\n" {
		t.Errorf("items --changes --format csv --limit 2: exit %d, %q", code, out)
	}
}
