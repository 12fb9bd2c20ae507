package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"crawlq/internal/dbtest"
	"crawlq/internal/runlog"
)

func TestSpiderCommands(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("shop.yaml", "name: shop\nstart_urls: [http://127.0.0.1:9/]\n")
	code, out, errs := run(t, url, "spider", "push", good)
	if code != 0 || !strings.Contains(out, "shop: pushed version 1 (declarative)") {
		t.Fatalf("push: %d %q %q", code, out, errs)
	}
	if code, out, _ = run(t, url, "spider", "push", good); code != 0 || !strings.Contains(out, "shop: unchanged (version 1)") {
		t.Fatalf("push again: %d %q", code, out)
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "a.yaml"), []byte("name: a\nstart_urls: [http://127.0.0.1:9/]\n"), 0o644)
	os.WriteFile(filepath.Join(bad, "b.yaml"), []byte("name: B!\nstart_urls: [ftp://x/]\nitems:\n  - key: k\n    fields: {k: {css: p, atr: x}}\n"), 0o644)
	code, _, errs = run(t, url, "spider", "push", bad)
	for _, want := range []string{"nothing pushed", "b.yaml: name:", "b.yaml: start_urls[0]:", "b.yaml: items[0].fields.k.atr: unknown field"} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("push of a bad directory: exit %d, stderr lacks %q:\n%s", code, want, errs)
		}
	}
	code, out, _ = run(t, url, "spider", "list", "--json")
	var ls []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &ls) != nil {
		t.Fatalf("list: %d %q", code, out)
	}
	names := map[string]bool{}
	for _, l := range ls {
		names[l["name"].(string)] = true
	}
	if !names["shop"] || names["a"] {
		t.Fatalf("list after pushes: %v (a.yaml must not be stored: its directory had a bad spec)", names)
	}
	if code, out, _ = run(t, url, "spider", "delete", "shop"); code != 0 || !strings.Contains(out, "deleted 1 version") {
		t.Fatalf("delete: %d %q", code, out)
	}
	if code, _, errs = run(t, url, "spider", "delete", "shop"); code != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("delete again: %d %q", code, errs)
	}
	for _, args := range [][]string{{"spider"}, {"spider", "frob"}, {"spider", "push"}, {"spider", "list", "x"}, {"logs"}} {
		if code, _, errs := run(t, url, args...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d %q, want 2", args, code, errs)
		}
	}
}

// crawlq schedule --version pins a stored version: the run's record has it from the start; a
// version never pushed is refused, named.
func TestScheduleVersion(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	spec := filepath.Join(t.TempDir(), "shop.yaml")
	for _, body := range []string{"name: shop\nstart_urls: [http://127.0.0.1:9/]\n", "name: shop\nstart_urls: [http://127.0.0.1:9/]\nmax_pages: 3\n"} {
		if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := run(t, url, "spider", "push", spec); code != 0 {
			t.Fatalf("push: %d %q %q", code, out, errs)
		}
	}
	code, out, errs := run(t, url, "schedule", "--spider", "shop", "--version", "1", "--delay", "1h")
	if code != 0 {
		t.Fatalf("schedule --version 1: %d %q", code, errs)
	}
	p := dbtest.Open(t, url, 2)
	var version string
	if err := p.QueryRow(context.Background(), "SELECT version FROM crawlq_spider_run WHERE run_id = $1", strings.TrimSpace(out)).Scan(&version); err != nil || version != "1" {
		t.Fatalf("the run's record: version %q (%v), want 1", version, err)
	}
	// crawlq run shows the version the run pinned (or ran).
	code, shown, errs := run(t, url, "run", strings.TrimSpace(out))
	if code != 0 || !strings.Contains(shown, `"version": "1"`) {
		t.Errorf("crawlq run of a run pinned to version 1: exit %d, %s %q; want \"version\": \"1\"", code, shown, errs)
	}
	code, _, errs = run(t, url, "schedule", "--spider", "shop", "--version", "7")
	if code != 1 || !strings.Contains(errs, `unknown version "7" of spider "shop" (its versions: 1, 2)`) {
		t.Fatalf("schedule --version 7: %d %q", code, errs)
	}
}

func TestLogsCommand(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	code, out, errs := run(t, url, "schedule", "--spider", "demo", "--arg", "base_url=http://127.0.0.1:9", "--delay", "1h")
	if code != 0 {
		t.Fatalf("schedule: %d %q", code, errs)
	}
	id := strings.TrimSpace(out)
	p := dbtest.Open(t, url, 2)
	var runID int64
	if err := p.QueryRow(context.Background(), "select max(id) from crawlq_run").Scan(&runID); err != nil {
		t.Fatal(err)
	}
	if err := (runlog.Postgres{Pool: p}).Append(context.Background(), runID, []string{"first line", "second line"}); err != nil {
		t.Fatal(err)
	}
	code, out, errs = run(t, url, "logs", id)
	if code != 0 || !strings.Contains(out, "first line\n") || !strings.Contains(out, "second line\n") {
		t.Fatalf("logs: %d %q %q", code, out, errs)
	}
	if code, _, errs = run(t, url, "logs", "99999"); code != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("logs of an unknown run: %d %q", code, errs)
	}
	// --follow returns once the run has finished and its log is read out.
	if code, _, errs = run(t, url, "cancel-run", id); code != 0 {
		t.Fatalf("cancel-run: %d %q", code, errs)
	}
	code, out, errs = run(t, url, "logs", id, "--follow")
	if code != 0 || !strings.Contains(out, "second line") {
		t.Fatalf("logs --follow: %d %q %q", code, out, errs)
	}
}
