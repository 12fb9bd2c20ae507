package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/api"
	"crawlq/internal/clock"
	"crawlq/internal/dbtest"
	"crawlq/internal/node"
	"crawlq/internal/testwait"
)

type fixture struct {
	api  *api.API
	pool *pgxpool.Pool
}

func newFixture(t *testing.T, mod func(*api.Config)) fixture {
	t.Helper()
	pool := dbtest.Pool(t)
	n, err := node.New(node.Config{Pool: pool, MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Pipeline.Close(context.Background()) })
	cfg := api.Config{Crawler: n.Crawler, Queue: n.Queue, Spiders: n.Spiders}
	if mod != nil {
		mod(&cfg)
	}
	a, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{api: a, pool: pool}
}

func (f fixture) call(t *testing.T, payload string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(f.api.HandleJSON(context.Background(), []byte(payload)), &out); err != nil {
		t.Fatalf("response is not JSON: %v", err)
	}
	return out
}

func (f fixture) ok(t *testing.T, payload string) map[string]any {
	t.Helper()
	out := f.call(t, payload)
	if out["status"] != "ok" {
		t.Fatalf("%s: got %v", payload, out)
	}
	return out
}

func (f fixture) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), "select count(*) from "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	big := `{"action":"schedule","spider":"demo","args":{"a":"` + strings.Repeat("x", 70<<10) + `"}}`
	huge := `{"action":"listspiders","project":"` + strings.Repeat("x", api.MaxRequestBytes) + `"}`
	cases := []struct{ payload, want string }{
		{``, "empty request"},
		{`{`, "malformed JSON"},
		{`{"action":"schedule",}`, "malformed JSON"},
		{`[1,2]`, "must be a JSON object"},
		{`null`, "not null"},
		{`"schedule"`, "must be a JSON object"},
		{`{"action":"schedule","spider":"demo"} {}`, "malformed JSON"},
		{`{}`, "missing action"},
		{`{"action":"explode"}`, `unknown action "explode"`},
		{`{"action":"schedule"}`, "missing spider"},
		{`{"action":"schedule","spider":"nope"}`, `unknown spider "nope"`},
		{`{"action":"schedule","spider":"dmeo"}`, `unknown spider "dmeo"; did you mean "demo"?`},
		{`{"action":"schedule","spider":"demo","priority":"high"}`, "field priority"},
		{`{"action":"schedule","spider":"demo","priority":5000}`, "priority 5000 out of range"},
		{`{"action":"schedule","spider":"demo","priority":1.5}`, "field priority"},
		{`{"action":"schedule","spider":"demo","args":{"a":1}}`, "field args"},
		{`{"action":"schedule","spider":"demo","args":"x"}`, "field args"},
		{big, "args are"},
		{huge, "limit is"},
		{`{"action":"schedule","spider":"demo","delay_seconds":-1}`, "delay_seconds"},
		{`{"action":"schedule","spider":"demo","delay_seconds":1,"at":"2030-01-01T00:00:00Z"}`, "not both"},
		{`{"action":"schedule","spider":"demo","at":"tomorrow"}`, "RFC 3339"},
		{`{"action":"schedule","spider":"demo","bogus":1}`, `unknown field "bogus"`},
		{`{"action":"schedule","spider":"demo","settings":{"max_pages":"x"}}`, "settings.max_pages: got string"},
		{`{"action":"schedule","spider":"demo","settings":{"nope":1}}`, `settings.nope: unknown setting (a run may override delay, `},
		// A typo is named with its path and the setting nearest to it, as a spec's are.
		{`{"action":"schedule","spider":"demo","settings":{"dealy":"1s"}}`, `settings.dealy: unknown setting; did you mean "delay"?`},
		{`{"action":"schedule","spider":"demo","settings":{"delay":"soon"}}`, `settings.delay: duration "soon"`},
		{`{"action":"schedule","spider":"demo","setting":{"max_page":3}}`, `setting.max_page: unknown setting; did you mean "max_pages"?`},
		{`{"action":"schedule","spider":"demo","args":{"base_url":"not a url"}}`, "base_url"},
		{`{"action":"schedule","spider":"demo","job":"1"}`, `does not take "job"`},
		{`{"action":"cancel"}`, "missing job"},
		{`{"action":"cancel","job":"abc"}`, `unknown job "abc"`},
		{`{"action":"cancel","job":-3}`, "positive run id"},
		{`{"action":"cancel","job":"99999"}`, "unknown job 99999"},
		{`{"action":"status","job":99999}`, "unknown job 99999"},
		{`{"action":"status","job":true}`, "positive run id"},
		{`{"action":"status","job":"1 2"}`, "positive run id"},
		{`{"action":"listjobs","spider":"nope"}`, "unknown spider"},
		{`{"action":"listjobs","limit":100000}`, "limit"},
		{`{"action":"addschedule","spider":"demo","cron":"0 3 * * *"}`, "not configured"},
		{`{"action":"addschedule","spider":"demo"}`, "missing cron"},
		{`{"action":"delschedule"}`, "missing name"},
		{`{"action":"delschedule","name":"a b"}`, "schedule name"},
		{"{\"action\":\"listspiders\",\"project\":\"\xff\"}", "UTF-8"},
	}
	for _, c := range cases {
		out := f.call(t, c.payload)
		msg, _ := out["message"].(string)
		if out["status"] != "error" || !strings.Contains(msg, c.want) {
			p := c.payload
			if len(p) > 80 {
				p = p[:80]
			}
			t.Errorf("%s: got %v, want an error mentioning %q", p, out, c.want)
		}
	}
	if n := f.count(t, "crawlq_run"); n != 0 {
		t.Errorf("bad input wrote %d runs", n)
	}
	if n := f.count(t, "crawlq_job"); n != 0 {
		t.Errorf("bad input wrote %d jobs", n)
	}
}

func TestScheduleStatusListCancel(t *testing.T) {
	t.Parallel()
	pokes := 0
	f := newFixture(t, func(c *api.Config) { c.Poke = func(context.Context, int64) error { pokes++; return nil } })
	spiders := f.ok(t, `{"action":"listspiders"}`)["spiders"].([]any)
	if fmt.Sprint(spiders) == "[]" || !strings.Contains(fmt.Sprint(spiders), "demo") {
		t.Fatalf("listspiders: %v", spiders)
	}
	out := f.ok(t, `{"action":"schedule","project":"default","spider":"demo","args":{"base_url":"http://127.0.0.1:9"},
		"settings":{"max_pages":5},"priority":7,"delay_seconds":3600,"unique_key":"k1"}`)
	id, _ := out["jobid"].(string)
	if id == "" || out["duplicate"] != false || pokes != 1 {
		t.Fatalf("schedule: %v (pokes %d)", out, pokes)
	}
	again := f.ok(t, `{"action":"schedule","spider":"demo","args":{"base_url":"http://127.0.0.1:9"},"idempotency_key":"k1","delay_seconds":3600}`)
	if again["jobid"] != id || again["duplicate"] != true {
		t.Fatalf("idempotent schedule: %v, want jobid %s duplicate", again, id)
	}
	st := f.ok(t, `{"action":"status","job":"`+id+`"}`)
	if st["currstate"] != "pending" {
		t.Fatalf("status: %v", st)
	}
	job := st["job"].(map[string]any)
	if job["priority"] != float64(7) || job["spider"] != "demo" {
		t.Fatalf("status job: %v", job)
	}
	lj := f.ok(t, `{"action":"listjobs","spider":"demo"}`)
	if p := lj["pending"].([]any); len(p) != 1 || p[0].(map[string]any)["id"] != id {
		t.Fatalf("listjobs: %v", lj)
	}
	ds := f.ok(t, `{"action":"daemonstatus"}`)
	if ds["pending"] != float64(1) {
		t.Fatalf("daemonstatus: %v", ds)
	}
	c := f.ok(t, `{"action":"cancel","job":`+id+`}`)
	if c["prevstate"] != "pending" {
		t.Fatalf("cancel: %v", c)
	}
	st = testwait.For(t, "the cancelled run finishes", func() (map[string]any, bool) {
		st := f.ok(t, `{"action":"status","jobid":"`+id+`"}`)
		return st, st["currstate"] == "finished"
	})
	if s := st["job"].(map[string]any)["state"]; s != "cancelled" {
		t.Fatalf("state after cancel: %v", s)
	}
	if out := f.call(t, `{"action":"cancel","job":"`+id+`"}`); out["status"] != "error" || !strings.Contains(out["message"].(string), "already finished") {
		t.Fatalf("second cancel: %v", out)
	}
}

func TestScheduleExpression(t *testing.T) {
	t.Parallel()
	good := map[string]string{
		"0 3 * * *":                "cron(0 3 * * ? *)",
		"*/15 * * * *":             "cron(*/15 * * * ? *)",
		"30 6 * * 1-5":             "cron(30 6 ? * 2-6 *)",
		"0 0 * * 0":                "cron(0 0 ? * 1 *)",
		"0 0 * * MON,FRI":          "cron(0 0 ? * MON,FRI *)",
		"0 12 1 * *":               "cron(0 12 1 * ? *)",
		"@daily":                   "cron(0 0 * * ? *)",
		"@weekly":                  "cron(0 0 ? * 1 *)",
		"rate(5 minutes)":          "rate(5 minutes)",
		"rate(1 hour)":             "rate(1 hour)",
		"cron(0 10 ? * MON-FRI *)": "cron(0 10 ? * MON-FRI *)",
		"  cron(0 10 * * ? *)  ":   "cron(0 10 * * ? *)",
		"0 0 * * 5-6":              "cron(0 0 ? * 6-7 *)",
		"0 9 * * 1,3":              "cron(0 9 ? * 2,4 *)",
	}
	for in, want := range good {
		got, err := api.ScheduleExpression(in)
		if err != nil || got != want {
			t.Errorf("ScheduleExpression(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "* * * *", "61 * * * *", "0 3 1 * 1", "rate(0 minutes)", "rate(1 minutes)",
		"rate(2 minute)", "cron(0 10 * * * *)", "cron(0 10 * *)", "cron(a;b c d e f)", "@often", "0 0 ? * *", "x y z w v"} {
		if got, err := api.ScheduleExpression(in); err == nil || !errors.Is(err, api.ErrBadRequest) {
			t.Errorf("ScheduleExpression(%q) = %q, %v; want a bad request", in, got, err)
		}
	}
}

// TestAtIsBoundedByTheAPIsClock: how far ahead a schedule's "at" may be is measured from the
// API's Clock, not the wall clock: with the clock stopped in 2040, a run at mid-2040 is taken
// and one more than MaxDelay after the clock is refused, whatever today's date.
func TestAtIsBoundedByTheAPIsClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFixture(t, func(c *api.Config) { c.Clock = clock.NewStopped(now) })
	f.ok(t, `{"action":"schedule","spider":"demo","at":"2040-06-01T00:00:00Z"}`)
	late := now.Add(api.MaxDelay + time.Hour).Format(time.RFC3339)
	if out := f.call(t, `{"action":"schedule","spider":"demo","at":"`+late+`"}`); out["status"] != "error" ||
		!strings.Contains(fmt.Sprint(out["message"]), "ahead") {
		t.Fatalf("at %s with the clock at %s: %v, want an error saying it is too far ahead", late, now, out)
	}
}
