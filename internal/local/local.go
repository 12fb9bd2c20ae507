// Package local owns `crawlq local`: the four Lambda functions run in-process behind the Lambda
// Invoke REST API (POST /2015-03-31/functions/{name}/invocations, synchronous or
// X-Amz-Invocation-Type: Event), so `aws lambda invoke --endpoint-url http://127.0.0.1:3001`
// works as against AWS; a dispatch tick on a timer, as EventBridge's minute schedule would, and
// a poke of dispatch whenever another process changes a run (dispatch.Listen: the CLI's schedule,
// cancel-run, redrive and spider push send dispatch.Wake), so nothing a user does waits for the
// tick; runs with nothing left finished every second; recurring runs kept in Postgres
// (internal/cronstore) and fired on time, in place of EventBridge Scheduler; and the long-crawl
// tier as in-process runners in place of ECS tasks. Run events are published
// as in AWS: by the api and worker functions and the runner for the changes they make, at once,
// and by the dispatch tick for the rest. Beside it, on a port of its
// own, the Scrapyd-compatible HTTP API (ServeScrapyd).
package local

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"crawlq/internal/api"
	"crawlq/internal/backoff"
	"crawlq/internal/clock"
	"crawlq/internal/command"
	"crawlq/internal/crawl"
	"crawlq/internal/cronstore"
	"crawlq/internal/dispatch"
	"crawlq/internal/events"
	"crawlq/internal/lambdafn"
	"crawlq/internal/runner"
	"crawlq/internal/scrapyd"
)

// Request size limits of the Lambda Invoke API.
const (
	MaxSyncPayload  = 6 << 20
	MaxAsyncPayload = 256 << 10
)

// ErrFunctionNotFound is returned by Invoke for a name that is none of the four functions.
var ErrFunctionNotFound = errors.New("function not found")

// Config describes a local stack. Deps is required.
type Config struct {
	Deps *lambdafn.Deps
	// Prefix names the functions <Prefix>-api, -worker, -dispatch, -metrics. Default "crawlq".
	Prefix string
	// Tick is how often dispatch runs by itself. Default 1m; negative: never (pokes only).
	Tick time.Duration
	// NoWake turns off listening for wakes (dispatch.Wake) from other processes: a schedule,
	// cancel or redrive through the CLI then waits for the next Tick. Default false.
	NoWake bool
	// Sweep is how often runs with nothing left are finished (a cancelled run whose last page or
	// command stopped, a run whose last job died) and their events published, as the tick does.
	// Default 1s; negative: only at each Tick.
	Sweep time.Duration
	// NoCron leaves addschedule, listschedules and delschedule unconfigured instead of keeping
	// schedules in Postgres (cronstore) and firing them here. Default false. Ignored when
	// Deps.Config configures EventBridge Scheduler (APIFunctionARN and SchedulerRoleARN).
	NoCron bool
	// Timeouts of one invocation, as the Lambda functions' timeouts. Defaults: api 30s,
	// worker 5m, dispatch 60s, metrics 60s.
	APITimeout, WorkerTimeout, DispatchTimeout, MetricsTimeout time.Duration
	// Worker tunes the worker function. Zero Margin defaults to 5s here, IdleExit to 10s.
	Worker lambdafn.WorkerOptions
	// LongQueue is the long-crawl queue, worked by in-process runners. Default "long".
	LongQueue string
	// Runners is the concurrency of the in-process runner that works the long-crawl queue as an
	// always-on ECS task would: command and Scrapy spiders, and runtime: ecs crawls. Default 0:
	// long-queue runs are worked by worker invocations, which run no commands (start a
	// `crawlq runner` beside it, or set this).
	Runners int
	// CommandEnv are the variables of this process's environment the runner's commands see
	// (command.Config.Env). Default none.
	CommandEnv map[string]string
	// Metrics receives the metrics function's EMF lines. Default os.Stdout.
	Metrics io.Writer
	// Logger defaults to Deps.Logger.
	Logger *slog.Logger
	// Clock tells when delayed jobs and stored schedules are due. Default the wall clock.
	Clock clock.Clock
}

type handler func(ctx context.Context, payload []byte) ([]byte, error)

type function struct {
	h       handler
	timeout time.Duration
}

// Stack is the running local functions.
type Stack struct {
	api      *api.API
	dispatch *dispatch.Dispatcher
	runner   *runner.Runner
	cron     *cronstore.Store // nil when schedules are EventBridge Scheduler's
	cfg      Config
	log      *slog.Logger
	fns      map[string]function
	base     context.Context
	async    sync.WaitGroup
}

// DispatchSignals are the test signals of the stack's dispatcher (dispatch.TestSignals): a test
// Inits them before Serve and waits for the stack's ticks and pokes on them.
func (s *Stack) DispatchSignals() *dispatch.TestSignals { return &s.dispatch.TestSignals }

// New assembles the four functions. Nothing runs until Serve.
func New(cfg Config) (*Stack, error) {
	if cfg.Deps == nil {
		return nil, errors.New("local: Deps is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "crawlq"
	}
	for _, d := range []*time.Duration{&cfg.APITimeout, &cfg.WorkerTimeout, &cfg.DispatchTimeout, &cfg.MetricsTimeout} {
		if *d < 0 {
			return nil, errors.New("local: timeouts must not be negative")
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.Tick, time.Minute)
	def(&cfg.Sweep, time.Second)
	def(&cfg.APITimeout, 30*time.Second)
	def(&cfg.WorkerTimeout, 5*time.Minute)
	def(&cfg.DispatchTimeout, time.Minute)
	def(&cfg.MetricsTimeout, time.Minute)
	def(&cfg.Worker.Margin, 5*time.Second)
	if cfg.LongQueue == "" {
		cfg.LongQueue = "long"
	}
	if cfg.Metrics == nil {
		cfg.Metrics = os.Stdout
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = cfg.Deps.Logger
	}
	s := &Stack{cfg: cfg, log: cfg.Logger, base: context.Background()}
	inv := invoker{s}
	d := cfg.Deps

	ac := d.APIConfig(inv)
	ac.Logger = s.log
	if ac.Scheduler == nil && !cfg.NoCron {
		// No EventBridge Scheduler here: schedules are kept in Postgres and fired by Serve.
		st, err := cronstore.New(cronstore.Config{Pool: d.Pool, Logger: s.log, Clock: cfg.Clock})
		if err != nil {
			return nil, err
		}
		s.cron = st
		ac.Scheduler = st
		ac.TargetARN = "arn:crawlq:local:function:" + cfg.Prefix + "-api"
		ac.RoleARN = "arn:crawlq:local:role/scheduler"
	}
	a, err := api.New(ac)
	if err != nil {
		return nil, err
	}
	s.api = a
	dc, err := d.DispatchConfig(inv, launcher{s})
	if err != nil {
		return nil, err
	}
	dc.WorkerFunction = cfg.Prefix + "-worker"
	dc.LongQueue = cfg.LongQueue
	dc.Logger = s.log
	dp, err := dispatch.New(dc)
	if err != nil {
		return nil, err
	}
	s.dispatch = dp
	if cfg.Runners < 0 {
		return nil, errors.New("local: Runners must not be negative")
	}
	if cfg.Runners > 0 {
		// The runner publishes the events of the runs it starts and finishes at once (the
		// api and worker functions do the same for theirs); the dispatch tick publishes the rest.
		evs, err := events.NewLoop(events.LoopConfig{Publisher: d.Publisher, Logger: s.log})
		if err != nil {
			return nil, err
		}
		// A heartbeat a second: a cancelled command is stopped within about a second, not ten
		// (the runner learns of a cancel at its heartbeat); one small UPDATE a second here.
		r, err := runner.New(runner.Config{Pool: d.Pool, Queue: cfg.LongQueue, Concurrency: cfg.Runners, MaintainEvery: -1,
			HeartbeatInterval: time.Second,
			StopGrace:         10 * time.Second, Events: evs, Fetch: cfg.Worker.Fetch, ProxyEnv: cfg.Worker.ProxyEnv,
			Command: command.Config{Env: cfg.CommandEnv}, Logger: s.log})
		if err != nil {
			return nil, err
		}
		s.runner = r
	}
	worker := d.Worker(cfg.Worker)
	dispatchFn := lambdafn.Dispatch(dp)
	metrics := d.Metrics(cfg.Metrics, d.Config.MetricsNamespace)
	s.fns = map[string]function{
		cfg.Prefix + "-api": {timeout: cfg.APITimeout, h: func(ctx context.Context, p []byte) ([]byte, error) {
			return a.HandleJSON(ctx, p), nil
		}},
		cfg.Prefix + "-worker": {timeout: cfg.WorkerTimeout, h: func(ctx context.Context, p []byte) ([]byte, error) {
			var ev dispatch.WorkerEvent
			if err := json.Unmarshal(p, &ev); err != nil {
				return nil, fmt.Errorf("decode worker event: %w", err)
			}
			return marshal(worker(ctx, ev))
		}},
		cfg.Prefix + "-dispatch": {timeout: cfg.DispatchTimeout, h: func(ctx context.Context, p []byte) ([]byte, error) {
			return marshal(dispatchFn(ctx, p))
		}},
		cfg.Prefix + "-metrics": {timeout: cfg.MetricsTimeout, h: func(ctx context.Context, p []byte) ([]byte, error) {
			return marshal(metrics(ctx, p))
		}},
	}
	return s, nil
}

func marshal[T any](v T, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// SchedulesHere reports whether the stack keeps recurring runs in Postgres and fires them itself
// (no EventBridge Scheduler configured).
func (s *Stack) SchedulesHere() bool { return s.cron != nil }

// API returns the api function's API (for the Scrapyd HTTP API beside it).
func (s *Stack) API() *api.API { return s.api }

// ServeScrapyd serves the Scrapyd-compatible HTTP API (internal/scrapyd) on ln until ctx ends.
// cfg.API is filled in.
func (s *Stack) ServeScrapyd(ctx context.Context, ln net.Listener, cfg scrapyd.Config) error {
	cfg.API = s.api
	if cfg.Logger == nil {
		cfg.Logger = s.log
	}
	srv, err := scrapyd.New(cfg)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// Functions lists the function names the stack serves.
func (s *Stack) Functions() []string {
	p := s.cfg.Prefix
	return []string{p + "-api", p + "-worker", p + "-dispatch", p + "-metrics"}
}

// resolve maps a function name, partial or full ARN (with or without a qualifier) to a name.
func (s *Stack) resolve(name string) (function, string, bool) {
	if i := strings.LastIndex(name, ":function:"); i >= 0 {
		name = name[i+len(":function:"):]
	}
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i] // qualifier ($LATEST, a version or alias): there is only one version here
	}
	f, ok := s.fns[name]
	return f, name, ok
}

// Invoke runs a function synchronously, with its timeout.
func (s *Stack) Invoke(ctx context.Context, name string, payload []byte) ([]byte, error) {
	f, _, ok := s.resolve(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrFunctionNotFound, name)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	return f.h(ctx, payload)
}

// InvokeAsync starts a function in the background (InvocationType Event), on the stack's own
// context so it outlives the request, and returns at once.
func (s *Stack) InvokeAsync(name string, payload []byte) error {
	f, fname, ok := s.resolve(name)
	if !ok {
		return fmt.Errorf("%w: %s", ErrFunctionNotFound, name)
	}
	if s.base.Err() != nil {
		return errors.New("local stack is shutting down")
	}
	p := append([]byte(nil), payload...)
	s.async.Add(1)
	go func() {
		defer s.async.Done()
		ctx, cancel := context.WithTimeout(s.base, f.timeout)
		defer cancel()
		if _, err := f.h(ctx, p); err != nil && s.base.Err() == nil {
			s.log.Error("local: async invocation failed", "function", fname, "err", err)
		}
	}()
	return nil
}

// Handler returns the Lambda Invoke API as an http.Handler.
func (s *Stack) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2015-03-31/functions/{name}/invocations", s.serveInvoke)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		awsError(w, http.StatusNotFound, "UnknownOperationException", "crawlq local serves only POST /2015-03-31/functions/{name}/invocations")
	})
	return mux
}

func awsError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
}

func (s *Stack) serveInvoke(w http.ResponseWriter, r *http.Request) {
	name, err := url.PathUnescape(r.PathValue("name"))
	if err != nil {
		awsError(w, http.StatusBadRequest, "InvalidParameterValueException", "bad function name")
		return
	}
	if _, _, ok := s.resolve(name); !ok {
		awsError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
		return
	}
	typ := r.Header.Get("X-Amz-Invocation-Type")
	limit := int64(MaxSyncPayload)
	if typ == "Event" {
		limit = MaxAsyncPayload
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		awsError(w, http.StatusBadRequest, "InvalidRequestContentException", "read payload: "+err.Error())
		return
	}
	if int64(len(body)) > limit {
		awsError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException", fmt.Sprintf("payload larger than %d bytes", limit))
		return
	}
	body = payload(body)
	switch typ {
	case "", "RequestResponse":
		out, err := s.Invoke(r.Context(), name, body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amz-Executed-Version", "$LATEST")
		if err != nil {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			out, _ = json.Marshal(map[string]string{"errorMessage": err.Error(), "errorType": "Error"})
		}
		w.WriteHeader(http.StatusOK)
		w.Write(out)
	case "Event":
		if err := s.InvokeAsync(name, body); err != nil {
			awsError(w, http.StatusServiceUnavailable, "ServiceException", err.Error())
			return
		}
		w.WriteHeader(http.StatusAccepted)
	case "DryRun":
		w.WriteHeader(http.StatusNoContent)
	default:
		awsError(w, http.StatusBadRequest, "InvalidParameterValueException", "X-Amz-Invocation-Type must be RequestResponse, Event or DryRun")
	}
}

// payload accepts what both AWS CLI generations send: the JSON as given (v1, or v2 with
// --cli-binary-format raw-in-base64-out), or that JSON base64-encoded once more by a client
// that encoded an already-encoded blob. Anything else is passed on unchanged, for the function
// to reject.
func payload(b []byte) []byte {
	if json.Valid(b) {
		return b
	}
	s := strings.TrimSpace(string(b))
	if dec, err := base64.StdEncoding.DecodeString(s); err == nil && json.Valid(dec) {
		return dec
	}
	return b
}

// Serve serves the Invoke API on ln and ticks dispatch until ctx ends, then waits for
// background invocations to finish (each is bounded by its timeout).
func (s *Stack) Serve(ctx context.Context, ln net.Listener) error {
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	s.base = base
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	runnerDone := make(chan struct{})
	go func() {
		defer close(runnerDone)
		if s.runner == nil {
			return
		}
		if reason, err := s.runner.Run(ctx); err != nil {
			s.log.Error("local: runner", "reason", reason, "err", err)
		}
	}()
	wakeDone := make(chan struct{})
	go func() {
		defer close(wakeDone)
		if s.cfg.NoWake {
			return
		}
		// A schedule, cancel, redrive or push made by another process (the CLI) is acted on at
		// once, not at the next tick; Listen logs its connection losses and reconnects.
		_ = dispatch.Listen(ctx, dispatch.ListenConfig{Pool: s.cfg.Deps.Pool, Logger: s.log, OnWake: s.wake})
	}()
	loopsDone := make(chan struct{}, 3)
	go func() {
		defer func() { loopsDone <- struct{}{} }()
		s.sweepLoop(ctx)
	}()
	go func() {
		defer func() { loopsDone <- struct{}{} }()
		s.dueLoop(ctx)
	}()
	go func() {
		defer func() { loopsDone <- struct{}{} }()
		s.cronLoop(ctx)
	}()
	tickDone := make(chan struct{})
	go func() {
		defer close(tickDone)
		if s.cfg.Tick < 0 {
			return
		}
		for {
			if _, err := s.Invoke(ctx, s.cfg.Prefix+"-dispatch", []byte(`{"source":"schedule"}`)); err != nil && ctx.Err() == nil {
				s.log.Error("local: dispatch tick", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.cfg.Tick):
			}
		}
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	<-tickDone
	<-wakeDone
	<-loopsDone
	<-loopsDone
	<-loopsDone
	<-runnerDone
	// Background workers stop claiming and release their jobs when their context ends.
	cancelBase()
	s.async.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// wake pokes dispatch for runIDs, as the api does after a schedule: asynchronously, since a poke
// also waits for the jobs due within its lookahead, and the next wake must not wait behind it.
func (s *Stack) wake(ctx context.Context, runIDs []int64) {
	// A wake may follow a push (crawlq spider push): the api's next schedule uses what was pushed.
	s.cfg.Deps.Spiders.Forget()
	s.poke(ctx, runIDs)
}

// poke invokes dispatch for runIDs (none: whatever is due), asynchronously.
func (s *Stack) poke(_ context.Context, runIDs []int64) {
	payload, _ := json.Marshal(struct {
		Source string  `json:"source"`
		Runs   []int64 `json:"runs,omitempty"`
	}{dispatch.PokeSource, runIDs})
	if err := s.InvokeAsync(s.cfg.Prefix+"-dispatch", payload); err != nil {
		s.log.Warn("local: poke dispatch after a wake; the next tick acts instead", "runs", runIDs, "err", err)
	}
}

// sweepLoop finishes runs with nothing left every Sweep and publishes their events, so a
// cancelled run shows cancelled as soon as its last page or command stopped, not at the next tick.
func (s *Stack) sweepLoop(ctx context.Context) {
	if s.cfg.Sweep < 0 {
		return
	}
	d := s.cfg.Deps
	for backoff.Sleep(ctx, s.cfg.Sweep) {
		n, err := d.Control.Crawler.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("local: sweep; the next one retries", "err", err)
		}
		if n > 0 && d.Publisher != nil {
			if _, err := d.Publisher.Drain(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("local: publish the events of swept runs; the next tick retries", "err", err)
			}
		}
	}
}

// dueLoop wakes dispatch when the soonest delayed job comes due (a run scheduled with a delay, a
// page put back for its host's pause or its retry's backoff), so it starts then, not at the next
// tick: the workers dispatch starts leave once idle, as Lambda workers do. It looks again at
// least every dueLook, and pokes at most once per dueLook.
func (s *Stack) dueLoop(ctx context.Context) {
	if s.cfg.Tick < 0 || s.cfg.NoWake {
		return
	}
	q := s.cfg.Deps.Control.Queue
	for {
		wait := dueLook
		at, ok, err := q.NextScheduled(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("local: find the next delayed job; looking again shortly", "err", err)
		case ok:
			wait = min(max(at.Sub(s.cfg.Clock.Now()), 0), dueLook)
		}
		if ok && wait <= 0 {
			s.poke(ctx, nil) // not wake: nothing was pushed, the spiders' cache stays
			wait = dueLook   // what the poke promoted is no longer scheduled; the next one is later
		}
		if !backoff.Sleep(ctx, wait) && ctx.Err() != nil {
			return
		}
	}
}

// dueLook bounds dueLoop's wait between looks, and so how often it pokes.
const dueLook = time.Second

// cronLoop fires the stored schedules on time until ctx ends: at each schedule's tick, or
// within a second of a schedule added by another process.
func (s *Stack) cronLoop(ctx context.Context) {
	if s.cron == nil {
		return
	}
	for {
		n, err := s.cron.FireDue(ctx, cronBatch, s.fireSchedule)
		if err != nil && ctx.Err() == nil {
			s.log.Error("local: fire schedules; retrying in a second", "err", err)
		}
		next, ok, nerr := s.cron.NextDue(ctx)
		if !backoff.Sleep(ctx, cronWait(s.cfg.Clock.Now(), next, ok && nerr == nil, err == nil && n == cronBatch)) && ctx.Err() != nil {
			return
		}
	}
}

// cronBatch is how many ticks one FireDue fires at the most.
const cronBatch = 100

// cronWait is how long cronLoop sleeps before it fires again: until the soonest tick (next,
// when known), at most a second; not at all when the last FireDue fired a full batch (more may
// be due). A tick already due that FireDue left (another process holds it while it fires it,
// or FireDue failed) is looked at again in a second, not at once: that would spin on the
// database until the other process commits.
func cronWait(now, next time.Time, known, fullBatch bool) time.Duration {
	if fullBatch {
		return 0
	}
	wait := time.Second
	if d := next.Sub(now); known && d > 0 {
		wait = min(wait, d)
	}
	return wait
}

// fireSchedule fires one tick of a schedule as EventBridge Scheduler would: the api's schedule
// action with the schedule's payload. The run is keyed by its schedule and tick (unless the
// payload has a key of its own), so a tick fired again after a crash between the run's commit
// and the tick's finds its run instead of starting a second one.
func (s *Stack) fireSchedule(ctx context.Context, e cronstore.Entry, tick time.Time) (string, error) {
	var p map[string]any
	if err := json.Unmarshal([]byte(e.Input), &p); err != nil || p == nil {
		return "", fmt.Errorf("schedule %s: its payload is not a JSON object: %v", e.Name, err)
	}
	if _, ok := p["unique_key"]; !ok {
		key := fmt.Sprintf("cron:%s:%d", e.Name, tick.UnixMilli())
		spider, _ := p["spider"].(string)
		runs, err := s.cfg.Deps.Control.Crawler.List(ctx, crawl.ListParams{Spider: spider, Limit: 50})
		if err != nil {
			return "", err
		}
		for _, r := range runs {
			if r.IdempotencyKey == key {
				return strconv.FormatInt(r.ID, 10), nil
			}
		}
		p["unique_key"] = key
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	resp := s.api.Handle(ctx, payload)
	if resp["status"] != "ok" {
		return "", fmt.Errorf("schedule %s: %v", e.Name, resp["message"])
	}
	return fmt.Sprint(resp["jobid"]), nil
}

// invoker is dispatch's and the api's Lambda client under `crawlq local`: it calls the
// in-process functions.
type invoker struct{ s *Stack }

func (i invoker) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	name := aws.ToString(in.FunctionName)
	if in.InvocationType == types.InvocationTypeEvent {
		if err := i.s.InvokeAsync(name, in.Payload); err != nil {
			return nil, err
		}
		return &lambda.InvokeOutput{StatusCode: http.StatusAccepted}, nil
	}
	out, err := i.s.Invoke(ctx, name, in.Payload)
	if err != nil {
		return &lambda.InvokeOutput{StatusCode: http.StatusOK, FunctionError: aws.String("Unhandled"), Payload: []byte(err.Error())}, nil
	}
	return &lambda.InvokeOutput{StatusCode: http.StatusOK, Payload: out}, nil
}

// launcher runs the long-crawl tier in-process: each "task" is a worker invocation on the long
// queue, which stops when idle or at its timeout, as a runner task would be recycled.
type launcher struct{ s *Stack }

func (l launcher) Launch(ctx context.Context, n int) (int, error) {
	if l.s.runner != nil {
		return 0, nil // the always-on in-process runner takes the long queue's jobs
	}
	ev, _ := json.Marshal(dispatch.WorkerEvent{Queue: l.s.cfg.LongQueue})
	for i := 0; i < n; i++ {
		if err := l.s.InvokeAsync(l.s.cfg.Prefix+"-worker", ev); err != nil {
			return i, err
		}
	}
	return n, nil
}
