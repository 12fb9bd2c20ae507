// Package dispatch owns the dispatcher's tick: the maintenance that must run even when no worker is
// alive (rescue expired leases, promote due delayed jobs, finish runs with nothing left, forget
// dead workers, and a retention pass: see internal/maintain) and the fan-out that starts workers: asynchronous worker Lambda invocations for
// the Lambda queues and runner tasks for the long-crawl queue, each sized by backlog and capped
// per queue, counting live workers by their heartbeats in Postgres (not by eventually
// consistent Lambda or ECS listings). A tick also waits for jobs due within its lookahead, so a
// delayed run starts within about a second of its time rather than at the next minute tick.
// Between ticks, Poke starts what a schedule or redrive added (the api pokes the dispatch
// function), and Wake/Listen carry such a poke over Postgres from any process to a dispatcher
// that can listen (`crawlq local`).
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/maintain"
	"crawlq/internal/queue"
)

// Invoker is the part of the Lambda client dispatch uses; *lambda.Client implements it.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// TaskLauncher starts runner tasks for the long-crawl queue (ecsrun.Launcher on AWS, in-process
// runners under `crawlq local`). Launch tries to start n and returns how many started.
type TaskLauncher interface {
	Launch(ctx context.Context, n int) (started int, err error)
}

// WorkerEvent is the payload of a worker invocation.
type WorkerEvent struct {
	Queue string `json:"queue"`
}

// Config wires a Dispatcher. Queue is required; so is Invoker with WorkerFunction when
// LambdaQueues is not empty.
type Config struct {
	Queue *queue.Client
	// Crawler, when set, sweeps runs with nothing left. Default none.
	Crawler *crawl.Crawler
	// Invoker and WorkerFunction start worker Lambdas.
	Invoker        Invoker
	WorkerFunction string
	// LambdaQueues are worked by worker Lambdas. Default ["crawl"].
	LambdaQueues []string
	// WorkerMax caps the live workers of each Lambda queue. Default 10.
	WorkerMax int
	// QueueMax overrides WorkerMax per queue. Default none.
	QueueMax map[string]int
	// JobsPerWorker is the backlog one worker is expected to handle; the dispatcher wants
	// ceil((waiting+running)/JobsPerWorker) workers. Default 10 (a worker's default concurrency).
	JobsPerWorker int
	// LongQueue is worked by runner tasks started through Launcher. Default "long".
	LongQueue string
	// Launcher starts runner tasks; nil leaves the long queue alone.
	Launcher TaskLauncher
	// LongMax caps live runner tasks. Default 2.
	LongMax int
	// Fleets are more queues worked by runner tasks, each through its own launcher (the crawl
	// queue on the Fargate fleet, when it is not in LambdaQueues). Default none.
	Fleets []Fleet
	// Horizon is how recently a worker must have heartbeated to count as live. Default 60s.
	Horizon time.Duration
	// Lookahead is how far ahead a tick waits for delayed jobs, bounded by the context's
	// deadline minus DeadlineMargin. Default 1m; negative turns waiting off.
	Lookahead time.Duration
	// DeadlineMargin is kept free before the context's deadline. Default 3s.
	DeadlineMargin time.Duration
	// Events, when set, publishes the run events still waiting (events.Publisher's Drain, wired
	// by lambdafn: those whose process did not publish them at once, such as this tick's sweep's,
	// and the retries) and returns how many went out. Its error is logged and shown in
	// Result.EventsError, never fails the tick: events wait in their outbox and are retried,
	// while a failed tick would also hold back the fan-out. Default none.
	Events func(ctx context.Context) (published int, err error)
	// PublishRuns, when set, publishes the events of the given runs only (events.Publisher's
	// PublishRuns): what a poke publishes, so that a burst of pokes does not have each drain the
	// whole outbox. Its error is treated as Events'. Default none.
	PublishRuns func(ctx context.Context, runIDs []int64) (published int, err error)
	// Batch bounds each maintenance statement. Default 5000.
	Batch int
	// Maintain, when set, runs a maintenance pass in every tick (alongside the wait for delayed
	// jobs; the pass itself runs at most once per its Interval across all processes). Default none.
	Maintain *maintain.Service
	// Logger defaults to slog.Default().
	// Clock tells the tick the time: when maintenance measures retention back from, and how far
	// ahead due work is looked for. Default the wall clock.
	Clock  clock.Clock
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Queue == nil:
		return errors.New("dispatch: Queue is required")
	case len(c.LambdaQueues) > 0 && (c.Invoker == nil || c.WorkerFunction == ""):
		return errors.New("dispatch: Invoker and WorkerFunction are required to work LambdaQueues")
	case c.WorkerMax < 0:
		return errors.New("dispatch: WorkerMax must not be negative")
	case c.LongMax < 0:
		return errors.New("dispatch: LongMax must not be negative")
	case c.JobsPerWorker < 0:
		return errors.New("dispatch: JobsPerWorker must not be negative")
	}
	for i, f := range c.Fleets {
		if f.Launcher == nil || f.Max < 0 || f.Burst < 0 {
			return fmt.Errorf("dispatch: Fleets[%d] (%s) needs a Launcher, and a non-negative Max and Burst", i, f.Queue)
		}
		if f.Burst > 0 && (c.Invoker == nil || c.WorkerFunction == "") {
			return fmt.Errorf("dispatch: Fleets[%d] (%s): Burst needs Invoker and WorkerFunction", i, f.Queue)
		}
		if err := queue.ValidateQueue(f.Queue); err != nil {
			return fmt.Errorf("dispatch: Fleets[%d]: %w", i, err)
		}
	}
	for q, n := range c.QueueMax {
		if n < 0 {
			return fmt.Errorf("dispatch: QueueMax[%s] must not be negative", q)
		}
	}
	for _, q := range append(append([]string{}, c.LambdaQueues...), c.LongQueue) {
		if q != "" {
			if err := queue.ValidateQueue(q); err != nil {
				return fmt.Errorf("dispatch: queue: %w", err)
			}
		}
	}
	return nil
}

// Fleet is a queue worked by runner tasks that Launcher starts, at most Max alive at once.
type Fleet struct {
	Queue    string
	Launcher TaskLauncher
	Max      int
	// Burst is how many worker Lambdas may work the queue while the fleet's live tasks do not
	// cover its backlog: the half minute or more a Fargate task takes to start, and a backlog
	// beyond Max. A small run then starts in a second instead of waiting for a task; the price is
	// that those Lambdas fetch through the NAT gateway (crawlq cost prices both paths). They stop
	// being started once live tasks cover the backlog, and exit when idle. Default 0: the queue
	// waits for its tasks.
	Burst int
}

// Dispatcher runs ticks. Ticks may run concurrently (a poke during a minute tick); every step
// is safe to repeat, and at worst a race starts a worker more than needed.
type Dispatcher struct {
	// TestSignals are sent as ticks and pokes end, for tests to wait on; off unless a test
	// Inits them.
	TestSignals TestSignals

	cfg   Config
	log   *slog.Logger
	pokes pokeQueue
}

// New returns a Dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.LambdaQueues == nil {
		cfg.LambdaQueues = []string{"crawl"}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.WorkerMax == 0 {
		cfg.WorkerMax = 10
	}
	if cfg.JobsPerWorker == 0 {
		cfg.JobsPerWorker = 10
	}
	if cfg.LongQueue == "" {
		cfg.LongQueue = "long"
	}
	if cfg.LongMax == 0 {
		cfg.LongMax = 2
	}
	if cfg.Horizon == 0 {
		cfg.Horizon = time.Minute
	}
	if cfg.Lookahead == 0 {
		cfg.Lookahead = time.Minute
	}
	if cfg.DeadlineMargin == 0 {
		cfg.DeadlineMargin = 3 * time.Second
	}
	if cfg.Batch == 0 {
		cfg.Batch = 5000
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Dispatcher{cfg: cfg, log: cfg.Logger}, nil
}

// Result says what a tick did.
type Result struct {
	Rescued  int            `json:"rescued"`
	Promoted int            `json:"promoted"`
	Swept    int            `json:"swept"`
	Pruned   int            `json:"pruned"`
	Invoked  map[string]int `json:"invoked"`  // worker Lambdas invoked per queue
	Launched int            `json:"launched"` // runner tasks started
	Waited   int            `json:"waited"`   // delayed jobs waited for inside the tick
	// Maintenance is what the tick's maintenance pass did (nil without Config.Maintain).
	Maintenance *maintain.Result `json:"maintenance,omitempty"`
	// Events is how many run events were published; EventsError why some were not.
	Events      int    `json:"events"`
	EventsError string `json:"events_error,omitempty"`
	// Joined is how many other pokes this poke served (see Poke); Coalesced is set on a poke that
	// joined a running one and so did nothing itself; HandedOver is how many pokes this one left
	// unserved to the next poke (its round failed, or its deadline was near).
	Joined     int  `json:"joined,omitempty"`
	Coalesced  bool `json:"coalesced,omitempty"`
	HandedOver int  `json:"handed_over,omitempty"`
}

// Tick runs one dispatcher tick: maintenance, fan-out, then waiting for the jobs due within the
// lookahead (promoting and fanning out again as each falls due).
func (d *Dispatcher) Tick(ctx context.Context) (Result, error) {
	res, err := d.tick(ctx)
	d.TestSignals.Ticked.Send(Done{Result: res, Err: err})
	return res, err
}

// tick is Tick's work.
func (d *Dispatcher) tick(ctx context.Context) (Result, error) {
	res := Result{Invoked: map[string]int{}}
	var errs []error
	var err error
	if res.Rescued, err = d.cfg.Queue.Rescue(ctx, d.cfg.Batch); err != nil {
		errs = append(errs, fmt.Errorf("rescue: %w", err))
	}
	if res.Promoted, err = d.cfg.Queue.Promote(ctx, d.cfg.Batch); err != nil {
		errs = append(errs, fmt.Errorf("promote: %w", err))
	}
	if d.cfg.Crawler != nil {
		if res.Swept, err = d.cfg.Crawler.Sweep(ctx); err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
		}
	}
	d.publish(ctx, &res) // after the sweep, so runs it finished have their events out this tick
	if res.Pruned, err = d.cfg.Queue.PruneWorkers(ctx, 10*d.cfg.Horizon); err != nil {
		errs = append(errs, fmt.Errorf("prune workers: %w", err))
	}
	started := map[string]int{} // workers started this tick, not yet heartbeating
	if err := d.fanOut(ctx, &res, started); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	if d.cfg.Maintain == nil {
		return res, d.wait(ctx, &res, started)
	}
	// The pass runs beside the wait, so delayed jobs still start on time, and ends before the
	// tick's deadline margin, so the tick returns (a Lambda is frozen after it does).
	mctx, cancel := ctx, context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		mctx, cancel = context.WithDeadline(ctx, dl.Add(-d.cfg.DeadlineMargin))
	}
	defer cancel()
	type pass struct {
		res maintain.Result
		err error
	}
	ch := make(chan pass, 1)
	go func() {
		r, err := d.cfg.Maintain.RunOnce(mctx, d.cfg.Maintain.Config().Clock.Now())
		ch <- pass{r, err}
	}()
	werr := d.wait(ctx, &res, started)
	p := <-ch
	if p.res.Ran {
		res.Maintenance = &p.res
	}
	return res, errors.Join(werr, p.err)
}

// publish runs Config.Events.
func (d *Dispatcher) publish(ctx context.Context, res *Result) {
	if d.cfg.Events != nil {
		n, err := d.cfg.Events(ctx)
		d.recordEvents(res, n, err)
	}
}

// recordEvents records a publish's answer in res: its failure is logged and kept in the result,
// never returned (the events wait in their outbox for the next tick).
func (d *Dispatcher) recordEvents(res *Result, published int, err error) {
	res.Events += published
	if err != nil {
		res.EventsError = err.Error()
		d.log.Error("dispatch: publish run events", "err", err)
	}
}

// wait sleeps until each delayed job due within the lookahead, then promotes and fans out.
func (d *Dispatcher) wait(ctx context.Context, res *Result, started map[string]int) error {
	if d.cfg.Lookahead < 0 {
		return nil
	}
	until := d.cfg.Clock.Now().Add(d.cfg.Lookahead)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-d.cfg.DeadlineMargin).Before(until) {
		until = dl.Add(-d.cfg.DeadlineMargin)
	}
	due, err := d.dueBefore(ctx, until)
	if err != nil {
		return err
	}
	for len(due) > 0 {
		next := due[0]
		for len(due) > 0 && !due[0].After(next.Add(200*time.Millisecond)) {
			due = due[1:] // one wake-up serves jobs due within 200ms of each other
			res.Waited++
		}
		t := time.NewTimer(next.Sub(d.cfg.Clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		n, err := d.cfg.Queue.Promote(ctx, d.cfg.Batch)
		if err != nil {
			return fmt.Errorf("promote: %w", err)
		}
		res.Promoted += n
		if err := d.fanOut(ctx, res, started); err != nil {
			return err
		}
	}
	return nil
}

// dueBefore lists the run times of delayed jobs due before until, soonest first.
//
// It reads through queue.List (newest first), so with very many delayed jobs it sees only the
// newest few thousand; older ones are promoted by the next tick's maintenance as usual.
func (d *Dispatcher) dueBefore(ctx context.Context, until time.Time) ([]time.Time, error) {
	queues := append(append([]string{}, d.cfg.LambdaQueues...), d.cfg.LongQueue)
	for _, f := range d.cfg.Fleets {
		queues = append(queues, f.Queue)
	}
	var out []time.Time
	now := d.cfg.Clock.Now()
	for _, q := range queues {
		jobs, err := d.cfg.Queue.List(ctx, queue.ListParams{Queue: q, States: []queue.State{queue.StateScheduled}, Limit: 2000})
		if err != nil {
			return nil, fmt.Errorf("list delayed jobs: %w", err)
		}
		for _, j := range jobs {
			if j.RunAt.Before(until) && j.RunAt.After(now.Add(-time.Second)) {
				out = append(out, j.RunAt)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out, nil
}

// fanOut starts the workers each queue's backlog calls for, within its cap.
func (d *Dispatcher) fanOut(ctx context.Context, res *Result, started map[string]int) error {
	stats, err := d.cfg.Queue.Stats(ctx)
	if err != nil {
		return fmt.Errorf("queue stats: %w", err)
	}
	live, err := d.cfg.Queue.LiveWorkers(ctx, "", d.cfg.Horizon)
	if err != nil {
		return fmt.Errorf("live workers: %w", err)
	}
	byQueue := map[string]queue.QueueStats{}
	for _, s := range stats {
		byQueue[s.Queue] = s
	}
	var errs []error
	for _, q := range d.cfg.LambdaQueues {
		n := d.want(byQueue[q], live[q], started[q], d.capFor(q))
		for i := 0; i < n; i++ {
			if err := d.invoke(ctx, q); err != nil {
				errs = append(errs, err)
				break
			}
			started[q]++
			res.Invoked[q]++
		}
	}
	if d.cfg.Launcher != nil {
		q := d.cfg.LongQueue
		if n := d.want(byQueue[q], live[q], started[q], d.cfg.LongMax); n > 0 {
			got, err := d.cfg.Launcher.Launch(ctx, n)
			started[q] += got
			res.Launched += got
			if err != nil {
				errs = append(errs, fmt.Errorf("launch runners: %w", err))
			}
		}
	}
	for _, f := range d.cfg.Fleets {
		tasks := withoutKind(live[f.Queue], LambdaKind) // burst Lambdas must not hold tasks back
		if n := d.want(byQueue[f.Queue], tasks, started[f.Queue], f.Max); n > 0 {
			got, err := f.Launcher.Launch(ctx, n)
			started[f.Queue] += got
			res.Launched += got
			if err != nil {
				errs = append(errs, fmt.Errorf("launch runners for %s: %w", f.Queue, err))
			}
		}
		if err := d.burst(ctx, res, f, byQueue[f.Queue], live[f.Queue], started); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LambdaKind is the kind worker Lambdas register as (queue.WorkerConfig.Kind), which tells them
// apart from a fleet's runner tasks.
const LambdaKind = "lambda"

// burst starts worker Lambdas on a fleet's queue for the part of its backlog that live tasks do
// not cover. Tasks launched but not yet heartbeating cover nothing yet: that is the gap a burst
// fills.
func (d *Dispatcher) burst(ctx context.Context, res *Result, f Fleet, s queue.QueueStats, live map[string]int, started map[string]int) error {
	if f.Burst == 0 || max64(s.Available, s.PastDue) == 0 {
		return nil
	}
	per := int64(d.cfg.JobsPerWorker)
	target := int((max64(s.Available, s.PastDue) + s.Running + per - 1) / per)
	tasks := 0
	for _, n := range withoutKind(live, LambdaKind) {
		tasks += n
	}
	key := f.Queue + "@" + LambdaKind // started map: Lambdas apart from the fleet's tasks
	running := max(live[LambdaKind], started[key])
	for range max0(min(f.Burst, target-tasks) - running) {
		if err := d.invoke(ctx, f.Queue); err != nil {
			return err
		}
		started[key]++
		res.Invoked[f.Queue]++
	}
	return nil
}

// withoutKind returns live (workers by kind) without kind.
func withoutKind(live map[string]int, kind string) map[string]int {
	out := make(map[string]int, len(live))
	for k, n := range live {
		if k != kind {
			out[k] = n
		}
	}
	return out
}

func (d *Dispatcher) capFor(q string) int {
	if n, ok := d.cfg.QueueMax[q]; ok {
		return n
	}
	return d.cfg.WorkerMax
}

// want is how many workers to start for a queue: enough for its waiting and running jobs at
// JobsPerWorker each, within max, minus those alive or started this tick.
func (d *Dispatcher) want(s queue.QueueStats, live map[string]int, started, max int) int {
	waiting := max64(s.Available, s.PastDue)
	if waiting == 0 {
		return 0
	}
	alive := 0
	for _, n := range live {
		alive += n
	}
	// Workers started this tick register a little later; count them until they show up.
	if alive < started {
		alive = started
	}
	per := int64(d.cfg.JobsPerWorker)
	target := int((waiting + s.Running + per - 1) / per)
	if target > max {
		target = max
	}
	return max0(target - alive)
}

func (d *Dispatcher) invoke(ctx context.Context, q string) error {
	payload, _ := json.Marshal(WorkerEvent{Queue: q})
	out, err := d.cfg.Invoker.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(d.cfg.WorkerFunction),
		InvocationType: types.InvocationTypeEvent,
		Payload:        payload,
	})
	if err != nil {
		return fmt.Errorf("invoke worker for queue %s: %w", q, err)
	}
	if out.StatusCode != 202 {
		return fmt.Errorf("invoke worker for queue %s: status %d", q, out.StatusCode)
	}
	return nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}
