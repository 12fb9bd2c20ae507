package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/events"
	"crawlq/internal/node"
	"crawlq/internal/spiderstore"
	"crawlq/internal/view"
)

// Exit statuses of crawlq run beyond the run states' (cli.go): a run judged with a failed monitor,
// and a finished run whose verdict did not come within --verdict-timeout although --fail-on asks
// about monitors.
const (
	exitMonitorsFailed = 6
	exitNotJudged      = 7
)

// outcomeMonitorsFailed is events.Outcome's name for a run judged with a failed monitor.
const outcomeMonitorsFailed = "monitors_failed"

// failOutcomes are the outcomes --fail-on takes, each with its exit status.
var failOutcomes = map[string]int{
	crawl.StateIncomplete: exitIncomplete,
	crawl.StateFailed:     exitFailed,
	crawl.StateCancelled:  exitCancelled,
	outcomeMonitorsFailed: exitMonitorsFailed,
}

// defaultFailOn is every outcome but succeeded.
const defaultFailOn = "incomplete,failed,cancelled,monitors_failed"

// parseFailOn reads --fail-on: outcomes separated by commas, or none.
func parseFailOn(s string) (map[string]bool, error) {
	out := map[string]bool{}
	if strings.TrimSpace(s) == "none" {
		return out, nil
	}
	names := make([]string, 0, len(failOutcomes))
	for k := range failOutcomes {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, o := range strings.Split(s, ",") {
		o = strings.TrimSpace(o)
		if _, ok := failOutcomes[o]; !ok {
			return nil, usageErr("--fail-on %q: unknown outcome %q; want some of %s separated by commas, or none", s, o, strings.Join(names, ", "))
		}
		out[o] = true
	}
	return out, nil
}

// exitFor is the error that makes crawlq run exit with the status for how run r ended, given its
// report rep (nil: not judged) and the outcomes that fail: the status of its outcome when failOn
// has it (monitors_failed for a run judged with a failed monitor), else of its state when failOn
// has that (an incomplete run whose monitors failed, with --fail-on incomplete), else nil.
func exitFor(r *crawl.Run, rep *events.Report, failOn map[string]bool) error {
	if !r.Finished() {
		return nil
	}
	if rep.Current(r.State, r.FinishedAt) {
		if o := events.Outcome(r.State, rep.Monitors); failOn[o] {
			return &outcomeErr{failOutcomes[o]}
		}
	}
	if failOn[r.State] {
		return runOutcome(r.State)
	}
	return nil
}

// verdict returns the report of run r's last finish, nil while there is none.
func verdict(ctx context.Context, n *node.Node, r *crawl.Run) (*events.Report, error) {
	reps, err := events.Reports(ctx, n.Queue.Pool(), []int64{r.ID})
	if err != nil {
		return nil, err
	}
	if rep := reps[r.ID]; rep.Current(r.State, r.FinishedAt) {
		return rep, nil
	}
	return nil, nil
}

// awaitFinish waits, checking every poll, for run r to finish and returns it as it ended. While
// the run waits for something (a worker of its queue, its start time, a host: waitingFor), it says
// so on w when that changes, and again every sayAgain while it lasts, so a wait that cannot end by
// itself is not silent and one that lasts is not a line a second of countdowns.
func awaitFinish(ctx context.Context, w io.Writer, n *node.Node, r *crawl.Run, poll time.Duration) (*crawl.Run, error) {
	var say sayer
	return followRun(ctx, n, r, poll, func(r *crawl.Run, _, _ int64, why string) {
		if r.Finished() || why == "" {
			say = sayer{}
			return
		}
		if say.due(why, time.Now()) {
			fmt.Fprintf(w, "run %d %s\n", r.ID, why)
		}
	})
}

// showRun prints run id as JSON (after it finished, with wait) and returns the error that makes
// the exit status say how it ended.
func showRun(ctx context.Context, env *Env, n *node.Node, id int64, wait bool, failOn map[string]bool, verdictWait time.Duration) error {
	r, err := n.Crawler.Get(ctx, id)
	if err == nil && wait {
		r, err = awaitFinish(ctx, env.Stderr, n, r, 500*time.Millisecond)
	}
	if err != nil {
		return err
	}
	judged := r.State == crawl.StateSucceeded || r.State == crawl.StateIncomplete // failed and cancelled runs are not
	awaitJudged := wait && judged && failOn[outcomeMonitorsFailed]
	rep, err := runVerdict(ctx, n, r, awaitJudged, verdictWait)
	if err != nil {
		return err
	}
	v := view.NewRun(r, rep)
	if v.Events, err = events.RunEvents(ctx, n.Queue.Pool(), id); err != nil {
		return err
	}
	if rec, err := n.Store.Run(ctx, id); err == nil {
		v.Version = rec.Version
	} else if !errors.Is(err, spiderstore.ErrNotFound) {
		return err
	}
	if err := writeJSON(env.Stdout, v); err != nil {
		return err
	}
	if awaitJudged && rep == nil {
		if err := notJudged(r, failOn, verdictWait); err != nil {
			fmt.Fprintf(env.Stderr, "crawlq run: run %d %s; its monitors were not judged within %s (--verdict-timeout)\n", r.ID, r.State, verdictWait)
			return err
		}
	}
	return exitFor(r, rep, failOn)
}

// runVerdict is finished run r's verdict: waited for up to timeout when await, else as it is
// (nil: not judged).
func runVerdict(ctx context.Context, n *node.Node, r *crawl.Run, await bool, timeout time.Duration) (*events.Report, error) {
	if await {
		return awaitVerdict(ctx, n, r, timeout, 500*time.Millisecond)
	}
	return verdict(ctx, n, r)
}

// awaitVerdict waits, checking every poll, up to timeout for the verdict of finished run r and
// returns it, nil when it did not come in time. A run that succeeded (or ended incomplete) is
// judged by the next publisher pass after its final event: within a second under crawlq worker,
// crawlq local or a runner, at the next dispatch tick (a minute) on AWS otherwise.
func awaitVerdict(ctx context.Context, n *node.Node, r *crawl.Run, timeout, poll time.Duration) (*events.Report, error) {
	deadline := time.Now().Add(timeout)
	for {
		rep, err := verdict(ctx, n, r)
		if err != nil || rep != nil {
			return rep, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(poll, left)):
		}
	}
}

// notJudged is the error for a finished run without a verdict after the wait, when failOn asks
// about monitors: the run's own state wins when it fails anyway.
func notJudged(r *crawl.Run, failOn map[string]bool, timeout time.Duration) error {
	if failOn[r.State] {
		return runOutcome(r.State)
	}
	if !failOn[outcomeMonitorsFailed] || (r.State != crawl.StateSucceeded && r.State != crawl.StateIncomplete) {
		return nil // a failed or cancelled run is not judged against monitors
	}
	return &outcomeErr{exitNotJudged}
}

// runExitHelp is the table of crawlq run's exit statuses, for its --help (and docs/cli.md's).
const runExitHelp = `Exit status: how the run ended, for the outcomes --fail-on names (default: every outcome
but succeeded):
  0  succeeded; an outcome --fail-on leaves out; a run not finished (without --wait or --watch)
  1  an error (the database, an unknown run)
  2  bad usage (a flag, the run id)
  3  incomplete: some pages died ('crawlq redrive --run ID' retries them)
  4  failed
  5  cancelled
  6  monitors_failed: the run succeeded or ended incomplete and a monitor failed (an incomplete
     run whose monitors failed exits 6, or 3 when --fail-on has incomplete but not
     monitors_failed)
  7  the run finished but its verdict did not come within --verdict-timeout, with
     monitors_failed in --fail-on (nothing judged it: no crawlq worker, local or runner with
     maintenance, no dispatch tick)
Without --wait or --watch, a finished run not judged yet exits by its state.`

func runCmd() *Command {
	return &Command{
		Name: "run", Synopsis: "show one spider run", Usage: "ID [--wait | --watch] [--fail-on OUTCOMES]", Args: one("run ID"),
		Help: `Prints a run with its stats (so far, while it runs) as JSON: the spider version it pinned or
ran (version, for a stored spider: crawlq spider versions NAME), its state, dead_pages and a
sample of failed_pages with their last error once it has finished, its outcome and report
(monitors' verdict and results, field coverage) once it has been judged, and its state-change
events, each with when it was published (published_at) or why it was not (not_published:
publishing is off), or, while it waits, its last_error. With --watch, prints a live line
instead (pages, items, errors, queue depth, rate, and an ETA when the run has a page limit)
until the run ends, then its verdict. With --wait it first waits for the run to finish, saying
on standard error what the run waits for (its start time, a host that is down, a worker of its
queue when none is alive: a spider with runtime ecs is on the long queue, which crawlq worker
does not work unless --queues crawl,long; room when the live ones run other runs' jobs) each
time that changes, and,
when --fail-on has monitors_failed, for its verdict (up to --verdict-timeout). A run redriven
since it was judged is judged again when it finishes again; until then it has no verdict.

` + runExitHelp,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			wait := fs.Bool("wait", false, "wait until the run has finished (and been judged, see --fail-on)")
			watch := fs.Bool("watch", false, "show a live progress line until the run ends")
			every := fs.Duration("interval", time.Second, "with --watch: how often to refresh")
			failOnFlag := fs.String("fail-on", defaultFailOn, "outcomes that make the exit status non-zero, separated by commas (incomplete, failed, cancelled, monitors_failed), or none")
			verdictWait := fs.Duration("verdict-timeout", 2*time.Minute, "with --wait or --watch: how long to wait for a finished run's verdict when --fail-on has monitors_failed")
			return func(ctx context.Context, args []string) error {
				if *every <= 0 {
					return usageErr("--interval must be positive, got %s", *every)
				}
				if *verdictWait < 0 {
					return usageErr("--verdict-timeout must not be negative, got %s", *verdictWait)
				}
				failOn, err := parseFailOn(*failOnFlag)
				if err != nil {
					return err
				}
				id, err := parseRunID(args)
				if err != nil {
					return err
				}
				return pg.withNode(ctx, "", func(n *node.Node) error {
					if *watch {
						return watchRun(ctx, env.Stdout, n, id, *every, failOn, *verdictWait)
					}
					return showRun(ctx, env, n, id, *wait, failOn, *verdictWait)
				})
			}
		},
	}
}
