package cli_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"crawlq/internal/dbtest"
)

// crawlq run's exit status says how a run ended; flags may follow the run id; redrive --run
// refuses bad input with a usage error and a run without dead pages with an explanation.
func TestRunOutcomeExitStatusAndRedriveInput(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	code, out, errs := run(t, url, "schedule", "--spider", "demo", "--delay", "1h")
	id := regexp.MustCompile(`\d+`).FindString(out)
	if code != 0 || id == "" {
		t.Fatalf("schedule: %d %q %q", code, out, errs)
	}
	if code, out, _ := run(t, url, "run", id); code != 0 || !strings.Contains(out, `"dead_pages": 0`) {
		t.Fatalf("run of a pending run: exit %d %q; want 0 and dead_pages", code, out)
	}
	if code, _, errs := run(t, url, "redrive", "--run", id); code != 1 || !strings.Contains(errs, "not finished") {
		t.Fatalf("redrive of a pending run: exit %d %q", code, errs)
	}
	// The states a crawl reaches are tested in internal/crawl; here only their exit statuses.
	pool := dbtest.Open(t, url, 1)
	for state, want := range map[string]int{"incomplete": 3, "failed": 4, "cancelled": 5, "succeeded": 0} {
		if _, err := pool.Exec(context.Background(), `UPDATE crawlq_run SET state = $2::crawlq_run_state, finished_at = now() WHERE id = $1`, id, state); err != nil {
			t.Fatal(err)
		}
		code, out, _ := run(t, url, "run", id, "--wait") // a flag after the id
		var r struct{ State string }
		if code != want || json.Unmarshal([]byte(out), &r) != nil || r.State != state {
			t.Errorf("run of a %s run: exit %d, %q; want %d", state, code, out, want)
		}
	}
	if code, _, errs := run(t, url, "redrive", "--run", id); code != 1 || !strings.Contains(errs, "no dead pages") {
		t.Errorf("redrive of a succeeded run: exit %d %q", code, errs)
	}
	for _, args := range [][]string{
		{"redrive", "--run", "-3"},
		{"redrive", "--run", "x"},
		{"redrive", "--run", id, "7"},
		{"run", id, "--bogus"},
		{"run", id, "8"},
	} {
		if code, _, errs := run(t, url, args...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, errs)
		}
	}
	if code, out, _ := run(t, url, "runs", "--state", "incomplete,failed", "--limit", "5"); code != 0 || !strings.Contains(out, "DEAD") {
		t.Errorf("runs --state incomplete,failed: %d %q", code, out)
	}
	if code, _, errs := run(t, url, "runs", "--state", "done"); code == 0 || !strings.Contains(errs, "done") {
		t.Errorf("runs --state done: exit %d %q; want an error naming the state", code, errs)
	}
}
