// Package api owns crawlq's request/response API: the actions users call through
// `aws lambda invoke crawlq-api`, in Scrapyd's vocabulary and response shapes
// ({"status":"ok",...} or {"status":"error","message":...}). It validates every request
// strictly before touching anything (see Decode), schedules and cancels runs through the crawl
// package, and keeps recurring runs as EventBridge Scheduler schedules whose target is the api
// function itself with a "schedule" payload.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// Config wires an API. Crawler, Queue and Spiders are required.
type Config struct {
	Crawler *crawl.Crawler
	Queue   *queue.Client
	Spiders *spider.Registry
	// Scheduler stores recurring runs. Nil makes addschedule/listschedules/delschedule answer
	// an error saying schedules are not configured.
	Scheduler Scheduler
	// ScheduleGroup is the EventBridge Scheduler group of recurring runs. Default "crawlq".
	ScheduleGroup string
	// TargetARN is the api function's ARN, the target of every schedule. Required with Scheduler.
	TargetARN string
	// RoleARN is the role EventBridge Scheduler assumes to invoke the target. Required with Scheduler.
	RoleARN string
	// Poke, when set, is called after a run is scheduled so dispatch starts it before its next
	// tick (an async invoke of the dispatch function). Its error is logged, not returned: the
	// run is stored and the next tick starts it anyway. Default none.
	Poke func(ctx context.Context) error
	// WorkerHorizon is how recently a worker must have heartbeated to count as running in
	// daemonstatus. Default 2m.
	WorkerHorizon time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Crawler == nil:
		return errors.New("api: Crawler is required")
	case c.Queue == nil:
		return errors.New("api: Queue is required")
	case c.Spiders == nil:
		return errors.New("api: Spiders is required")
	case c.Scheduler != nil && c.TargetARN == "":
		return errors.New("api: TargetARN is required with a Scheduler")
	case c.Scheduler != nil && c.RoleARN == "":
		return errors.New("api: RoleARN is required with a Scheduler")
	case c.WorkerHorizon < 0:
		return errors.New("api: WorkerHorizon must not be negative")
	}
	return nil
}

// API answers requests.
type API struct {
	cfg Config
	log *slog.Logger
}

// New returns an API.
func New(cfg Config) (*API, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.ScheduleGroup == "" {
		cfg.ScheduleGroup = "crawlq"
	}
	if cfg.WorkerHorizon == 0 {
		cfg.WorkerHorizon = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &API{cfg: cfg, log: cfg.Logger}, nil
}

// Response is one answer: Status "ok" with the action's fields, or "error" with Message.
type Response map[string]any

// Handle answers one request payload. It never returns a Go error: a bad request, an unknown
// run or a failing dependency all become {"status":"error","message":...}.
func (a *API) Handle(ctx context.Context, payload []byte) (resp Response) {
	defer func() {
		// Nothing below should panic; if something does, the caller still gets an answer.
		if r := recover(); r != nil {
			a.log.Error("api: panic", "panic", r)
			resp = errResponse("internal error")
		}
	}()
	req, err := Decode(payload)
	if err != nil {
		return errResponse(err.Error())
	}
	out, err := a.Do(ctx, req)
	if err != nil {
		var ue *userError
		if errors.As(err, &ue) || errors.Is(err, ErrBadRequest) {
			return errResponse(err.Error())
		}
		a.log.Error("api: action failed", "action", req.Action, "err", err)
		return errResponse(fmt.Sprintf("%s failed: %v", req.Action, err))
	}
	out["status"] = "ok"
	return out
}

// HandleJSON is Handle returning the encoded response.
func (a *API) HandleJSON(ctx context.Context, payload []byte) []byte {
	b, err := json.Marshal(a.Handle(ctx, payload))
	if err != nil {
		b, _ = json.Marshal(errResponse("encode response: " + err.Error()))
	}
	return b
}

func errResponse(msg string) Response { return Response{"status": "error", "message": msg} }

// userError is a failure the caller caused (an unknown job, a finished run): it is reported as
// is rather than logged as ours.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

func userErrf(format string, a ...any) error { return &userError{fmt.Sprintf(format, a...)} }

// Do runs a decoded request.
func (a *API) Do(ctx context.Context, r *Request) (Response, error) {
	switch r.Action {
	case ActSchedule:
		return a.schedule(ctx, r)
	case ActCancel:
		return a.cancel(ctx, r)
	case ActStatus:
		return a.status(ctx, r)
	case ActListJobs:
		return a.listJobs(ctx, r)
	case ActListSpiders:
		return Response{"spiders": a.cfg.Spiders.Names()}, nil
	case ActDaemonStatus:
		return a.daemonStatus(ctx)
	case ActAddSchedule:
		return a.addSchedule(ctx, r)
	case ActListSchedules:
		return a.listSchedules(ctx)
	case ActDelSchedule:
		return a.delSchedule(ctx, r)
	case ActRedrive:
		return a.redrive(ctx, r)
	}
	return nil, badf("unknown action %q", clip(r.Action))
}

func (a *API) knownSpider(name string) error {
	if slices.Contains(a.cfg.Spiders.Names(), name) {
		return nil
	}
	return badf("unknown spider %q: known spiders are %v", clip(name), a.cfg.Spiders.Names())
}

func (a *API) scheduleParams(r *Request) (crawl.ScheduleParams, error) {
	if err := a.knownSpider(r.Spider); err != nil {
		return crawl.ScheduleParams{}, err
	}
	p := crawl.ScheduleParams{Spider: r.Spider, Args: r.Args, IdempotencyKey: r.UniqueKey, Replace: r.Replace}
	if r.Settings != nil {
		p.Settings = *r.Settings
	}
	if r.Priority != nil {
		p.Priority = *r.Priority
	}
	if r.DelaySeconds != nil {
		p.Delay = time.Duration(*r.DelaySeconds * float64(time.Second))
	}
	if r.At != "" {
		p.RunAt, _ = time.Parse(time.RFC3339, r.At) // validated by Decode
	}
	if sp, err := a.cfg.Spiders.Lookup(r.Spider); err == nil {
		if _, err := spider.WithArgs(sp, r.Args); err != nil {
			return p, badf("args: %v", err)
		}
	}
	return p, nil
}

func (a *API) schedule(ctx context.Context, r *Request) (Response, error) {
	p, err := a.scheduleParams(r)
	if err != nil {
		return nil, err
	}
	s, err := a.cfg.Crawler.Schedule(ctx, p)
	if err != nil {
		if errors.Is(err, crawl.ErrInvalid) {
			return nil, badf("%v", err)
		}
		return nil, err
	}
	if a.cfg.Poke != nil {
		if err := a.cfg.Poke(ctx); err != nil {
			a.log.Warn("api: poke dispatch", "err", err)
		}
	}
	return Response{"jobid": strconv.FormatInt(s.RunID, 10), "duplicate": s.Duplicate, "state": s.State,
		"run_at": s.RunAt.UTC().Format(time.RFC3339Nano)}, nil
}

func (a *API) getRun(ctx context.Context, id int64) (*crawl.Run, error) {
	run, err := a.cfg.Crawler.Get(ctx, id)
	if errors.Is(err, crawl.ErrRunNotFound) {
		return nil, userErrf("unknown job %d", id)
	}
	return run, err
}

func (a *API) cancel(ctx context.Context, r *Request) (Response, error) {
	run, err := a.getRun(ctx, r.Job)
	if err != nil {
		return nil, err
	}
	prev := scrapydState(run.State)
	if run.Finished() {
		return nil, userErrf("job %d already finished (%s)", r.Job, run.State)
	}
	err = a.cfg.Crawler.Cancel(ctx, r.Job)
	switch {
	case errors.Is(err, crawl.ErrRunFinished):
		return nil, userErrf("job %d already finished", r.Job)
	case errors.Is(err, crawl.ErrRunNotFound):
		return nil, userErrf("unknown job %d", r.Job)
	case err != nil:
		return nil, err
	}
	return Response{"prevstate": prev}, nil
}

// redrive retries the dead pages of a run that ended incomplete or failed, and reopens it.
func (a *API) redrive(ctx context.Context, r *Request) (Response, error) {
	run, err := a.getRun(ctx, r.Job)
	if err != nil {
		return nil, err
	}
	n, err := a.cfg.Crawler.Redrive(ctx, r.Job)
	switch {
	case errors.Is(err, crawl.ErrRunLive), errors.Is(err, crawl.ErrNothingToRedrive):
		return nil, userErrf("job %d (%s): %v", r.Job, run.State, err)
	case err != nil:
		return nil, err
	}
	if a.cfg.Poke != nil {
		if err := a.cfg.Poke(ctx); err != nil {
			a.log.Warn("api: poke dispatch", "err", err)
		}
	}
	return Response{"prevstate": run.State, "pages": n, "currstate": "running"}, nil
}

func (a *API) status(ctx context.Context, r *Request) (Response, error) {
	run, err := a.getRun(ctx, r.Job)
	if err != nil {
		return nil, err
	}
	jobs := []Job{jobView(run)}
	if err := a.addReports(ctx, jobs); err != nil {
		return nil, err
	}
	return Response{"currstate": scrapydState(run.State), "job": jobs[0]}, nil
}

// scrapydState maps a run state to Scrapyd's pending/running/finished.
func scrapydState(s string) string {
	switch s {
	case "pending", "running":
		return s
	}
	return "finished"
}

// Job is a run as listjobs and status show it: Scrapyd's fields plus crawlq's.
type Job struct {
	ID        string      `json:"id"`
	Spider    string      `json:"spider"`
	State     string      `json:"state"`
	Args      any         `json:"args"`
	Priority  int         `json:"priority"`
	Queue     string      `json:"queue"`
	RunAt     string      `json:"run_at"`
	StartTime string      `json:"start_time,omitempty"`
	EndTime   string      `json:"end_time,omitempty"`
	Error     string      `json:"error,omitempty"`
	Stats     crawl.Stats `json:"stats"`
	Items     int64       `json:"items"`
	// Outcome is how a finished run ended (succeeded, incomplete, failed, cancelled, or
	// monitors_failed once judged); empty while it is pending or running. State keeps Scrapyd's
	// vocabulary in listjobs' groups.
	Outcome     string             `json:"outcome,omitempty"`
	DeadPages   int64              `json:"dead_pages"`
	FailedPages []crawl.FailedPage `json:"failed_pages"`
	// Monitors and report of a judged run (reports.go); absent until judged.
	*JobReport
}

func jobView(r *crawl.Run) Job {
	j := Job{ID: strconv.FormatInt(r.ID, 10), Spider: r.Spider, State: r.State, Args: r.Args, Priority: r.Priority,
		Queue: r.Queue, RunAt: r.RunAt.UTC().Format(time.RFC3339Nano), Error: r.Error, Stats: r.Stats, Items: r.Stats.Items,
		DeadPages: r.DeadPages, FailedPages: r.FailedPages}
	if r.Finished() {
		j.Outcome = r.State
	}
	if j.FailedPages == nil {
		j.FailedPages = []crawl.FailedPage{}
	}
	if r.StartedAt != nil {
		j.StartTime = r.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	if r.FinishedAt != nil {
		j.EndTime = r.FinishedAt.UTC().Format(time.RFC3339Nano)
	}
	return j
}

func (a *API) listJobs(ctx context.Context, r *Request) (Response, error) {
	if r.Spider != "" {
		if err := a.knownSpider(r.Spider); err != nil {
			return nil, err
		}
	}
	limit := r.Limit
	if limit == 0 {
		limit = 100
	}
	out := Response{}
	for _, g := range []struct {
		key    string
		states []string
	}{{"pending", []string{"pending"}}, {"running", []string{"running"}}, {"finished", crawl.FinishedStates}} {
		runs, err := a.cfg.Crawler.List(ctx, crawl.ListParams{Spider: r.Spider, States: g.states, Limit: limit})
		if err != nil {
			return nil, err
		}
		jobs := make([]Job, 0, len(runs))
		for _, run := range runs {
			jobs = append(jobs, jobView(run))
		}
		if err := a.addReports(ctx, jobs); err != nil {
			return nil, err
		}
		out[g.key] = jobs
	}
	return out, nil
}

func (a *API) daemonStatus(ctx context.Context) (Response, error) {
	qs, err := a.cfg.Queue.Stats(ctx)
	if err != nil {
		return nil, err
	}
	live, err := a.cfg.Queue.LiveWorkers(ctx, "", a.cfg.WorkerHorizon)
	if err != nil {
		return nil, err
	}
	var pending, running int64
	for _, q := range qs {
		pending += q.Available + q.Scheduled
		running += q.Running
	}
	workers := 0
	for _, kinds := range live {
		for _, n := range kinds {
			workers += n
		}
	}
	if qs == nil {
		qs = []queue.QueueStats{}
	}
	return Response{"pending": pending, "running": running, "queues": qs, "workers": workers,
		"workers_by_queue": live, "node_name": "crawlq"}, nil
}
