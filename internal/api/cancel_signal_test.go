package api_test

import (
	"context"
	"strings"
	"testing"
)

// TestCancelSignal: cancel's signal is checked, and each cancel is recorded with its signal for
// the runner (which sends it to the command; a second cancel sends it again, as Scrapyd does).
func TestCancelSignal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, _ := f.ok(t, `{"action":"schedule","spider":"demo","args":{"base_url":"http://127.0.0.1:9"},"delay_seconds":3600}`)["jobid"].(string)
	for payload, want := range map[string]string{
		`{"action":"cancel","job":"` + id + `","signal":"BOGUS"}`: `signal "BOGUS"`,
		`{"action":"cancel","job":"` + id + `","signal":"0"}`:     "signal 0",
		`{"action":"status","job":"` + id + `","signal":"INT"}`:   `does not take "signal"`,
	} {
		if out := f.call(t, payload); out["status"] != "error" || !strings.Contains(out["message"].(string), want) {
			t.Errorf("%s: %v, want an error mentioning %s", payload, out, want)
		}
	}
	if c := f.ok(t, `{"action":"cancel","job":"`+id+`","signal":"TERM"}`); c["prevstate"] != "pending" {
		t.Fatalf("cancel: %v", c)
	}
	var sig string
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT cancel_signal, cancels FROM crawlq_spider_run WHERE run_id = $1`, id).Scan(&sig, &n); err != nil {
		t.Fatal(err)
	}
	if sig != "TERM" || n != 1 {
		t.Fatalf("recorded cancel: signal %q, %d cancels; want TERM, 1", sig, n)
	}
}
