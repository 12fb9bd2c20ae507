package dispatch_test

import (
	"context"
	"errors"
	"testing"

	"crawlq/internal/dbtest"
	"crawlq/internal/dispatch"
	"crawlq/internal/events"
	"crawlq/internal/queue"
)

// A tick publishes run events; a publish failure is reported in the result without failing the tick.
func TestTickPublishesEvents(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO crawlq_run (spider, queue) VALUES ('demo', 'crawl')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE crawlq_run SET state = 'cancelled'`); err != nil {
		t.Fatal(err)
	}
	pub, err := events.New(events.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	drain := func(ctx context.Context) (int, error) { r, err := pub.Drain(ctx); return r.Published, err }
	dp, err := dispatch.New(dispatch.Config{Queue: queue.New(pool, queue.Config{}), LambdaQueues: []string{}, Lookahead: -1, Events: drain})
	if err != nil {
		t.Fatal(err)
	}
	res, err := dp.Tick(ctx)
	if err != nil || res.Events != 2 || res.EventsError != "" {
		t.Fatalf("tick %+v %v, want the run's 2 events published", res, err)
	}
	failing := func(context.Context) (int, error) { return 0, errors.New("eventbridge down") }
	dp, err = dispatch.New(dispatch.Config{Queue: queue.New(pool, queue.Config{}), LambdaQueues: []string{}, Lookahead: -1, Events: failing})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := dp.Tick(ctx); err != nil || res.EventsError != "eventbridge down" {
		t.Fatalf("tick %+v %v, want it to succeed and report the publish error", res, err)
	}
}
