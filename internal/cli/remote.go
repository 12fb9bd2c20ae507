package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"crawlq/internal/crawl"
	"crawlq/internal/envconfig"
	"crawlq/internal/spiderstore"
	"crawlq/internal/view"
)

// The commands `crawlq --api FUNCTION` (or $CRAWLQ_API) sends through the api Lambda function
// instead of opening the database: an operator on a laptop needs the AWS credentials that may
// invoke the function, not a route to the database. Each one reads the flags its command declared
// (the same flag set, so --help and the flags stay one), and refuses the flags it cannot honour
// through the api rather than ignoring them.

const apiHelp = `With --api FUNCTION before the command (or $CRAWLQ_API), these commands go through the api
Lambda function (lambda Invoke, with the caller's AWS credentials, region and AWS_ENDPOINT_URL)
instead of the database: ` + "runs, run (--wait, --watch), schedule, cancel-run, redrive --run, spider push."

// apiCommandHelp ends the --help of each command in remoteCmds.
const apiCommandHelp = `Through the api function: crawlq --api FUNCTION (or $CRAWLQ_API) sends this command to the
api Lambda function with your AWS credentials (AWS_ENDPOINT_URL: crawlq local or an emulator)
instead of opening the database; flags it cannot honour are refused.`

// remoteCmds are the commands that work through the api function.
var remoteCmds = map[string]func(ctx context.Context, c *apiClient, env *Env, fs *flag.FlagSet, pos []string) error{
	"runs":        remoteRuns,
	"run":         remoteRun,
	"schedule":    remoteSchedule,
	"cancel-run":  remoteCancel,
	"redrive":     remoteRedrive,
	"spider push": remoteSpiderPush,
}

// takeAPIFlag removes a leading --api FUNCTION (or --api=FUNCTION) from args and keeps it in env.
func takeAPIFlag(args []string, env *Env) ([]string, error) {
	if len(args) == 0 {
		return args, nil
	}
	a := args[0]
	switch {
	case a == "--api" || a == "-api":
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			return nil, usageErr("--api needs the api function's name or ARN (e.g. crawlq --api crawlq-api runs)")
		}
		env.API, args = args[1], args[2:]
	case strings.HasPrefix(a, "--api=") || strings.HasPrefix(a, "-api="):
		env.API, args = a[strings.Index(a, "=")+1:], args[1:]
		if env.API == "" {
			return nil, usageErr("--api= needs the api function's name or ARN")
		}
	}
	return args, nil
}

// viaAPI makes inv go through the api function when --api or $CRAWLQ_API names one. --api with a
// command that cannot is a usage error; $CRAWLQ_API leaves such commands on the database (it
// names where the remote commands go, as AWS_REGION does for the SDK), as does an explicit
// --database-url.
func viaAPI(inv *invocation, env *Env) error {
	fn, source, explicit := env.API, "--api", env.API != ""
	if fn == "" {
		fn, source = envconfig.New(env.Getenv).String("CRAWLQ_API"), "CRAWLQ_API"
	}
	if fn == "" {
		return nil
	}
	do, ok := remoteCmds[inv.name]
	if !ok {
		if explicit {
			names := make([]string, 0, len(remoteCmds))
			for n := range remoteCmds {
				names = append(names, n)
			}
			sort.Strings(names)
			return usageErr("--api: crawlq %s works on the database only; through the api function: %s", inv.name, strings.Join(names, ", "))
		}
		return nil
	}
	if set(inv.fs, "database-url") {
		if explicit {
			return usageErr("--api and --database-url: choose one")
		}
		return nil
	}
	re, err := readRemoteEnv(env, fn, source)
	if err != nil {
		return err
	}
	inv.remote = true
	inv.run = func(ctx context.Context, pos []string) error {
		c, err := newAPIClient(ctx, re)
		if err != nil {
			return err
		}
		return do(ctx, c, env, inv.fs, pos)
	}
	return nil
}

// set reports whether the flag was given on the command line.
func set(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// refuse is the usage error for flags given that the api cannot honour.
func refuse(fs *flag.FlagSet, why string, names ...string) error {
	for _, n := range names {
		if set(fs, n) {
			return usageErr("--%s does not work through --api: %s", n, why)
		}
	}
	return nil
}

func flagString(fs *flag.FlagSet, name string) string { return fs.Lookup(name).Value.String() }

func flagBool(fs *flag.FlagSet, name string) bool { return fs.Lookup(name).Value.String() == "true" }

// apiClient invokes the api function.
type apiClient struct {
	fn string
	lc *lambda.Client
}

// newAPIClient loads the caller's AWS configuration as the SDK does (environment, shared files,
// SSO, instance role), with the variables crawlq documents as re read them, so the region
// defaults to us-east-1 and AWS_ENDPOINT_URL may name crawlq local or an emulator.
func newAPIClient(ctx context.Context, re remoteEnv) (*apiClient, error) {
	cfg, err := re.AWS.config(ctx)
	if err != nil {
		return nil, fmt.Errorf("--api %s: %w", re.Function, err)
	}
	return &apiClient{fn: re.Function, lc: lambda.NewFromConfig(cfg)}, nil
}

// errAPI is an answer {"status":"error"} from the api: the request was refused or failed there.
var errAPI = errors.New("api")

// call invokes the function with req and decodes an ok answer into out (nil: not decoded).
func (c *apiClient) call(ctx context.Context, req map[string]any, out any) error {
	payload, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := c.lc.Invoke(ictx, &lambda.InvokeInput{FunctionName: aws.String(c.fn), Payload: payload})
	if err != nil {
		return fmt.Errorf("invoke %s: %w", c.fn, err)
	}
	if res.FunctionError != nil {
		return fmt.Errorf("invoke %s: the function failed (%s): %s", c.fn, aws.ToString(res.FunctionError), clipMsg(string(res.Payload), 500))
	}
	var st struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(res.Payload, &st); err != nil {
		return fmt.Errorf("invoke %s: answer %q is not the api's JSON: %w", c.fn, clipMsg(string(res.Payload), 500), err)
	}
	if st.Status != "ok" {
		if st.Message == "" {
			st.Message = clipMsg(string(res.Payload), 500)
		}
		return fmt.Errorf("%w (%s): %s", errAPI, c.fn, st.Message)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(res.Payload, out); err != nil {
		return fmt.Errorf("invoke %s: decode the %s answer: %w", c.fn, req["action"], err)
	}
	return nil
}

// apiJob is a run as the api's status and listjobs show it (api.Job): the run's view with
// Scrapyd's fields over it, whose id is the client's jobid and whose spider is the name within
// its project.
type apiJob struct {
	view.Run
	ID      string `json:"id"`
	RunID   int64  `json:"run_id"`
	Project string `json:"project"`
	Spider  string `json:"spider"`
}

// run is the job as crawlq run and crawlq runs print a run.
func (j apiJob) run() view.Run {
	v := j.Run
	v.ID, v.Spider = j.RunID, j.Spider
	if j.Project != "" && j.Project != "default" {
		v.Spider = spiderstore.SpiderName(j.Project, j.Spider)
	}
	return v
}

func remoteSchedule(ctx context.Context, c *apiClient, env *Env, fs *flag.FlagSet, _ []string) error {
	if err := refuse(fs, "the api resolves spiders from the stack's store (crawlq spider push them first)", "spiders"); err != nil {
		return err
	}
	spiderName := flagString(fs, "spider")
	if spiderName == "" {
		return usageErr("--spider is required")
	}
	req := map[string]any{"action": "schedule", "spider": spiderName}
	if v := flagString(fs, "version"); v != "" {
		req["version"] = v
	}
	if args, _ := fs.Lookup("arg").Value.(kvFlag); len(args) > 0 {
		req["args"] = map[string]string(args)
	}
	if s := flagString(fs, "settings"); s != "" {
		// Checked here too, so a mistake reads as it does on the database.
		if _, err := crawl.DecodeOverrides([]byte(s), "settings"); err != nil {
			return usageErr("--settings: %v", err)
		}
		req["settings"] = json.RawMessage(s)
	}
	if set(fs, "priority") {
		p, err := strconv.Atoi(flagString(fs, "priority"))
		if err != nil {
			return usageErr("--priority: %v", err)
		}
		req["priority"] = p
	}
	if set(fs, "delay") {
		d, err := time.ParseDuration(flagString(fs, "delay"))
		if err != nil {
			return usageErr("--delay: %v", err)
		}
		req["delay_seconds"] = d.Seconds()
	}
	if at := flagString(fs, "at"); at != "" {
		t, err := parseAt(at)
		if err != nil {
			return err
		}
		req["at"] = t.UTC().Format(time.RFC3339Nano)
	}
	key, replace := flagString(fs, "key"), flagBool(fs, "replace")
	if replace && key == "" {
		return usageErr("--replace needs --key (it moves the start of the pending run with that key)")
	}
	if key != "" {
		req["unique_key"] = key
	}
	if replace {
		req["replace"] = true
	}
	var ans struct {
		RunID     int64  `json:"run_id"`
		Duplicate bool   `json:"duplicate"`
		State     string `json:"state"`
	}
	if err := c.call(ctx, req, &ans); err != nil {
		return err
	}
	// Standard output is the id alone, for id=$(crawlq schedule ...); a duplicate is said on
	// standard error.
	fmt.Fprintln(env.Stdout, ans.RunID)
	if ans.Duplicate {
		fmt.Fprintf(env.Stderr, "run %d is the existing %s run with key %q (not scheduled again)\n", ans.RunID, ans.State, key)
	}
	return nil
}

func remoteCancel(ctx context.Context, c *apiClient, env *Env, _ *flag.FlagSet, pos []string) error {
	id, err := parseRunID(pos)
	if err != nil {
		return err
	}
	var ans struct {
		Prev string `json:"prevstate"`
	}
	if err := c.call(ctx, map[string]any{"action": "cancel", "job": id}, &ans); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "run %d: cancel requested (was %s)\n", id, ans.Prev)
	return nil
}

func remoteRedrive(ctx context.Context, c *apiClient, env *Env, fs *flag.FlagSet, pos []string) error {
	run, err := strconv.ParseInt(flagString(fs, "run"), 10, 64)
	if err != nil || run <= 0 || len(pos) > 0 {
		return usageErr("through --api, redrive takes --run RUN_ID (a run's dead pages) only; dead queue jobs are redriven on the database")
	}
	if err := refuse(fs, "it applies to queue jobs, which --api does not redrive", "queue", "limit"); err != nil {
		return err
	}
	var ans struct {
		Pages int64 `json:"pages"`
	}
	if err := c.call(ctx, map[string]any{"action": "redrive", "job": run}, &ans); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "run %d: %d dead pages queued again; the run is running\n", run, ans.Pages)
	return nil
}

func remoteRuns(ctx context.Context, c *apiClient, env *Env, fs *flag.FlagSet, _ []string) error {
	limit, err := strconv.Atoi(flagString(fs, "limit"))
	if err != nil || limit < 1 || limit > 1000 {
		return usageErr("--limit must be 1..1000, got %s", flagString(fs, "limit"))
	}
	var states []string
	if s := flagString(fs, "state"); s != "" {
		for _, st := range strings.Split(s, ",") {
			if !slices.Contains(crawl.States, st) && st != outcomeMonitorsFailed {
				return usageErr("--state %q: want some of %s, %s", st, strings.Join(crawl.States, ", "), outcomeMonitorsFailed)
			}
			states = append(states, st)
		}
	}
	spiderName := flagString(fs, "spider")
	req := map[string]any{"action": "listjobs", "limit": limit}
	if spiderName != "" {
		// A Scrapy project's spider is PROJECT.SPIDER here and a project and a spider in the api.
		if p, s, ok := strings.Cut(spiderName, "."); ok {
			req["project"], req["spider"] = p, s
		} else {
			req["spider"] = spiderName
		}
	}
	var ans struct {
		Pending, Running, Finished []apiJob
	}
	if err := c.call(ctx, req, &ans); err != nil {
		return err
	}
	var runs []view.Run
	for _, g := range [][]apiJob{ans.Pending, ans.Running, ans.Finished} {
		for _, j := range g {
			if r := j.run(); len(states) == 0 || slices.Contains(states, r.State) || slices.Contains(states, r.Outcome) {
				runs = append(runs, r)
			}
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].ID > runs[j].ID })
	if len(runs) > limit {
		runs = runs[:limit]
	}
	if runs == nil {
		runs = []view.Run{}
	}
	if flagBool(fs, "json") {
		return writeJSON(env.Stdout, runs)
	}
	if spiderName != "" {
		return printHistory(env.Stdout, runs)
	}
	return printRunTable(env.Stdout, runs)
}

// printRunTable is crawlq runs' table, from the runs' views.
func printRunTable(w io.Writer, runs []view.Run) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSPIDER\tSTATE\tPAGES\tITEMS\tERRORS\tDEAD\tSECONDS\tCREATED")
	for _, r := range runs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%.1f\t%s\n", r.ID, r.Spider, stateShown(r), r.Stats.Pages, r.Stats.Items,
			r.Stats.Errors, r.DeadPages, r.Stats.DurationSeconds, r.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

// remoteRun is crawlq run ID [--wait] through the api's status: the run as crawlq run prints it
// (without its events, which the api does not answer), and the same exit statuses.
func remoteRun(ctx context.Context, c *apiClient, env *Env, fs *flag.FlagSet, pos []string) error {
	o, err := remoteRunOptions(fs, pos)
	if err != nil {
		return err
	}
	p := &runPoller{c: c, id: o.id, every: o.every, watch: o.watch, out: env.Stdout}
	v, r, err := p.untilFinished(ctx, o.wait)
	if err != nil {
		return err
	}
	p.show(v)
	verdictFor := o.verdictWindow()
	if o.waitsForVerdict() && judgedState(r.State) {
		if v, r, err = p.untilJudged(ctx, v, r, verdictFor); err != nil {
			return err
		}
	}
	return o.report(env, v, r, verdictFor)
}

// remoteRunOpts are crawlq run's flags and argument through the api.
type remoteRunOpts struct {
	id                 int64
	watch, wait        bool
	every, verdictWait time.Duration
	failOn             map[string]bool
}

// remoteRunOptions reads and checks crawlq run's flags and run ID.
func remoteRunOptions(fs *flag.FlagSet, pos []string) (remoteRunOpts, error) {
	o := remoteRunOpts{watch: flagBool(fs, "watch")}
	o.wait = flagBool(fs, "wait") || o.watch
	var err error
	if o.every, err = time.ParseDuration(flagString(fs, "interval")); err != nil || o.every < time.Second {
		return o, usageErr("--interval must be at least 1s through --api (each refresh invokes the api), got %s", flagString(fs, "interval"))
	}
	if o.verdictWait, err = time.ParseDuration(flagString(fs, "verdict-timeout")); err != nil || o.verdictWait < 0 {
		return o, usageErr("--verdict-timeout must not be negative, got %s", flagString(fs, "verdict-timeout"))
	}
	if o.failOn, err = parseFailOn(flagString(fs, "fail-on")); err != nil {
		return o, err
	}
	o.id, err = parseRunID(pos)
	return o, err
}

// verdictWindow is how long the run's monitors may take to judge it: --verdict-timeout, or a few
// refreshes when --watch only shows the verdict.
func (o remoteRunOpts) verdictWindow() time.Duration {
	if o.watch && !o.failOn[outcomeMonitorsFailed] {
		return 3 * o.every
	}
	return o.verdictWait
}

// waitsForVerdict: the command waits for the monitors' verdict of a finished run (to show it, or
// to exit by it).
func (o remoteRunOpts) waitsForVerdict() bool {
	return o.wait && o.failOn[outcomeMonitorsFailed] || o.watch
}

// judgedState: monitors judge runs that ended in these states.
func judgedState(st string) bool { return st == crawl.StateSucceeded || st == crawl.StateIncomplete }

// report prints the run (the verdict line with --watch, else the run as JSON) and returns the
// error that gives the command its exit status.
func (o remoteRunOpts) report(env *Env, v view.Run, r *crawl.Run, verdictFor time.Duration) error {
	rep := v.Report
	if !rep.Current(r.State, r.FinishedAt) {
		rep = nil
	}
	if o.watch {
		printVerdict(env.Stdout, r, rep, verdictFor)
	} else if err := writeJSON(env.Stdout, v); err != nil {
		return err
	}
	if o.wait && rep == nil && r.Finished() && judgedState(r.State) && o.failOn[outcomeMonitorsFailed] {
		if err := notJudged(r, o.failOn, o.verdictWait); err != nil {
			fmt.Fprintf(env.Stderr, "crawlq run: run %d %s; its monitors were not judged within %s (--verdict-timeout)\n", r.ID, r.State, o.verdictWait)
			return err
		}
	}
	return exitFor(r, rep, o.failOn)
}

// runPoller reads a run through the api's status every interval, printing its progress line
// when it changes (--watch).
type runPoller struct {
	c     *apiClient
	id    int64
	every time.Duration
	watch bool
	out   io.Writer
	last  string // the progress line printed last
}

// get reads the run once.
func (p *runPoller) get(ctx context.Context) (view.Run, *crawl.Run, error) {
	var ans struct {
		Job apiJob `json:"job"`
	}
	if err := p.c.call(ctx, map[string]any{"action": "status", "job": p.id}, &ans); err != nil {
		return view.Run{}, nil, err
	}
	v := ans.Job.run()
	return v, &crawl.Run{ID: v.ID, State: v.State, FinishedAt: v.FinishedAt}, nil
}

// pause waits one interval: each poll is a Lambda invocation.
func (p *runPoller) pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(p.every):
		return nil
	}
}

// show prints v's progress line with --watch, when it changed.
func (p *runPoller) show(v view.Run) {
	if line := remoteProgress(v); p.watch && line != p.last {
		fmt.Fprintln(p.out, line)
		p.last = line
	}
}

// untilFinished reads the run, and with wait goes on reading it until it finished.
func (p *runPoller) untilFinished(ctx context.Context, wait bool) (view.Run, *crawl.Run, error) {
	v, r, err := p.get(ctx)
	for err == nil && wait && !r.Finished() {
		p.show(v)
		if err = p.pause(ctx); err == nil {
			v, r, err = p.get(ctx)
		}
	}
	return v, r, err
}

// untilJudged reads the finished run until its monitors' report is current, for up to within.
func (p *runPoller) untilJudged(ctx context.Context, v view.Run, r *crawl.Run, within time.Duration) (view.Run, *crawl.Run, error) {
	deadline := time.Now().Add(within)
	var err error
	for err == nil && !v.Report.Current(r.State, r.FinishedAt) && time.Now().Before(deadline) {
		if err = p.pause(ctx); err == nil {
			v, r, err = p.get(ctx)
		}
	}
	return v, r, err
}

// remoteProgress is crawlq run --watch's line through the api: the run's figures so far (the
// queue's depth is the database's, which the api does not answer).
func remoteProgress(v view.Run) string {
	s := v.Stats
	var b strings.Builder
	fmt.Fprintf(&b, "run %d %s: pages %d  items %d  errors %d", v.ID, v.State, s.Pages, s.Items, s.Errors)
	if v.DeadPages > 0 {
		fmt.Fprintf(&b, "  dead %d", v.DeadPages)
	}
	if s.DurationSeconds > 0 {
		fmt.Fprintf(&b, "  %.1f pages/s", float64(s.Pages+s.Errors)/s.DurationSeconds)
	}
	fmt.Fprintf(&b, "  %s", time.Duration(s.DurationSeconds*float64(time.Second)).Round(100*time.Millisecond))
	return b.String()
}

// remoteSpiderPush is crawlq spider push through the api's pushspider, one spec per invocation.
// Every spec is validated here first, as the api would, so a directory with a bad spec pushes
// nothing; a push that fails at the api after others succeeded says which were stored.
func remoteSpiderPush(ctx context.Context, c *apiClient, env *Env, fs *flag.FlagSet, pos []string) error {
	version := flagString(fs, "version")
	files, err := specFiles(pos[0], version)
	if err != nil {
		return err
	}
	var errs []error
	seen := map[string]string{}
	for _, f := range files {
		spec, err := spiderstore.Validate(f.Data, f.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[spec.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: name %q is also used by %s", f.Name, spec.Name, prev))
		}
		seen[spec.Name] = f.Name
	}
	if len(errs) > 0 {
		return explainValidation(errors.Join(errs...))
	}
	var pushed []string
	for _, f := range files {
		req := map[string]any{"action": "pushspider", "spec": string(f.Data)}
		if version != "" {
			req["version"] = version
		}
		var ans struct {
			Spider, Version, Kind string
			Unchanged             bool
		}
		if err := c.call(ctx, req, &ans); err != nil {
			if len(pushed) > 0 {
				return fmt.Errorf("%s: %w (already pushed: %s)", f.Name, err, strings.Join(pushed, ", "))
			}
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		pushed = append(pushed, f.Name)
		if ans.Unchanged {
			fmt.Fprintf(env.Stdout, "%s: unchanged (version %s)\n", ans.Spider, ans.Version)
		} else {
			fmt.Fprintf(env.Stdout, "%s: pushed version %s (%s)\n", ans.Spider, ans.Version, ans.Kind)
		}
	}
	return nil
}

// specFiles reads a spec file, or every *.yaml, *.yml and *.json in a directory.
func specFiles(path, version string) ([]spiderstore.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	paths := []string{path}
	if fi.IsDir() {
		paths = nil
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			ext := strings.ToLower(filepath.Ext(e.Name()))
			if !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				paths = append(paths, filepath.Join(path, e.Name()))
			}
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json specs", path)
		}
		if version != "" && len(paths) > 1 {
			return nil, usageErr("--version names one spec's version; push a directory without it")
		}
	}
	files := make([]spiderstore.File, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		files = append(files, spiderstore.File{Name: p, Data: b})
	}
	return files, nil
}
