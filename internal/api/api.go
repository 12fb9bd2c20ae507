// Package api owns crawlq's request/response API: the actions users call through
// `aws lambda invoke crawlq-api`, in Scrapyd's vocabulary and response shapes
// ({"status":"ok",...} or {"status":"error","message":...}). It validates every request
// strictly before touching anything (see Decode), schedules and cancels runs through the crawl
// package, keeps Scrapy projects, their versions and pushed specs through internal/spiderstore
// (listprojects, addversion, pushspider, ...), and keeps recurring runs as EventBridge Scheduler
// schedules whose target is the api function itself with a "schedule" payload. The Scrapyd HTTP
// API (internal/scrapyd) is a translation into the same requests (Run).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/events"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
	"crawlq/internal/view"
	"crawlq/spiders"
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
	// Poke, when set, is called with a run just scheduled (or redriven) so dispatch starts it
	// before its next tick and publishes its events (an async invoke of the dispatch function).
	// Its error is logged, not returned: the run is stored and the next tick starts it anyway.
	// Default none.
	Poke func(ctx context.Context, runID int64) error
	// OnRunChange, when set, is called with the run before answering a schedule, cancel or
	// redrive that changed it, so the run's events are published before the invocation returns
	// (lambdafn publishes them in it); a schedule that poked dispatch leaves them to the poke. It
	// cannot fail the request: the events are in the outbox already. Default none.
	OnRunChange func(ctx context.Context, runID int64)
	// WorkerHorizon is how recently a worker must have heartbeated to count as running in
	// daemonstatus. Default 2m.
	WorkerHorizon time.Duration
	// Store holds pushed spiders, uploaded projects and run records. Default a Postgres store on
	// the crawler's pool.
	Store *spiderstore.Store
	// NodeName is daemonstatus's node_name. Default "crawlq".
	NodeName string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock is what a schedule's "at" is bounded against (MaxDelay ahead). Default the wall
	// clock.
	Clock clock.Clock
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
	if cfg.NodeName == "" {
		cfg.NodeName = "crawlq"
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Store == nil {
		st, err := spiderstore.New(spiderstore.Config{Pool: cfg.Crawler.Pool()})
		if err != nil {
			return nil, err
		}
		cfg.Store = st
	}
	// The built-in specs are the first push: version 1 of every name the store never held.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := cfg.Store.Seed(ctx, spiders.FS); err != nil {
		// Not fatal: the built-in specs still resolve in-process, only without a version.
		cfg.Logger.Warn("api: push the built-in spiders to the store", "err", err)
	} else if n > 0 {
		cfg.Logger.Info("api: pushed the built-in spiders to the store", "spiders", n)
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
	return a.Run(ctx, req)
}

// Run answers one decoded (and validated) request, like Handle.
func (a *API) Run(ctx context.Context, req *Request) (resp Response) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("api: panic", "panic", r)
			resp = errResponse("internal error")
		}
	}()
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
		return a.listSpiders(ctx, r)
	case ActListProjects:
		return a.listProjects(ctx)
	case ActListVersions:
		return a.listVersions(ctx, r)
	case ActAddVersion:
		return a.addVersion(ctx, r)
	case ActDelVersion, ActDelProject:
		return a.delProject(ctx, r)
	case ActPushSpider:
		return a.pushSpider(ctx, r)
	case ActDelSpider:
		return a.delSpider(ctx, r)
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
	case ActListChanges:
		return a.listChanges(ctx, r)
	}
	return nil, badf("unknown action %q", clip(r.Action))
}

// knownSpider checks one name through the registry's cached resolve (no listing of every stored
// spider: schedule calls this each time); the names are listed only to say which exist.
func (a *API) knownSpider(name string) error {
	_, err := a.cfg.Spiders.Resolve(name, "")
	switch {
	case err == nil:
		return nil
	case errors.Is(err, spider.ErrUnusableSpider):
		return badf("%v", err)
	case !errors.Is(err, spider.ErrUnknownSpider):
		return err // the spider store failed, and the name is known nowhere else
	}
	names := a.cfg.Spiders.Names()
	return badf("unknown spider %q%s: known spiders are %v", clip(name), spider.Suggest(name, names...), names)
}

func (a *API) scheduleParams(ctx context.Context, r *Request) (crawl.ScheduleParams, error) {
	name, err := a.spiderName(ctx, r.Project, r.Spider, r.Version)
	if err != nil {
		return crawl.ScheduleParams{}, err
	}
	res, err := a.cfg.Spiders.Resolve(name, r.Version)
	if err != nil {
		return crawl.ScheduleParams{}, err
	}
	if err := runnable(res); err != nil {
		return crawl.ScheduleParams{}, err
	}
	if len(r.ScrapySettings) > 0 {
		if cmd := res.Command; cmd == nil || len(cmd.Command) < 2 || cmd.Command[1] != "crawl" {
			return crawl.ScheduleParams{}, badf("setting NAME=VALUE is for Scrapy spiders; %s is not one (use settings for crawlq settings)", clip(name))
		}
	}
	key := r.UniqueKey
	if key == "" && r.JobID != "" {
		key = "jobid:" + r.JobID // two schedules racing with one jobid make one run
	}
	p := crawl.ScheduleParams{Spider: name, Version: r.Version, Args: r.Args, IdempotencyKey: key, Replace: r.Replace}
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
		p.RunAt, _ = time.Parse(time.RFC3339, r.At) // its form validated by Decode
		if p.RunAt.Sub(a.cfg.Clock.Now()) > MaxDelay {
			return p, badf("at %s is more than %s ahead", r.At, MaxDelay)
		}
	}
	if res.Spider != nil {
		if _, err := spider.WithArgs(res.Spider, r.Args); err != nil {
			return p, badf("args: %v", err)
		}
	}
	return p, nil
}

func (a *API) schedule(ctx context.Context, r *Request) (Response, error) {
	p, err := a.scheduleParams(ctx, r)
	if err != nil {
		return nil, err
	}
	if r.JobID != "" {
		if id, err := a.cfg.Store.JobIDTaken(ctx, r.JobID); err != nil {
			return nil, err
		} else if id != 0 {
			return nil, userErrf("jobid %q is already used by run %d", r.JobID, id)
		}
	}
	s, err := a.cfg.Crawler.Schedule(ctx, p)
	if err != nil {
		if errors.Is(err, crawl.ErrInvalid) {
			return nil, badf("%v", err)
		}
		return nil, err
	}
	if !s.Duplicate {
		// The crawl recorded a pinned version with the run; without one, the run records the
		// version it starts with.
		project, _, _ := spiderstore.SplitName(p.Spider)
		rec := spiderstore.RunRecord{RunID: s.RunID, Project: project, Spider: p.Spider, Version: r.Version, JobID: r.JobID, Settings: r.ScrapySettings}
		if err := a.cfg.Store.RecordRun(ctx, rec); err != nil {
			// The run exists but lacks what the client asked for: cancel it rather than run it wrong.
			if cerr := a.cfg.Crawler.Cancel(ctx, s.RunID); cerr != nil {
				a.log.Error("api: cancel a run whose record failed", "run", s.RunID, "err", cerr)
			}
			if errors.Is(err, spiderstore.ErrExists) {
				return nil, userErrf("%v", err)
			}
			return nil, err
		}
	}
	// The poke's dispatch invocation publishes the run's events (Dispatcher.Poke), so the answer
	// does not wait for EventBridge: publishing in the request made a burst of 200 schedules
	// answer at p50 1.5 s instead of 1.0 s. Without a poke, or when it fails, the api publishes.
	poked := false
	if a.cfg.Poke != nil {
		if err := a.cfg.Poke(ctx, s.RunID); err != nil {
			a.log.Warn("api: poke dispatch", "err", err)
		} else {
			poked = true
		}
	}
	if !s.Duplicate && !poked {
		a.runChanged(ctx, s.RunID)
	}
	jobid := strconv.FormatInt(s.RunID, 10)
	if r.JobID != "" {
		jobid = r.JobID
	}
	return Response{"jobid": jobid, "run_id": s.RunID, "duplicate": s.Duplicate, "state": s.State,
		"run_at": s.RunAt.UTC().Format(time.RFC3339Nano)}, nil
}

func (a *API) getRun(ctx context.Context, id int64) (*crawl.Run, error) {
	run, err := a.cfg.Crawler.Get(ctx, id)
	if errors.Is(err, crawl.ErrRunNotFound) {
		return nil, userErrf("unknown job %d", id)
	}
	return run, err
}

// requestedRun resolves a request's job (a run id, or a client's jobid) to its run. A request
// that names a project gets only a run of that project: Scrapyd's cancel.json and status.json
// name both, and a job of another project answering would cancel what the client did not mean.
func (a *API) requestedRun(ctx context.Context, r *Request) (*crawl.Run, error) {
	if r.JobRef != "" {
		id, err := a.cfg.Store.JobIDTaken(ctx, r.JobRef)
		if err != nil {
			return nil, err
		}
		if id == 0 {
			return nil, userErrf("unknown job %q", clip(r.JobRef))
		}
		r.Job = id
	}
	run, err := a.getRun(ctx, r.Job)
	if err != nil {
		return nil, err
	}
	if r.Project != "" {
		if p := runProject(run); p != r.Project {
			return nil, userErrf("unknown job %d in project %q (its project is %q)", r.Job, clip(r.Project), p)
		}
	}
	return run, nil
}

// runProject is the project a run's spider belongs to: its Scrapy project, or DefaultProject for
// spec spiders.
func runProject(r *crawl.Run) string {
	if project, _, ok := spiderstore.SplitName(r.Spider); ok {
		return project
	}
	return spiderstore.DefaultProject
}

func (a *API) cancel(ctx context.Context, r *Request) (Response, error) {
	run, err := a.requestedRun(ctx, r)
	if err != nil {
		return nil, err
	}
	prev := scrapydState(run.State)
	if run.Finished() {
		return nil, userErrf("job %d already finished (%s)", r.Job, run.State)
	}
	// As Scrapyd: every cancel of a running command sends its signal again (the runner reads
	// this record); a second one makes Scrapy force its shutdown. Recorded first: the runner
	// reads the signal as soon as the cancel below reaches it.
	if _, err := a.cfg.Store.RequestCancel(ctx, r.Job, run.Spider, r.Signal); err != nil {
		return nil, err
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
	a.runChanged(ctx, r.Job)
	return Response{"prevstate": prev}, nil
}

// redrive retries the dead pages of a run that ended incomplete or failed, and reopens it.
func (a *API) redrive(ctx context.Context, r *Request) (Response, error) {
	run, err := a.requestedRun(ctx, r)
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
		if err := a.cfg.Poke(ctx, r.Job); err != nil {
			a.log.Warn("api: poke dispatch", "err", err)
		}
	}
	a.runChanged(ctx, r.Job)
	return Response{"prevstate": run.State, "pages": n, "currstate": "running"}, nil
}

// runChanged tells Config.OnRunChange that this request changed a run.
func (a *API) runChanged(ctx context.Context, runID int64) {
	if a.cfg.OnRunChange != nil {
		a.cfg.OnRunChange(ctx, runID)
	}
}

func (a *API) status(ctx context.Context, r *Request) (Response, error) {
	run, err := a.requestedRun(ctx, r)
	if err != nil {
		return nil, err
	}
	jobs, err := a.jobViews(ctx, []*crawl.Run{run})
	if err != nil {
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

// Job is a run as listjobs and status show it: the run as every output shows it (view.Run),
// with Scrapyd's fields over it.
type Job struct {
	view.Run
	// ID is the client's jobid when it chose one at schedule, else the run id (Scrapyd's id; the
	// run's own id is RunID).
	ID    string `json:"id"`
	RunID int64  `json:"run_id"`
	// Project is the run's Scrapy project, or "default" for spec spiders; Spider is the name
	// within it.
	Project string `json:"project"`
	Spider  string `json:"spider"`
	// Version is the spider or project version the run pinned or ran ("" before it started).
	Version string `json:"version,omitempty"`
	// PID is the run's command process (command spiders), once started.
	PID int `json:"pid,omitempty"`
	// LogURL and ItemsURL are paths on the Scrapyd HTTP API (as Scrapyd gives them).
	LogURL    string `json:"log_url"`
	ItemsURL  string `json:"items_url"`
	StartTime string `json:"start_time,omitempty"`
	EndTime   string `json:"end_time,omitempty"`
	Items     int64  `json:"items"`
	// Monitors is the verdict of a judged run (passed, failed, none or skipped; its Report has
	// the details); absent until judged.
	Monitors string `json:"monitors,omitempty"`
	// ScrapySettings are the Scrapy settings the run was scheduled with (Scrapyd's setting=...).
	ScrapySettings map[string]string `json:"scrapy_settings,omitempty"`
}

// jobFileURL is the path Scrapyd serves a job's log or items under, each element escaped (a
// project may hold spaces and quotes).
func jobFileURL(dir, project, spider, id, ext string) string {
	return "/" + dir + "/" + url.PathEscape(project) + "/" + url.PathEscape(spider) + "/" + url.PathEscape(id+ext)
}

func jobView(r *crawl.Run, rec spiderstore.RunRecord, rep *events.Report) Job {
	project, name, ok := spiderstore.SplitName(r.Spider)
	if !ok {
		project, name = spiderstore.DefaultProject, r.Spider
	}
	id := strconv.FormatInt(r.ID, 10)
	if rec.JobID != "" {
		id = rec.JobID
	}
	j := Job{Run: view.NewRun(r, rep), ID: id, RunID: r.ID, Project: project, Spider: name, Version: rec.Version, PID: rec.PID, ScrapySettings: rec.Settings,
		Items: r.Stats.Items, LogURL: jobFileURL("logs", project, name, id, ".log"), ItemsURL: jobFileURL("items", project, name, id, ".jl")}
	if j.Run.Report != nil { // the report of the run's last finish (view.NewRun), not a redriven run's earlier one
		j.Monitors = j.Run.Report.Monitors
	}
	if r.StartedAt != nil {
		j.StartTime = r.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	if r.FinishedAt != nil {
		j.EndTime = r.FinishedAt.UTC().Format(time.RFC3339Nano)
	}
	return j
}

// jobViews shows runs as jobs, with their records and reports.
func (a *API) jobViews(ctx context.Context, runs []*crawl.Run) ([]Job, error) {
	ids := make([]int64, len(runs))
	for i, run := range runs {
		ids[i] = run.ID
	}
	recs, err := a.cfg.Store.Runs(ctx, ids)
	if err != nil {
		return nil, err
	}
	reps, err := events.Reports(ctx, a.cfg.Queue.Pool(), ids)
	if err != nil {
		return nil, err
	}
	jobs := make([]Job, 0, len(runs))
	for _, run := range runs {
		jobs = append(jobs, jobView(run, recs[run.ID], reps[run.ID]))
	}
	return jobs, nil
}

func (a *API) listJobs(ctx context.Context, r *Request) (Response, error) {
	// Which crawlq spider names to list: one, a project's, or all ("").
	names := []string{""}
	filterDefault := false
	switch {
	case r.Spider != "":
		name, err := a.spiderName(ctx, r.Project, r.Spider, "")
		if err != nil {
			return nil, err
		}
		names = []string{name}
	case r.Project != "" && r.Project != spiderstore.DefaultProject:
		pv, err := a.cfg.Store.GetProjectVersion(ctx, r.Project, "")
		if errors.Is(err, spiderstore.ErrNotFound) {
			return nil, userErrf("unknown project %q", clip(r.Project))
		} else if err != nil {
			return nil, err
		}
		names = names[:0]
		for _, sp := range pv.Spiders {
			names = append(names, spiderstore.SpiderName(r.Project, sp))
		}
	case r.Project == spiderstore.DefaultProject:
		filterDefault = true
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
		var runs []*crawl.Run
		for _, name := range names {
			rs, err := a.cfg.Crawler.List(ctx, crawl.ListParams{Spider: name, States: g.states, Limit: limit})
			if err != nil {
				return nil, err
			}
			runs = append(runs, rs...)
		}
		slices.SortFunc(runs, func(x, y *crawl.Run) int { return int(y.ID - x.ID) })
		if len(runs) > limit {
			runs = runs[:limit]
		}
		if filterDefault {
			runs = slices.DeleteFunc(runs, func(run *crawl.Run) bool { _, _, ok := spiderstore.SplitName(run.Spider); return ok })
		}
		jobs, err := a.jobViews(ctx, runs)
		if err != nil {
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
	// Scrapyd's pending, running and finished count jobs, which are crawlq's runs: counted here
	// up to 1000 each (Scrapyd too keeps only so many finished jobs). The queue's own job counts
	// (a run has many page jobs) are jobs_pending and jobs_running.
	runs := map[string]int{}
	for key, states := range map[string][]string{"pending": {"pending"}, "running": {"running"}, "finished": {"succeeded", "failed", "cancelled"}} {
		rs, err := a.cfg.Crawler.List(ctx, crawl.ListParams{States: states, Limit: 1000})
		if err != nil {
			return nil, err
		}
		runs[key] = len(rs)
	}
	return Response{"pending": runs["pending"], "running": runs["running"], "finished": runs["finished"],
		"jobs_pending": pending, "jobs_running": running, "queues": view.QueuesStats(qs), "workers": workers,
		"workers_by_queue": live, "node_name": a.cfg.NodeName}, nil
}
