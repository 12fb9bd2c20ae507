package lambdafn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/api"
	"crawlq/internal/awstest"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/dispatch"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/lambdafn"
	"crawlq/internal/testwait"
)

// The dispatch config publishes run events to CRAWLQ_EVENT_BUS (here a custom bus in moto), and
// judges runs without publishing when it is "off".
func TestDispatchPublishesToEventBus(t *testing.T) {
	awstest.Moto(t)
	ctx := context.Background()
	cfg, sq, q := eventQueue(t, "crawlq-runs")

	pool := dbtest.Pool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO crawlq_run (spider, queue) VALUES ('demo', 'crawl')`); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CRAWLQ_EVENT_BUS": "crawlq-runs"}
	d, err := lambdafn.NewDeps(pool, cfg, nil, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	var emf bytes.Buffer
	p, err := d.Events(&emf)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.Drain(ctx); err != nil || res.Published != 1 {
		t.Fatalf("drain %+v %v", res, err)
	}
	m, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10})
	if err != nil || len(m.Messages) != 1 || !strings.Contains(aws.ToString(m.Messages[0].Body), `"state": "pending"`) &&
		!strings.Contains(aws.ToString(m.Messages[0].Body), `"state":"pending"`) {
		t.Fatalf("messages %+v %v", m, err)
	}

	d.Config.EventBus = "off"
	if _, err := pool.Exec(ctx, `UPDATE crawlq_run SET state = 'cancelled'`); err != nil {
		t.Fatal(err)
	}
	if p, err = d.Events(&emf); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Drain(ctx); err != nil || res.Published != 1 || res.Judged != 1 {
		t.Fatalf("drain with events off %+v %v", res, err)
	}
	m, err = sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10})
	if err != nil || len(m.Messages) != 0 {
		t.Fatalf("published with events off: %+v %v", m.Messages, err)
	}
}

// eventQueue creates, in the emulator awstest.Moto started, an SQS queue that receives every
// crawlq event put on bus (created unless it is "default"), and returns the emulator's AWS
// config, an SQS client and the queue's URL.
func eventQueue(t *testing.T, bus string) (aws.Config, *sqs.Client, *string) {
	t.Helper()
	ctx := context.Background()
	cfg := awstest.Config(t)
	eb, sq := eventbridge.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	if bus != "default" {
		if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(bus)}); err != nil {
			t.Fatal(err)
		}
	}
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("runs")})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"QueueArn"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("runs"), EventBusName: aws.String(bus),
		EventPattern: aws.String(`{"source":["crawlq"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("runs"), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String("1"), Arn: aws.String(attrs.Attributes["QueueArn"])}}}); err != nil {
		t.Fatal(err)
	}
	return cfg, sq, q.QueueUrl
}

// receiveStates reads the queue until the states of run's events are want; a receive waits up to
// a second for a message (SQS long polling). Events go out at least once (a PutEvents that timed
// out on a loaded emulator may have landed and is sent again), so, as docs/guide.md tells a
// consumer to, it drops an event whose sequence it has read before: seen holds those of the
// test's earlier calls too.
func receiveStates(t *testing.T, sq *sqs.Client, q *string, seen map[int64]bool, run int64, want string) {
	t.Helper()
	var got []string
	testwait.For(t, fmt.Sprintf("run %d's events %s", run, want), func() (string, bool) {
		m, err := sq.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range m.Messages {
			var ev struct {
				Detail events.Detail `json:"detail"`
			}
			if err := json.Unmarshal([]byte(aws.ToString(msg.Body)), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Detail.RunID == run && !seen[ev.Detail.Sequence] {
				seen[ev.Detail.Sequence] = true
				got = append(got, ev.Detail.State)
			}
			if _, err := sq.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: q, ReceiptHandle: msg.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		return strings.Join(got, ","), strings.Join(got, ",") == want
	})
}

// published says which of a run's recorded events are marked published, in order.
func published(t *testing.T, pool *pgxpool.Pool, run int64) []bool {
	t.Helper()
	evs, err := events.RunEvents(context.Background(), pool, run)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bool, len(evs))
	for i, e := range evs {
		out[i] = e.PublishedAt != nil
	}
	return out
}

type apiAnswer struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	RunID   int64  `json:"run_id"`
}

func callAPI(t *testing.T, h func(context.Context, json.RawMessage) (json.RawMessage, error), payload string) apiAnswer {
	t.Helper()
	out, err := h(context.Background(), json.RawMessage(payload))
	if err != nil {
		t.Fatal(err)
	}
	var a apiAnswer
	if err := json.Unmarshal(out, &a); err != nil || a.Status != "ok" {
		t.Fatalf("%s: %s %v", payload, out, err)
	}
	return a
}

// The api function publishes the events of the runs it schedules and cancels before it
// answers, and the worker function those of the runs it works while it works them: with no
// dispatch tick at all, every state change reaches EventBridge (moto's default bus).
func TestFunctionsPublishTheirRunEvents(t *testing.T) {
	awstest.Moto(t)
	cfg, sq, q := eventQueue(t, "default")
	seen := map[int64]bool{}
	pool := dbtest.Pool(t)
	d := newDeps(t, pool, cfg)
	a, err := api.New(d.APIConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	h := lambdafn.API(a)

	// Scheduled, then cancelled: each answer comes after its event is out.
	r := callAPI(t, h, `{"action":"schedule","spider":"demo","args":{"base_url":"http://127.0.0.1:1"},"delay_seconds":3600}`)
	if p := published(t, pool, r.RunID); len(p) != 1 || !p[0] {
		t.Fatalf("run %d events published %v when schedule answered", r.RunID, p)
	}
	callAPI(t, h, fmt.Sprintf(`{"action":"cancel","job":"%d"}`, r.RunID))
	if p := published(t, pool, r.RunID); len(p) != 2 || !p[1] {
		t.Fatalf("run %d events published %v when cancel answered", r.RunID, p)
	}
	receiveStates(t, sq, q, seen, r.RunID, "pending,cancelled")

	// A run a worker invocation crawls: its events arrive while the invocation still runs
	// (it would idle for 30 s before returning), so they were not left to its end.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr, err := demosite.New(demosite.Config{Items: 10, SlowDelay: time.Millisecond}).Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r = callAPI(t, h, fmt.Sprintf(`{"action":"schedule","spider":"demo","args":{"base_url":"http://%s"}}`, addr))
	receiveStates(t, sq, q, seen, r.RunID, "pending")
	done := make(chan error, 1)
	go func() {
		// The default margin (20 s): the worker gives a publish a quarter of it, and a loaded
		// machine's moto took over the 1 s a 4 s margin left.
		_, err := d.Worker(lambdafn.WorkerOptions{IdleExit: 30 * time.Second, Fetch: fetch.Config{AllowLoopback: true}})(ctx, dispatch.WorkerEvent{})
		done <- err
	}()
	receiveStates(t, sq, q, seen, r.RunID, "running,succeeded")
	select {
	case err := <-done:
		t.Fatalf("the worker returned (%v) before its run's events were read", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A publish failure in the api's prompt publish (EventBridge unreachable) does not fail the
// request and leaves the run as its state change left it; the warning is logged, and a later
// drain (the dispatch tick's) publishes the event.
func TestAPIPublishFailureLeftForTheTick(t *testing.T) {
	awstest.Moto(t)
	cfg, sq, q := eventQueue(t, "default")
	seen := map[int64]bool{}
	pool := dbtest.Pool(t)
	down := cfg.Copy()
	down.BaseEndpoint = aws.String("http://127.0.0.1:1")
	down.RetryMaxAttempts = 1
	var logs syncBuf
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	d, err := lambdafn.NewDeps(pool, down, nil, func(string) string { return "" }, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Control.Pipeline.Close(context.Background()) })
	a, err := api.New(d.APIConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	r := callAPI(t, lambdafn.API(a), `{"action":"schedule","spider":"demo","args":{"base_url":"http://127.0.0.1:1"},"delay_seconds":3600}`)
	evs, err := events.RunEvents(context.Background(), pool, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].PublishedAt != nil || evs[0].Attempts != 1 || evs[0].LastError == "" {
		t.Fatalf("events after a failed publish: %+v, want the one tried once with its error", evs)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "run events not published now") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
	// The run is as its state change recorded it (the event's snapshot of the row).
	var same bool
	if err := pool.QueryRow(context.Background(), `SELECT (to_jsonb(r) - 'settings') = e.run FROM crawlq_run r
		JOIN crawlq_run_event e ON e.run_id = r.id WHERE r.id = $1`, r.RunID).Scan(&same); err != nil || !same {
		t.Fatalf("the run changed after its state change: %v %v", same, err)
	}

	up := newDeps(t, pool, cfg)
	// Real time passes here: nothing is due until the event's backoff has passed.
	testwait.Until(t, "a later drain publishes the event", func() bool {
		if _, err := up.Publisher.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		return published(t, pool, r.RunID)[0]
	})
	receiveStates(t, sq, q, seen, r.RunID, "pending")
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// pokeRecorder is the api's Lambda client: it keeps the dispatch pokes instead of sending them.
type pokeRecorder struct {
	mu    sync.Mutex
	pokes [][]byte
}

func (p *pokeRecorder) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pokes = append(p.pokes, in.Payload)
	return &lambda.InvokeOutput{StatusCode: 202}, nil
}

// A schedule that pokes dispatch answers without publishing: the poke's dispatch invocation
// publishes the run's event, and without a worker to start it still only fans out and publishes.
func TestSchedulePokeLeavesEventsToDispatch(t *testing.T) {
	awstest.Moto(t)
	cfg, sq, q := eventQueue(t, "default")
	seen := map[int64]bool{}
	pool := dbtest.Pool(t)
	d := newDeps(t, pool, cfg)
	rec := &pokeRecorder{}
	a, err := api.New(d.APIConfig(rec))
	if err != nil {
		t.Fatal(err)
	}
	r := callAPI(t, lambdafn.API(a), `{"action":"schedule","spider":"demo","args":{"base_url":"http://127.0.0.1:1"},"delay_seconds":3600}`)
	if p := published(t, pool, r.RunID); len(p) != 1 || p[0] {
		t.Fatalf("run %d events published %v when schedule answered; want one, left to the poke", r.RunID, p)
	}
	rec.mu.Lock()
	pokes := rec.pokes
	rec.mu.Unlock()
	if len(pokes) != 1 {
		t.Fatalf("%d pokes, want 1", len(pokes))
	}
	dc, err := d.DispatchConfig(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	dc.Lookahead = -1
	dp, err := dispatch.New(dc)
	if err != nil {
		t.Fatal(err)
	}
	res, err := lambdafn.Dispatch(dp)(context.Background(), pokes[0])
	if err != nil || res.Events != 1 {
		t.Fatalf("poke: %+v %v; want the run's event published", res, err)
	}
	receiveStates(t, sq, q, seen, r.RunID, "pending")
}

// newDeps returns the functions' dependencies on pool and cfg, with no environment, closed when
// the test ends.
func newDeps(t *testing.T, pool *pgxpool.Pool, cfg aws.Config) *lambdafn.Deps {
	t.Helper()
	d, err := lambdafn.NewDeps(pool, cfg, nil, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Control.Pipeline.Close(context.Background()) })
	return d
}
