package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/awstest"
	"crawlq/internal/dbtest"
	"crawlq/internal/events"
	"crawlq/internal/monitor"
	"crawlq/internal/spider"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// fixtureRun creates a run of spider and moves it through states, each change committed on its
// own as the crawl package would. The last state gets the given items and pages.
func fixtureRun(t *testing.T, pool *pgxpool.Pool, spiderName string, items, pages int64, states ...string) int64 {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	var id int64
	if err := pool.QueryRow(ctx, `INSERT INTO crawlq_run (spider, queue) VALUES ($1, 'crawl') RETURNING id`, spiderName).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		q := `UPDATE crawlq_run SET state = $2::crawlq_run_state, started_at = COALESCE(started_at, now()),
			finished_at = CASE WHEN $5 THEN now() END, items = CASE WHEN $5 THEN $3 ELSE 0 END,
			pages = CASE WHEN $5 THEN $4 ELSE 0 END WHERE id = $1`
		if _, err := pool.Exec(ctx, q, id, s, items, pages, events.IsFinal(s)); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func newPublisher(t *testing.T, cfg events.Config) *events.Publisher {
	t.Helper()
	p, err := events.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func report(t *testing.T, pool *pgxpool.Pool, id int64) *events.Report {
	t.Helper()
	got, err := events.Reports(context.Background(), pool, []int64{id})
	if err != nil {
		t.Fatal(err)
	}
	if got[id] == nil {
		t.Fatalf("run %d has no report", id)
	}
	return got[id]
}

// The drift monitor compares a run's items with the median of the spider's last good runs; a
// run at 40% of it fails, and a failed run is left out of the next runs' baseline.
func TestDriftMonitor(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	mons := spider.Monitors{ItemsVsMedian: &spider.MedianMonitor{Runs: 3, WithinPercent: 50}}
	p := newPublisher(t, events.Config{Pool: pool, Monitors: func(string, string) (spider.Monitors, error) { return mons, nil }})
	run := func(items int64) *events.Report {
		id := fixtureRun(t, pool, "shop", items, items, "running", "succeeded")
		if _, err := p.Drain(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return report(t, pool, id)
	}
	first := run(100)
	if first.Monitors != monitor.StatusPassed || first.Results[0].Status != monitor.StatusUnknown {
		t.Fatalf("first run, nothing to compare with: %+v", first)
	}
	run(120)
	run(80)
	low := run(40) // median of 100, 120, 80 is 100
	if low.Monitors != monitor.StatusFailed || low.Results[0].Value != 40 {
		t.Fatalf("a run at 40%% of the median: %+v", low)
	}
	if got := events.Outcome(low.State, low.Monitors); got != "monitors_failed" {
		t.Fatalf("outcome %q", got)
	}
	// The 40-item run failed its monitors, so the baseline is still 120, 80, 100: 60 is within 50%.
	if r := run(60); r.Monitors != monitor.StatusPassed {
		t.Fatalf("60 items against a median of 100 within 50%%: %+v", r)
	}
	// A failed run is not judged: its state is the alarm.
	id := fixtureRun(t, pool, "shop", 0, 0, "running", "failed")
	if _, err := p.Drain(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if r := report(t, pool, id); r.Monitors != monitor.StatusSkipped {
		t.Fatalf("failed run: %+v", r)
	}
}

// Publishing off: every event is judged and marked done with a note, none is lost or left.
func TestPublishingOff(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	id := fixtureRun(t, pool, "shop", 3, 3, "running", "succeeded")
	p := newPublisher(t, events.Config{Pool: pool})
	res, err := p.Drain(ctxT(t, 10*time.Second))
	if err != nil || res.Published != 3 || res.Judged != 1 {
		t.Fatalf("drain %+v %v, want 3 events and 1 run judged", res, err)
	}
	evs, err := events.RunEvents(context.Background(), pool, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		// Done, and shown as not published: never published_at beside a note that it was not.
		if e.PublishedAt != nil || e.NotPublished != "publishing is off" || e.LastError != "" || !e.Done() {
			t.Fatalf("event %+v", e)
		}
	}
	if r := report(t, pool, id); r.Monitors != monitor.StatusNone {
		t.Fatalf("no monitors declared: %+v", r)
	}
}

// bus is an EventBridge rule in moto routing crawlq events that match a pattern to an SQS queue,
// so a test reads back what was published.
type bus struct {
	t   *testing.T
	sqs *sqs.Client
	url string
}

func newBus(t *testing.T, name, pattern string) *bus {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	cfg := awstest.Config(t)
	sq := sqs.NewFromConfig(cfg)
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"QueueArn"}})
	if err != nil {
		t.Fatal(err)
	}
	eb := eventbridge.NewFromConfig(cfg)
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventPattern: aws.String(pattern)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name),
		Targets: []ebtypes.Target{{Id: aws.String("1"), Arn: aws.String(attrs.Attributes["QueueArn"])}}}); err != nil {
		t.Fatal(err)
	}
	return &bus{t: t, sqs: sq, url: *q.QueueUrl}
}

// received is one event read back from SQS.
type received struct {
	Source     string         `json:"source"`
	DetailType string         `json:"detail-type"`
	Detail     events.Detail  `json:"detail"`
	Raw        map[string]any `json:"-"`
}

// drain reads every message in the queue. moto delivers to the target inside PutEvents, so once
// Drain returned, everything published is already there.
func (b *bus) drain() []received {
	b.t.Helper()
	var out []received
	for {
		m, err := b.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.url), MaxNumberOfMessages: 10})
		if err != nil {
			b.t.Fatal(err)
		}
		if len(m.Messages) == 0 {
			return out
		}
		for _, msg := range m.Messages {
			var r received
			if err := json.Unmarshal([]byte(aws.ToString(msg.Body)), &r); err != nil {
				b.t.Fatalf("message %s: %v", aws.ToString(msg.Body), err)
			}
			out = append(out, r)
			if _, err := b.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(b.url), ReceiptHandle: msg.ReceiptHandle}); err != nil {
				b.t.Fatal(err)
			}
		}
	}
}

func states(rs []received, run int64) []string {
	var out []string
	var last int64
	for _, r := range rs {
		if r.Detail.RunID != run {
			continue
		}
		if r.Detail.Sequence <= last {
			out = append(out, "OUT-OF-ORDER")
		}
		last = r.Detail.Sequence
		out = append(out, r.Detail.State)
	}
	return out
}

func runRow(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT to_jsonb(r)::text FROM crawlq_run r WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// A publish failure (EventBridge unreachable) leaves the run exactly as it was and the events
// waiting; the next drain publishes them, once each and in order per run.
func TestPublishFailureRetried(t *testing.T) {
	awstest.Moto(t)
	pool := dbtest.Pool(t)
	b := newBus(t, "all-runs", `{"source":["crawlq"],"detail-type":["Run State Change"]}`)
	a := fixtureRun(t, pool, "shop", 5, 5, "running", "succeeded")
	c := fixtureRun(t, pool, "shop", 0, 0, "cancelled")
	before := runRow(t, pool, a)

	cfg := awstest.Config(t)
	down := eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) {
		o.BaseEndpoint = aws.String("http://127.0.0.1:1")
		o.RetryMaxAttempts = 1
	})
	var emf bytes.Buffer
	p := newPublisher(t, events.Config{Pool: pool, Putter: down, Metrics: &emf, Backoff: func(int) time.Duration { return 0 },
		Monitors: func(string, string) (spider.Monitors, error) { return spider.Monitors{MinItems: ptr(int64(1))}, nil }})
	res, err := p.Drain(ctxT(t, 30*time.Second))
	if err == nil || res.Published != 0 || res.Failed == 0 {
		t.Fatalf("drain against an unreachable EventBridge: %+v, %v", res, err)
	}
	if after := runRow(t, pool, a); after != before {
		t.Fatalf("a publish failure changed the run:\nbefore %s\nafter  %s", before, after)
	}
	evs, _ := events.RunEvents(context.Background(), pool, a)
	if evs[0].PublishedAt != nil || evs[0].Attempts != 1 || evs[0].LastError == "" {
		t.Fatalf("failed event %+v, want unpublished, 1 attempt, its error kept", evs[0])
	}
	if got := b.drain(); len(got) != 0 {
		t.Fatalf("%d events arrived though publishing failed", len(got))
	}

	// EventBridge is back: the same events go out, once each, in order.
	up := eventbridge.NewFromConfig(cfg)
	p = newPublisher(t, events.Config{Pool: pool, Putter: up, Metrics: &emf,
		Monitors: func(string, string) (spider.Monitors, error) { return spider.Monitors{MinItems: ptr(int64(1))}, nil }})
	res, err = p.Drain(ctxT(t, 30*time.Second))
	if err != nil || res.Published != 5 {
		t.Fatalf("drain %+v %v, want the 5 events", res, err)
	}
	got := b.drain()
	if s := strings.Join(states(got, a), ","); s != "pending,running,succeeded" {
		t.Fatalf("run %d events %s", a, s)
	}
	if s := strings.Join(states(got, c), ","); s != "pending,cancelled" {
		t.Fatalf("run %d events %s", c, s)
	}
	for _, r := range got {
		if r.Source != "crawlq" || r.DetailType != "Run State Change" {
			t.Fatalf("event %+v", r)
		}
		if r.Detail.RunID == a && r.Detail.State == "succeeded" &&
			(r.Detail.Outcome != "succeeded" || r.Detail.Stats.Items != 5 || r.Detail.Monitors == nil || r.Detail.Monitors.Status != "passed") {
			t.Fatalf("final event %+v", r.Detail)
		}
	}
	// Judged once, though its final event was attempted twice: one metric line.
	if n := strings.Count(emf.String(), `"MonitorFailed"`); n != 2 { // name in the directive and the value key
		t.Fatalf("monitor metrics written %d times:\n%s", n/2, emf.String())
	}
	if n, _, err := events.Backlog(context.Background(), pool); err != nil || n != 0 {
		t.Fatalf("backlog %d %v", n, err)
	}
	if res, err := p.Drain(ctxT(t, 30*time.Second)); err != nil || res.Published != 0 {
		t.Fatalf("a second drain published %+v %v", res, err)
	}
}

func ptr[T any](v T) *T { return &v }

// Concurrent drains (two dispatch ticks) take different events: each is published once.
func TestConcurrentDrains(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	const runs = 40
	for range runs {
		fixtureRun(t, pool, "shop", 1, 1, "running", "succeeded")
	}
	p1 := newPublisher(t, events.Config{Pool: pool, Batch: 3})
	p2 := newPublisher(t, events.Config{Pool: pool, Batch: 3})
	type out struct {
		r   events.Result
		err error
	}
	ch := make(chan out, 2)
	for _, p := range []*events.Publisher{p1, p2} {
		go func() {
			r, err := p.Drain(ctxT(t, 30*time.Second))
			ch <- out{r, err}
		}()
	}
	a, b := <-ch, <-ch
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if n := a.r.Published + b.r.Published; n != 3*runs {
		t.Fatalf("published %d + %d, want %d in all", a.r.Published, b.r.Published, 3*runs)
	}
	if n := a.r.Judged + b.r.Judged; n != runs {
		t.Fatalf("judged %d runs, want %d", n, runs)
	}
	if n, _, err := events.Backlog(context.Background(), pool); err != nil || n != 0 {
		t.Fatalf("backlog %d %v", n, err)
	}
}
