package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/cli"
	"crawlq/internal/dbtest"
)

// run runs the CLI in-process against url and returns exit status, stdout and stderr.
func run(t *testing.T, url string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		if k == "DATABASE_URL" {
			return url
		}
		return ""
	}})
	return code, out.String(), errb.String()
}

func TestQueueCommands(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	code, out, errs := run(t, url, "migrate")
	if code != 0 || !strings.Contains(out, "up to date") {
		t.Fatalf("migrate on a migrated schema: %d %q %q", code, out, errs)
	}
	code, out, _ = run(t, url, "enqueue", "--queue", "q", "--kind", "k", "--args", `{"a":1}`, "--unique-key", "u", "--json")
	var r struct {
		ID        int64
		Duplicate bool
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.ID == 0 || r.Duplicate {
		t.Fatalf("enqueue: %d %q", code, out)
	}
	code, out, _ = run(t, url, "enqueue", "--queue", "q", "--kind", "k", "--unique-key", "u", "--on-duplicate", "replace", "--delay", "1h")
	if code != 0 || !strings.Contains(out, "duplicate") {
		t.Fatalf("duplicate enqueue: %d %q", code, out)
	}
	code, out, _ = run(t, url, "stats", "--json")
	var st []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st) != 1 || st[0]["scheduled"].(float64) != 1 {
		t.Fatalf("stats: %d %q", code, out)
	}
	code, out, _ = run(t, url, "jobs", "--queue", "q", "--state", "scheduled")
	if code != 0 || !strings.Contains(out, "scheduled") || !strings.Contains(out, "\tu\t") && !strings.Contains(out, " u ") {
		t.Fatalf("jobs: %d %q", code, out)
	}
	// --json prints snake_case keys (internal/view), a flag may follow the others in any order.
	code, out, _ = run(t, url, "jobs", "--json", "--queue", "q")
	var js []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &js) != nil || len(js) != 1 {
		t.Fatalf("jobs --json: %d %q", code, out)
	}
	for _, k := range []string{"id", "queue", "kind", "state", "max_attempts", "unique_key", "run_at", "errors"} {
		if _, ok := js[0][k]; !ok {
			t.Errorf("jobs --json lacks %q: %v", k, js[0])
		}
	}
	for k := range js[0] {
		if strings.ToLower(k) != k || strings.Contains(k, "token") {
			t.Errorf("jobs --json key %q", k)
		}
	}
	code, out, _ = run(t, url, "cancel", "1", "999999")
	if code != 1 || !strings.Contains(out, "1: cancelled") {
		t.Fatalf("cancel: %d %q", code, out)
	}
	code, out, _ = run(t, url, "stats")
	if code != 0 || !strings.Contains(out, "CANCELLED") {
		t.Fatalf("stats table: %d %q", code, out)
	}
}

func TestBadInvocations(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	for _, args := range [][]string{
		{"nosuchcommand"},
		{"enqueue", "--queue", "q"},                                // no kind
		{"enqueue", "--kind", "k", "--at", "tomorrow"},             // bad time
		{"enqueue", "--kind", "k", "--at", "1900-01-01T00:00:00Z"}, // long past
		{"enqueue", "--kind", "k", "--on-duplicate", "x"},
		{"jobs", "--state", "finished"},
		{"cancel"},
		{"cancel", "abc"},
		{"stats", "--bogus"},
	} {
		if code, _, errs := run(t, url, args...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, errs)
		}
	}
	for _, args := range [][]string{
		{"enqueue", "--kind", "k", "--priority", "5000"},
		{"enqueue", "--kind", "k", "--args", "{bad"},
		{"enqueue", "--queue", "No Spaces", "--kind", "k"},
		{"enqueue", "--kind", "k", "--delay", "-5s"},
	} {
		if code, _, errs := run(t, url, args...); code != 1 || !strings.Contains(errs, "invalid input") {
			t.Errorf("%q: exit %d, stderr %q; want 1 and 'invalid input'", args, code, errs)
		}
	}
	_, out, _ := run(t, url, "stats", "--json")
	if strings.TrimSpace(out) != "[]" {
		t.Fatalf("bad input wrote jobs: %s", out)
	}
	if code, out, _ := run(t, url, "enqueue", "--help"); code != 0 || !strings.Contains(out, "--on-duplicate") && !strings.Contains(out, "-on-duplicate") {
		t.Fatalf("--help: %d %q", code, out)
	}
}

// Every command that opens the database builds its configuration as crawlq local does:
// CRAWLQ_DB_EXEC_MODE is honoured, and a bad value refused, with DATABASE_URL or --database-url.
func TestEveryCommandHonoursDBExecMode(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	for _, args := range [][]string{
		{"stats"},
		{"jobs"},
		{"migrate", "--list"},
		{"runs"},
		{"items", "1"},
		{"worker", "--upkeep", "0"},
		{"runner", "--upkeep", "0"},
		{"spider", "list"},
		{"stats", "--database-url", url},
		{"bench", "--op", "insert", "--jobs", "10"},
	} {
		env := map[string]string{"CRAWLQ_DB_EXEC_MODE": "bogus"}
		if !slices.Contains(args, "--database-url") {
			env["DATABASE_URL"] = url
		}
		// A worker or runner that ignored the variable would run until stopped: stop it.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out, errb bytes.Buffer
		code := cli.Main(ctx, args, cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
		cancel()
		if errs := errb.String(); code != 1 || !strings.Contains(errs, `CRAWLQ_DB_EXEC_MODE: `) || !strings.Contains(errs, `"bogus"`) {
			t.Errorf("%q with CRAWLQ_DB_EXEC_MODE=bogus: exit %d, stderr %q; want 1 naming the variable", args, code, errs)
		}
	}
	for _, mode := range []string{"exec", "simple", "cache_describe", "cache_statement"} {
		code, out, errs := runWithEnv(t, map[string]string{"DATABASE_URL": url, "CRAWLQ_DB_EXEC_MODE": mode}, "stats", "--json")
		if code != 0 || strings.TrimSpace(out) != "[]" {
			t.Errorf("stats with CRAWLQ_DB_EXEC_MODE=%s: exit %d, %q %q", mode, code, out, errs)
		}
	}
}

// Numeric and duration flags out of range are usage errors naming the flag, before anything
// starts (no database is needed to refuse them).
func TestOutOfRangeFlagsAreUsageErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"worker", "--workers", "-1"}, "--workers"},
		{[]string{"worker", "--workers", "0"}, "--workers"},
		{[]string{"worker", "--concurrency", "-5"}, "--concurrency"},
		{[]string{"worker", "--concurrency", "20000"}, "--concurrency"},
		{[]string{"worker", "--lease", "-1s"}, "--lease"},
		{[]string{"worker", "--lease", "1ns"}, "--lease"},
		{[]string{"worker", "--upkeep", "-1s"}, "--upkeep"},
		{[]string{"runner", "--upkeep", "-1s"}, "--upkeep"},
		{[]string{"worker", "--maintain-every", "-1s"}, "--maintain-every"},
		{[]string{"runner", "--maintain-every", "-1s"}, "--maintain-every"},
		{[]string{"runner", "--concurrency", "0"}, "--concurrency"},
		{[]string{"runner", "--lease", "10ms"}, "--lease"},
		{[]string{"runner", "--grace", "-1s"}, "--grace"},
		{[]string{"runner", "--kill-grace", "-1s"}, "--kill-grace"},
		{[]string{"runner", "--shutdown-grace", "0s"}, "--shutdown-grace"},
		{[]string{"runner", "--grace", "2m"}, "--grace plus --kill-grace"},
		{[]string{"runner", "--max-jobs", "-1"}, "--max-jobs"},
		{[]string{"runner", "--command-timeout", "0s"}, "--command-timeout"},
		{[]string{"redrive", "--limit", "-5"}, "--limit"},
		{[]string{"local", "--runners", "-3"}, "--runners"},
		{[]string{"local", "--scrapyd-max-upload", "-1"}, "--scrapyd-max-upload"},
		{[]string{"local", "--scrapyd-max-upload", "0"}, "--scrapyd-max-upload"},
		{[]string{"local", "--tick", "-1s"}, "--tick"},
		{[]string{"local", "--worker-idle", "0s"}, "--worker-idle"},
	} {
		code, _, errs := runWithEnv(t, map[string]string{"DATABASE_URL": "postgres://nowhere.invalid/x"}, c.args...)
		if code != 2 || !strings.Contains(errs, c.flag+" must") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.flag+" must")
		}
	}
}

// On a database crawlq has not migrated, a command says to run crawlq migrate, beside
// Postgres's own error, instead of leaving the user with a bare SQLSTATE.
func TestUnmigratedDatabaseSaysMigrate(t *testing.T) {
	t.Parallel()
	base := dbtest.URL(t)
	pool := dbtest.Open(t, base, 2)
	schema := fmt.Sprintf("unmigrated_%d", time.Now().UnixNano())
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	url := base + sep + "search_path=" + schema
	for _, args := range [][]string{{"stats"}, {"runs"}} {
		code, _, errs := run(t, url, args...)
		if code != 1 || !strings.Contains(errs, "run 'crawlq migrate' first") {
			t.Errorf("%v on an unmigrated database: exit %d, stderr %q; want 1 and the hint to migrate", args, code, errs)
		}
	}
	if code, _, errs := run(t, url, "migrate"); code != 0 || strings.Contains(errs, "crawlq migrate' first") {
		t.Fatalf("migrate: exit %d, %q", code, errs)
	}
	if code, _, errs := run(t, url, "stats"); code != 0 {
		t.Fatalf("stats after migrate: exit %d, %q", code, errs)
	}
}

// A command run with no database named says how to name one: the flag, and where a local one
// comes from (a newcomer's first `crawlq items` after make demo has no DATABASE_URL).
func TestNoDatabaseSaysWhatToDo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"runs"}, {"items", "1"}, {"local", "--addr", "127.0.0.1:0", "--scrapyd-addr", ""}} {
		code, _, errs := run(t, "", args...)
		if code != 1 || !strings.Contains(errs, "no database configured") || !strings.Contains(errs, "--database-url") ||
			!strings.Contains(errs, "export DATABASE_URL=$(make -s db)") {
			t.Errorf("crawlq %s with no database: exit %d, stderr %q; want 1 naming DATABASE_URL, --database-url and make -s db", strings.Join(args, " "), code, errs)
		}
	}
}

// Scheduling a spider nobody pushed says how to see and add spiders, not only that it is unknown.
func TestScheduleUnknownSpiderSaysWhatToDo(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	if code, _, errs := run(t, url, "migrate"); code != 0 {
		t.Fatalf("migrate: %d %s", code, errs)
	}
	code, out, errs := run(t, url, "schedule", "--spider", "nope")
	if code != 1 || out != "" || !strings.Contains(errs, `spider "nope": unknown spider`) ||
		!strings.Contains(errs, "crawlq spider list") || !strings.Contains(errs, "crawlq spider push FILE") {
		t.Errorf("schedule --spider nope: exit %d, stdout %q, stderr %q; want 1 naming the spider, spider list and spider push", code, out, errs)
	}
	// A name a letter off a pushed spider's is said with that spider's.
	spec := filepath.Join(t.TempDir(), "recipes.yaml")
	if err := os.WriteFile(spec, []byte("name: recipes\nstart_urls: [http://127.0.0.1:9/]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run(t, url, "spider", "push", spec); code != 0 {
		t.Fatalf("push: %d %q %q", code, out, errs)
	}
	if code, _, errs := run(t, url, "schedule", "--spider", "recipe"); code != 1 || !strings.Contains(errs, `spider "recipe": unknown spider; did you mean "recipes"?`) {
		t.Errorf("schedule --spider recipe: exit %d, stderr %q; want 1 and did you mean \"recipes\"", code, errs)
	}
}

// A run's id given to cancel (which takes job ids) is named as one, with the command that cancels
// a run; crawlq help CMD is CMD --help.
func TestCancelNamesARunsIDAndHelpTakesACommand(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(context.Background(), `INSERT INTO crawlq_run (id, spider, queue) VALUES (424242, 'demo', 'crawl')`); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, url, "cancel", "424242")
	if code != 1 || !strings.Contains(errs, "crawlq cancel-run 424242") {
		t.Fatalf("cancel of a run's id: exit %d, stderr %q", code, errs)
	}
	code, out, _ := run(t, url, "help", "cancel")
	if code != 0 || !strings.Contains(out, "Cancels each job") {
		t.Fatalf("help cancel: exit %d %q", code, out)
	}
}
