package cronstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"crawlq/internal/api"
	"crawlq/internal/clock"
	"crawlq/internal/cronstore"
	"crawlq/internal/dbtest"
)

// The store answers the api's calls as EventBridge Scheduler does.
var _ api.Scheduler = (*cronstore.Store)(nil)

func TestParseEventBridgeExpressions(t *testing.T) {
	t.Parallel()
	mon := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC) // a Monday
	for _, c := range []struct {
		expr, tz string
		after    time.Time
		want     time.Time
	}{
		// Weekdays at 03:30: EventBridge's MON-FRI is 2-6.
		{"cron(30 3 ? * 2-6 *)", "", mon, time.Date(2026, 11, 24, 3, 30, 0, 0, time.UTC)},
		{"cron(30 3 ? * MON-FRI *)", "", mon, time.Date(2026, 11, 24, 3, 30, 0, 0, time.UTC)},
		// Sundays (1) only.
		{"cron(0 12 ? * 1 *)", "", mon, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)},
		{"cron(0 0 1 * ? *)", "", mon, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		// 09:00 in Paris is 08:00 UTC in winter.
		{"cron(0 9 * * ? *)", "Europe/Paris", mon, time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)},
		{"rate(5 minutes)", "", mon, mon.Add(5 * time.Minute)},
		{"rate(2 seconds)", "", mon, mon.Add(2 * time.Second)},
	} {
		sc, err := cronstore.Parse(c.expr, c.tz)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if got := sc.First(c.after); !got.Equal(c.want) {
			t.Errorf("%s in %q after %s: %s, want %s", c.expr, c.tz, c.after, got, c.want)
		}
	}
	for _, c := range []struct{ expr, want string }{
		{"cron(0 0 L * ? *)", "day-of-month"},
		{"cron(0 0 ? * 6#3 *)", "day-of-week"},
		{"cron(0 0 ? * 8 *)", "day-of-week"},
		{"cron(0 0 * * ? 2027)", "year"},
		{"cron(0 0 * *)", "6 fields"},
		{"rate(1 seconds)", "rate(1 second)"},
		{"every minute", "want cron"},
	} {
		if _, err := cronstore.Parse(c.expr, ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.expr, err, c.want)
		}
	}
	// Ticks missed are skipped, not caught up one by one.
	sc, _ := cronstore.Parse("rate(1 minute)", "")
	if got := sc.After(mon, mon.Add(10*time.Minute+time.Second)); !got.Equal(mon.Add(11 * time.Minute)) {
		t.Errorf("rate after 10 missed ticks: %s", got)
	}
}

func newStore(t *testing.T, clk clock.Clock) *cronstore.Store {
	t.Helper()
	st, err := cronstore.New(cronstore.Config{Pool: dbtest.Pool(t), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func create(t *testing.T, st *cronstore.Store, name, expr, input string) error {
	t.Helper()
	_, err := st.CreateSchedule(context.Background(), &scheduler.CreateScheduleInput{Name: aws.String(name), GroupName: aws.String("crawlq"),
		ScheduleExpression: aws.String(expr), Target: &types.Target{Input: aws.String(input)}})
	return err
}

func TestSchedulerCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, nil)
	if err := create(t, st, "a", "rate(1 hour)", `{"action":"schedule","spider":"demo"}`); err != nil {
		t.Fatal(err)
	}
	var conflict *types.ConflictException
	if err := create(t, st, "a", "rate(1 hour)", `{}`); !errors.As(err, &conflict) {
		t.Fatalf("second create of a: %v, want a ConflictException", err)
	}
	var invalid *types.ValidationException
	if err := create(t, st, "b", "cron(0 0 L * ? *)", `{}`); !errors.As(err, &invalid) || !strings.Contains(err.Error(), "day-of-month") {
		t.Fatalf("create with L: %v, want a ValidationException naming the field", err)
	}
	for i := range 150 {
		if err := create(t, st, fmt.Sprintf("p%03d", i), "rate(1 day)", `{}`); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	var token *string
	for {
		out, err := st.ListSchedules(ctx, &scheduler.ListSchedulesInput{GroupName: aws.String("crawlq"), NextToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range out.Schedules {
			names = append(names, aws.ToString(s.Name))
		}
		if token = out.NextToken; token == nil {
			break
		}
	}
	if len(names) != 151 || names[0] != "a" || names[150] != "p149" {
		t.Fatalf("listed %d schedules (%v ... ); want a and p000..p149", len(names), names[:3])
	}
	g, err := st.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("a"), GroupName: aws.String("crawlq")})
	if err != nil || aws.ToString(g.Target.Input) != `{"action":"schedule","spider":"demo"}` || aws.ToString(g.ScheduleExpressionTimezone) != "UTC" {
		t.Fatalf("get a: %+v %v", g, err)
	}
	if _, err := st.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String("a"), GroupName: aws.String("crawlq")}); err != nil {
		t.Fatal(err)
	}
	var nf *types.ResourceNotFoundException
	if _, err := st.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String("a"), GroupName: aws.String("crawlq")}); !errors.As(err, &nf) {
		t.Fatalf("second delete: %v, want ResourceNotFoundException", err)
	}
	if _, err := st.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("a"), GroupName: aws.String("crawlq")}); !errors.As(err, &nf) {
		t.Fatalf("get of a deleted schedule: %v", err)
	}
}

// Each tick fires once, however many firers look at once; a failed fire is recorded and its tick
// not retried; a tick more than MaxAge late is skipped.
func TestFireDueOncePerTick(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := clock.NewStopped(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	st := newStore(t, c)
	if err := create(t, st, "every-minute", "rate(1 minute)", `{"n":1}`); err != nil {
		t.Fatal(err)
	}
	var fired sync.Map // tick -> count
	var calls atomic.Int32
	fire := func(ctx context.Context, e cronstore.Entry, tick time.Time) (string, error) {
		calls.Add(1)
		v, _ := fired.LoadOrStore(tick.UnixMilli(), new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		return fmt.Sprint(tick.Unix()), nil
	}
	for range 3 {
		c.Advance(time.Minute)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := st.FireDue(ctx, 10, fire); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	if calls.Load() != 3 {
		t.Errorf("3 ticks with 4 firers each fired %d times", calls.Load())
	}
	fired.Range(func(k, v any) bool {
		if n := v.(*atomic.Int32).Load(); n != 1 {
			t.Errorf("tick %v fired %d times", k, n)
		}
		return true
	})
	e, err := st.Get(ctx, "crawlq", "every-minute")
	if err != nil {
		t.Fatal(err)
	}
	if !e.NextAt.Equal(c.Now().Add(time.Minute)) || e.LastRun == "" || e.LastError != "" {
		t.Errorf("after 3 ticks: next %s (now %s), last run %q, error %q", e.NextAt, c.Now(), e.LastRun, e.LastError)
	}

	// A failing fire is recorded; its tick is not fired again.
	c.Advance(time.Minute)
	if n, err := st.FireDue(ctx, 10, func(context.Context, cronstore.Entry, time.Time) (string, error) {
		return "", errors.New("unknown spider")
	}); n != 0 || err != nil {
		t.Fatalf("failing fire: %d %v", n, err)
	}
	if e, _ := st.Get(ctx, "crawlq", "every-minute"); e.LastError != "unknown spider" {
		t.Errorf("failed tick's error: %q", e.LastError)
	}
	if n, _ := st.FireDue(ctx, 10, fire); n != 0 {
		t.Errorf("the failed tick fired again")
	}

	// Two hours without a firer: the overdue tick is skipped and said so, the next one is ahead.
	c.Advance(2 * time.Hour)
	if n, err := st.FireDue(ctx, 10, fire); n != 0 || err != nil {
		t.Fatalf("overdue tick: fired %d, %v", n, err)
	}
	e, _ = st.Get(ctx, "crawlq", "every-minute")
	if !strings.Contains(e.LastError, "skipped") || !e.NextAt.After(c.Now()) || e.NextAt.After(c.Now().Add(time.Minute)) {
		t.Errorf("overdue tick: error %q, next %s (now %s)", e.LastError, e.NextAt, c.Now())
	}
}
