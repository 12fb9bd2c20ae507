package local_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"crawlq/internal/crawl"
	"crawlq/internal/cronstore"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/testwait"
)

// startLocal serves a local stack without a tick: only wakes and the stored schedules move it.
func startLocal(t *testing.T, url string) *runningStack {
	t.Helper()
	return runLocal(t, url, nil, -1)
}

// cronRuns lists the runs of spider fired by schedule name, by tick.
func cronRuns(t *testing.T, c *crawl.Crawler, spider, name string) map[time.Time][]*crawl.Run {
	t.Helper()
	runs, err := c.List(context.Background(), crawl.ListParams{Spider: spider, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[time.Time][]*crawl.Run{}
	for _, r := range runs {
		ms, ok := strings.CutPrefix(r.IdempotencyKey, "cron:"+name+":")
		if !ok {
			t.Fatalf("run %d has key %q; want cron:%s:TICK", r.ID, r.IdempotencyKey, name)
		}
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		tick := time.UnixMilli(n)
		out[tick] = append(out[tick], r)
	}
	return out
}

// `crawlq local` fires a schedule made with addschedule on time, keeps it across a restart, and
// fires no tick twice: the tick fired before the restart is not fired again by the new process,
// and the next one fires on time.
func TestCronScheduleFiresOnTimeAcrossRestart(t *testing.T) {
	_, url := dbtest.Schema(t)
	ctx := context.Background()
	site := demosite.New(demosite.Config{Items: 6, PerPage: 6, SlowDelay: 10 * time.Millisecond})
	addr, err := site.Serve(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s1 := startLocal(t, url)
	c := s1.deps.Control.Crawler
	resp := s1.st.API().Handle(ctx, []byte(`{"action":"addschedule","name":"every2s","spider":"demo","cron":"rate(2 seconds)",
		"args":{"base_url":"http://`+addr.String()+`"},"settings":{"max_pages":2}}`))
	if resp["status"] != "ok" || resp["expression"] != "rate(2 seconds)" {
		t.Fatalf("addschedule: %v", resp)
	}
	if l := s1.st.API().Handle(ctx, []byte(`{"action":"listschedules"}`)); l["status"] != "ok" || !strings.Contains(stringOf(l["schedules"]), `"every2s"`) {
		t.Fatalf("listschedules: %v", l)
	}

	// onTime waits for the tick's run and checks it was created within a second of its tick.
	onTime := func(tick time.Time) *crawl.Run {
		t.Helper()
		r := testwait.For(t, "tick "+tick.Format(time.StampMilli)+" fires", func() (*crawl.Run, bool) {
			runs := cronRuns(t, c, "demo", "every2s")[tick]
			if len(runs) == 0 {
				return nil, false
			}
			return runs[0], true
		})
		late := r.CreatedAt.Sub(tick)
		t.Logf("tick %s fired %s late (run %d)", tick.Format(time.StampMilli), late, r.ID)
		if late < 0 || late > time.Second {
			t.Errorf("tick %s fired at %s (%s late); want within 1s", tick.Format(time.StampMilli), r.CreatedAt.Format(time.StampMilli), late)
		}
		return r
	}
	store, err := cronstore.New(cronstore.Config{Pool: s1.deps.Pool})
	if err != nil {
		t.Fatal(err)
	}
	e, err := store.Get(ctx, "crawlq", "every2s")
	if err != nil {
		t.Fatal(err)
	}
	first := e.NextAt
	onTime(first)

	// Restart: stop this process at once, start another on the same database.
	s1.stop()
	s2 := startLocal(t, url)
	c = s2.deps.Control.Crawler
	e, err = store.Get(ctx, "crawlq", "every2s")
	if err != nil {
		t.Fatal(err)
	}
	if !e.NextAt.After(first) {
		t.Fatalf("after the restart the schedule's next tick is %s, not after the fired %s", e.NextAt, first)
	}
	second := e.NextAt
	onTime(second)

	byTick := cronRuns(t, c, "demo", "every2s")
	for tick, runs := range byTick {
		if len(runs) != 1 {
			t.Errorf("tick %s fired %d runs", tick.Format(time.StampMilli), len(runs))
		}
	}
	if len(byTick[first]) != 1 || len(byTick[second]) != 1 {
		t.Errorf("runs by tick: %v", byTick)
	}
	if d := s2.st.API().Handle(ctx, []byte(`{"action":"delschedule","name":"every2s"}`)); d["status"] != "ok" {
		t.Fatalf("delschedule: %v", d)
	}
	if _, err := store.Get(ctx, "crawlq", "every2s"); err == nil {
		t.Fatal("the deleted schedule is still stored")
	}
}

func stringOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A tick whose run was created but whose next_at did not advance (the process died between the
// two commits) is not fired a second time: the next process finds the tick's run by its key.
func TestCronTickFiredBeforeACrashIsNotFiredAgain(t *testing.T) {
	_, url := dbtest.Schema(t)
	ctx := context.Background()
	pool := dbtest.Open(t, url, 2)
	store, err := cronstore.New(cronstore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	payload := `{"action":"schedule","spider":"demo","args":{"base_url":"http://127.0.0.1:9"},"delay_seconds":3600}`
	if err := create(store, "hourly", "rate(1 hour)", payload); err != nil {
		t.Fatal(err)
	}
	var tick time.Time
	if err := pool.QueryRow(ctx, `UPDATE crawlq_schedule SET next_at = date_trunc('milliseconds', now()) - interval '1 second'
RETURNING next_at`).Scan(&tick); err != nil {
		t.Fatal(err)
	}
	// What the dead process did: the tick's run, keyed by schedule and tick; it has even finished
	// since (so the key alone would not stop a second run).
	key := "cron:hourly:" + strconv.FormatInt(tick.UnixMilli(), 10)
	jobid := crawlqCLI(t, url, "schedule", "--spider", "demo", "--arg", "base_url=http://127.0.0.1:9", "--delay", "1h", "--key", key)
	crawlqCLI(t, url, "cancel-run", jobid)
	s := startLocal(t, url)
	e := testwait.For(t, "the overdue tick is looked at", func() (cronstore.Entry, bool) {
		e, err := store.Get(ctx, "crawlq", "hourly")
		if err != nil {
			t.Fatal(err)
		}
		return e, e.LastTickAt != nil
	})
	if !e.LastTickAt.Equal(tick) || e.LastRun != jobid || e.LastError != "" {
		t.Fatalf("tick %s: last tick %s, run %q (want %v), error %q", tick, e.LastTickAt, e.LastRun, jobid, e.LastError)
	}
	if runs := cronRuns(t, s.deps.Control.Crawler, "demo", "hourly")[tick]; len(runs) != 1 {
		t.Fatalf("tick %s has %d runs, want 1", tick, len(runs))
	}
}

func create(st *cronstore.Store, name, expr, input string) error {
	_, err := st.CreateSchedule(context.Background(), &scheduler.CreateScheduleInput{Name: aws.String(name), GroupName: aws.String("crawlq"),
		ScheduleExpression: aws.String(expr), Target: &types.Target{Input: aws.String(input)}})
	return err
}
