package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"crawlq/internal/cli"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
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
		// Nothing judges these runs: --fail-on without monitors_failed does not wait for a verdict.
		code, out, _ := run(t, url, "run", id, "--wait", "--fail-on", "incomplete,failed,cancelled") // a flag after the id
		var r struct{ State string }
		if code != want || json.Unmarshal([]byte(out), &r) != nil || r.State != state {
			t.Errorf("run of a %s run: exit %d, %q; want %d", state, code, out, want)
		}
		if code, out, _ := run(t, url, "run", id); code != want {
			t.Errorf("run (without --wait) of an unjudged %s run: exit %d, %q; want %d, by its state", state, code, out, want)
		}
		// With monitors_failed in --fail-on (the default), a run judged by its monitors waits for
		// its verdict; none comes here, which is exit status 7 unless the state fails the run anyway.
		code, out, errs := run(t, url, "run", id, "--wait", "--verdict-timeout", "50ms")
		wantWait := want
		if state == "succeeded" {
			wantWait = 7
		}
		judged := state == "succeeded" || state == "incomplete"
		if code != wantWait || judged != strings.Contains(errs, "not judged within 50ms") {
			t.Errorf("run --wait of an unjudged %s run: exit %d, %q %q; want %d, saying it was not judged: %v", state, code, out, errs, wantWait, judged)
		}
		// --watch (with or without --wait) exits as --wait does once the run has ended.
		for _, args := range [][]string{{"--watch"}, {"--wait", "--watch"}} {
			code, out, errs := run(t, url, append([]string{"run", id, "--interval", "10ms", "--fail-on", "incomplete,failed,cancelled"}, args...)...)
			if code != want || !strings.Contains(out, "run "+id+" "+state) {
				t.Errorf("run %v of a %s run: exit %d, %q %q; want %d", args, state, code, out, errs, want)
			}
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
		{"run", id, "--fail-on", "failed,monitors"},
		{"run", id, "--fail-on", ""},
		{"run", id, "--verdict-timeout", "-1s"},
		{"items", id, "--limit", "-1"},
		{"items", id, "--format", "xml"},
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

// items and redrive name an unknown run or job as run and cancel do (exit 1), rather than
// printing nothing or "redrove 0 jobs".
func TestUnknownRunOrJobIsAnError(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	code, out, _ := run(t, url, "schedule", "--spider", "demo", "--delay", "1h")
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("schedule: %d %q", code, out)
	}
	if code, out, errs := run(t, url, "items", id); code != 0 || out != "" {
		t.Fatalf("items of a run without items: exit %d, %q %q; want 0 and nothing", code, out, errs)
	}
	code, out, errs := run(t, url, "enqueue", "--queue", "q", "--kind", "k", "--delay", "1h")
	job := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("enqueue: %d %q", code, errs)
	}
	_, _, runErr := run(t, url, "run", "999999")
	_, _, cancelErr := run(t, url, "cancel", "999999")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"items", "999999"}, "run 999999: crawl: run not found"},
		{[]string{"redrive", "--run", "999999"}, "run 999999: crawl: run not found"},
		{[]string{"redrive", "999999"}, "job 999999: queue: job not found"},
		{[]string{"redrive", "--queue", "q", job}, "only dead jobs"},
		{[]string{"redrive", job}, `not "default" (--queue)`},
	} {
		code, out, errs := run(t, url, c.args...)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 1 and %q", c.args, code, out, errs, c.want)
		}
	}
	if !strings.Contains(runErr, "run 999999: crawl: run not found") || !strings.Contains(cancelErr, "job 999999: queue: job not found") {
		t.Errorf("run and cancel of unknown ids say %q and %q: the wording above is theirs", runErr, cancelErr)
	}
}

// schedule refuses --replace without --key and an --at long past, naming the flags.
func TestScheduleFlagCombinations(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--replace"}, []string{"--replace", "--key"}},
		{[]string{"--replace", "--delay", "1m"}, []string{"--replace", "--key"}},
		{[]string{"--at", "1900-01-01T00:00:00Z"}, []string{"--at", "past"}},
		{[]string{"--settings", `{"dealy":"1s"}`}, []string{"--settings", `settings.dealy: unknown setting; did you mean "delay"?`}},
		{[]string{"--settings", `{"max_pages":"x"}`}, []string{"--settings", "settings.max_pages"}},
		{[]string{"--settings", `[1]`}, []string{"--settings", "want a JSON object"}},
	} {
		code, _, errs := run(t, url, append([]string{"schedule", "--spider", "demo"}, c.args...)...)
		for _, w := range c.want {
			if code != 2 || !strings.Contains(errs, w) {
				t.Errorf("schedule %q: exit %d, stderr %q; want 2 naming %s", c.args, code, errs, w)
			}
		}
	}
	if _, out, _ := run(t, url, "runs", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("refused schedules made runs: %s", out)
	}
	soon := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, args := range [][]string{{"--key", "k", "--replace"}, {"--at", soon}} {
		if code, out, errs := run(t, url, append([]string{"schedule", "--spider", "demo"}, args...)...); code != 0 {
			t.Errorf("schedule %q: exit %d, %q %q; want 0", args, code, out, errs)
		}
	}
	// --settings overrides the spider's settings for the run, as schedules add --settings does;
	// a value out of range names its setting.
	code, out, errs := run(t, url, "schedule", "--spider", "demo", "--delay", "1h", "--settings", `{"max_pages":5,"delay":"250ms"}`)
	if code != 0 {
		t.Fatalf("schedule --settings: exit %d, %q %q", code, out, errs)
	}
	if code, shown, errs := run(t, url, "run", strings.TrimSpace(out)); code != 0 || !strings.Contains(shown, `"max_pages": 5`) || !strings.Contains(shown, `"delay": "250ms"`) {
		t.Errorf("run of a run scheduled with --settings: exit %d, %s %q; want max_pages 5 and delay 250ms among its settings", code, shown, errs)
	}
	if code, _, errs := run(t, url, "schedule", "--spider", "demo", "--settings", `{"max_pages":-1}`); code == 0 || !strings.Contains(errs, "max_pages") {
		t.Errorf("schedule --settings max_pages -1: exit %d, %q; want an error naming max_pages", code, errs)
	}
	// Scheduled again with the same key, standard output is still the id alone (for
	// id=$(crawlq schedule ...)); the duplicate is said on standard error.
	first, _, _ := run(t, url, "schedule", "--spider", "demo", "--key", "k2", "--delay", "1h")
	code, out, errs = run(t, url, "schedule", "--spider", "demo", "--key", "k2", "--delay", "1h")
	if _, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64); code != 0 || err != nil || !strings.Contains(errs, `existing pending run with key "k2"`) {
		t.Errorf("schedule --key k2 twice: exit %d (first %d), stdout %q, stderr %q; want the id alone and the note on stderr", code, first, out, errs)
	}
}

// strictSpec is the demo spider with a min_items monitor the demo site (10 items here) fails.
const strictSpec = `name: strict
start_urls: ["http://127.0.0.1:8088/"]
allowed_domains: ["127.0.0.1"]
allow_private: true
follow: [{css: a}]
items:
  - match: '/catalogue/item-\d+\.html$'
    css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
monitors:
  min_items: 1000
`

// A real run judged monitors_failed (a crawl by crawlq worker, judged by its maintenance) makes crawlq
// run --wait and --watch exit 6, unless --fail-on leaves monitors_failed out.
func TestRunExitMonitorsFailed(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "strict.yaml"), []byte(strictSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := demosite.New(demosite.Config{Items: 10, SlowDelay: time.Millisecond}).Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var werr strings.Builder
	done := make(chan int)
	go func() {
		done <- cli.Main(ctx, []string{"worker", "--spiders", dir, "--maintain-every", "100ms", "--event-bus", "off"},
			cli.Env{Stdout: io.Discard, Stderr: &syncWriter{w: &werr}, Getenv: func(k string) string {
				if k == "DATABASE_URL" {
					return url
				}
				return ""
			}})
	}()
	defer func() {
		cancel()
		if c := <-done; c != 0 {
			t.Errorf("worker exited %d: %s", c, werr.String())
		}
	}()
	code, out, errs := run(t, url, "schedule", "--spiders", dir, "--spider", "strict", "--arg", "base_url=http://"+addr.String())
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("schedule: %d %q %q", code, out, errs)
	}
	code, out, errs = run(t, url, "run", id, "--wait")
	var v struct {
		State, Outcome string
		Stats          struct{ Items int64 }
	}
	if code != 6 || json.Unmarshal([]byte(out), &v) != nil || v.State != "succeeded" || v.Outcome != "monitors_failed" || v.Stats.Items != 10 {
		t.Fatalf("run --wait of a run whose min_items failed: exit %d, %s %s; want 6, succeeded, monitors_failed, 10 items", code, out, errs)
	}
	code, out, errs = run(t, url, "run", id, "--watch", "--interval", "20ms")
	if code != 6 || !strings.Contains(out, "run "+id+" monitors_failed; monitors failed") || !strings.Contains(out, "10 items, at least 1000 wanted") {
		t.Fatalf("run --watch: exit %d, %s %s; want 6 and the failed monitor", code, out, errs)
	}
	for _, failOn := range []string{"incomplete,failed,cancelled", "none"} {
		if code, out, errs := run(t, url, "run", id, "--wait", "--fail-on", failOn); code != 0 {
			t.Errorf("run --wait --fail-on %s: exit %d, %s %s; want 0", failOn, code, out, errs)
		}
	}
	if code, _, _ := run(t, url, "run", id, "--fail-on", "monitors_failed"); code != 6 {
		t.Errorf("run --fail-on monitors_failed: exit %d; want 6", code)
	}
	// crawlq runs shows the outcome beside the state, and --state monitors_failed selects the run;
	// a run still pending is not among them.
	if code, _, errs := run(t, url, "schedule", "--spiders", dir, "--spider", "strict", "--delay", "1h"); code != 0 {
		t.Fatalf("schedule: %d %q", code, errs)
	}
	if code, out, errs := run(t, url, "runs"); code != 0 || !regexp.MustCompile(`(?m)^`+id+` +strict +succeeded \(monitors failed\) `).MatchString(out) {
		t.Errorf("runs: exit %d, %q %q; want run %s shown succeeded (monitors failed)", code, out, errs, id)
	}
	for _, states := range []string{"monitors_failed", "monitors_failed,cancelled"} {
		code, out, errs := run(t, url, "runs", "--state", states, "--json")
		var runs []struct {
			ID      int64
			Outcome string
		}
		if err := json.Unmarshal([]byte(out), &runs); code != 0 || err != nil || len(runs) != 1 || strconv.FormatInt(runs[0].ID, 10) != id || runs[0].Outcome != "monitors_failed" {
			t.Errorf("runs --state %s: exit %d, %q %q; want run %s alone", states, code, out, errs, id)
		}
	}
}
