package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/migrate"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/view"
)

func migrateCmd() *Command {
	return &Command{
		Name: "migrate", Synopsis: "create or update the database schema", Usage: "[--list]",
		Help: `Applies every embedded schema migration not yet applied, each in its own transaction.
Safe to run twice and from several processes at once.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			list := fs.Bool("list", false, "list migrations and whether each is applied; change nothing")
			return func(ctx context.Context, args []string) error {
				return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					if *list {
						st, err := migrate.List(ctx, pool)
						if err != nil {
							return err
						}
						for _, s := range st {
							mark := "pending"
							if s.Applied {
								mark = "applied"
							}
							fmt.Fprintf(env.Stdout, "%04d %-20s %s\n", s.Version, s.Name, mark)
						}
						return nil
					}
					done, err := migrate.Up(ctx, pool)
					if err != nil {
						return err
					}
					if len(done) == 0 {
						fmt.Fprintln(env.Stdout, "schema is up to date")
					} else {
						fmt.Fprintf(env.Stdout, "applied migrations %v\n", done)
					}
					return nil
				})
			}
		},
	}
}

func enqueueCmd() *Command {
	return &Command{
		Name: "enqueue", Synopsis: "add a job", Usage: "--queue Q --kind K [flags]",
		Help: `Adds one job and prints its id. With --unique-key, an unfinished job of the queue with the
same key is not duplicated: --on-duplicate keep (default) leaves it, replace moves its run time and
priority to the new ones, earliest keeps the earlier run time.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			var p queue.EnqueueParams
			fs.StringVar(&p.Queue, "queue", "default", "queue name")
			fs.StringVar(&p.Kind, "kind", "", "job kind (required)")
			args := fs.String("args", "{}", "job arguments as JSON (at most 256 KiB)")
			fs.IntVar(&p.Priority, "priority", 0, "priority, -1000..1000; higher runs first")
			fs.DurationVar(&p.Delay, "delay", 0, "run after this long (e.g. 30s, 5m)")
			at := fs.String("at", "", "run at this time (RFC 3339, e.g. 2026-01-02T15:04:05Z; not more than a day in the past)")
			fs.IntVar(&p.MaxAttempts, "max-attempts", 0, "attempts before the job is dead (default 25)")
			fs.StringVar(&p.UniqueKey, "unique-key", "", "unique key among the queue's unfinished jobs")
			dup := fs.String("on-duplicate", "keep", "keep, replace or earliest")
			asJSON := fs.Bool("json", false, "print the result as JSON")
			return func(ctx context.Context, rest []string) error {
				if p.Kind == "" {
					return usageErr("--kind is required")
				}
				p.Args = json.RawMessage(*args)
				if *at != "" {
					t, err := parseAt(*at)
					if err != nil {
						return err
					}
					p.RunAt = t
				}
				mode, err := queue.ParseDuplicateMode(*dup)
				if err != nil {
					return usageErr("--on-duplicate: %v", err)
				}
				p.OnDuplicate = mode
				return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					r, err := queue.New(pool, queue.Config{}).Enqueue(ctx, p)
					if err != nil {
						return err
					}
					if *asJSON {
						return writeJSON(env.Stdout, view.Enqueued{ID: r.ID, Duplicate: r.Duplicate})
					}
					if r.Duplicate {
						fmt.Fprintf(env.Stdout, "%d (duplicate of an unfinished job; %s)\n", r.ID, mode)
					} else {
						fmt.Fprintln(env.Stdout, r.ID)
					}
					return nil
				})
			}
		},
	}
}

func statsCmd() *Command {
	return &Command{
		Name: "stats", Synopsis: "show job counts per queue and state", Usage: "[--json]",
		Help: `Prints, per queue: available (due), scheduled (delayed), running, succeeded, cancelled and
dead counts, the past-due count and the age of the oldest past-due job. Counts are kept by the
statements that change jobs, so this is cheap on a table of any size; --recount rebuilds them
from the rows after jobs were changed by hand.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			asJSON := fs.Bool("json", false, "print JSON")
			recount := fs.Bool("recount", false, "first rebuild the counts from the job rows (repair after manual SQL; reads every job)")
			return func(ctx context.Context, args []string) error {
				return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					qc := queue.New(pool, queue.Config{})
					if *recount {
						if err := qc.Recount(ctx); err != nil {
							return err
						}
					}
					st, err := qc.Stats(ctx)
					if err != nil {
						return err
					}
					if *asJSON {
						return writeJSON(env.Stdout, view.QueuesStats(st))
					}
					writeStats(env, st)
					return nil
				})
			}
		},
	}
}

func writeStats(env *Env, st []queue.QueueStats) {
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QUEUE\tAVAILABLE\tSCHEDULED\tRUNNING\tSUCCEEDED\tCANCELLED\tDEAD\tPAST DUE\tOLDEST\t")
	for _, s := range st {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", s.Queue, s.Available, s.Scheduled, s.Running,
			s.Succeeded, s.Cancelled, s.Dead, s.PastDue, s.OldestPastDue.Round(time.Millisecond))
	}
	tw.Flush()
}

func jobsCmd() *Command {
	return &Command{
		Name: "jobs", Synopsis: "list jobs", Usage: "[--queue Q] [--state S,...] [--kind K] [--run ID] [--limit N] [--before ID] [--json]",
		Help: `Lists jobs newest first. Page with --before (the smallest id of the previous page).`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			var p queue.ListParams
			fs.StringVar(&p.Queue, "queue", "", "only this queue")
			fs.Var((*statesFlag)(&p.States), "state", "only these states, comma-separated (available, scheduled, running, succeeded, cancelled, dead)")
			fs.StringVar(&p.Kind, "kind", "", "only this kind")
			fs.Int64Var(&p.ParentID, "run", 0, "only jobs of this spider run")
			fs.IntVar(&p.Limit, "limit", 50, "at most this many (1..10000)")
			fs.Int64Var(&p.Before, "before", 0, "only ids below this")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, args []string) error {
				return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					jobs, err := queue.New(pool, queue.Config{}).List(ctx, p)
					if err != nil {
						return err
					}
					if *asJSON {
						return writeJSON(env.Stdout, view.Jobs(jobs))
					}
					tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tQUEUE\tKIND\tSTATE\tPRIO\tATTEMPT\tRUN AT\tUNIQUE KEY\tLAST ERROR")
					for _, j := range jobs {
						last := ""
						if n := len(j.Errors); n > 0 {
							last = j.Errors[n-1].Error
							if len(last) > 60 {
								last = last[:60] + "…"
							}
						}
						fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\t%s\n", j.ID, j.Queue, j.Kind, j.State, j.Priority,
							j.Attempt, j.MaxAttempts, j.RunAt.Format(time.RFC3339), j.UniqueKey, last)
					}
					return tw.Flush()
				})
			}
		},
	}
}

func parseIDs(args []string) ([]int64, error) {
	var ids []int64
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, usageErr("job id %q: want a positive integer", a)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func cancelCmd() *Command {
	return &Command{
		Name: "cancel", Synopsis: "cancel jobs", Usage: "ID [ID...]", Args: some("job ID"),
		Help: `Cancels each job: a waiting job at once; a running job is marked and its worker stops it at
its next heartbeat. Exits 1 if any id is unknown or already finished (the others are still cancelled).`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			return func(ctx context.Context, args []string) error {
				ids, err := parseIDs(args)
				if err != nil {
					return err
				}
				return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					c := queue.New(pool, queue.Config{})
					var errs []error
					for _, id := range ids {
						st, err := c.Cancel(ctx, id)
						switch {
						case errors.Is(err, queue.ErrNotFound):
							// Run ids and job ids look alike: name the command a run id needs.
							if _, rerr := dbsqlc.New(pool).GetRun(ctx, id); rerr == nil {
								err = fmt.Errorf("%w; %d is a run's id: crawlq cancel-run %d cancels the run", err, id, id)
							}
							errs = append(errs, err)
						case err != nil:
							errs = append(errs, err)
						case st == queue.StateRunning:
							fmt.Fprintf(env.Stdout, "%d: running; cancel requested\n", id)
						default:
							fmt.Fprintf(env.Stdout, "%d: cancelled\n", id)
						}
					}
					return errors.Join(errs...)
				})
			}
		},
	}
}

func redriveCmd() *Command {
	return &Command{
		Name: "redrive", Synopsis: "retry dead jobs, or a run's dead pages", Usage: "--queue Q [--limit N] [ID...] | --run RUN_ID", Args: Args{Max: -1, Name: "job ID"},
		Help: `Makes dead jobs of the queue available again with a fresh attempt budget: the given ids, or
up to --limit of them. Exits 1 if any given id is unknown, in another queue or not dead (the
others are still redriven).

With --run, retries the dead pages of a run that ended incomplete or failed: they are queued again
and the run reopens (running), then finishes again, once, when they are done. Pages the run already
fetched are not fetched again.

A running crawlq local on the same database acts on it at once (the command sends NOTIFY
crawlq_wake); for a deployed stack, set CRAWLQ_DISPATCH_FUNCTION to its dispatch function and the
command pokes it with your AWS credentials (else the stack's minute tick acts on it).`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			q := fs.String("queue", "default", "queue")
			limit := fs.Int("limit", 1000, "at most this many jobs")
			run := fs.Int64("run", 0, "retry this run's dead pages and reopen it")
			return func(ctx context.Context, args []string) error {
				wenv, err := readWakeEnv(env)
				if err != nil {
					return err
				}
				if *run != 0 {
					if *run < 0 {
						return usageErr("--run %d: want a positive run id", *run)
					}
					if len(args) > 0 {
						return usageErr("--run takes no job ids")
					}
					return pg.withNode(ctx, "", func(n *node.Node) error {
						k, err := n.Crawler.Redrive(ctx, *run)
						if err != nil {
							return err
						}
						wakeDispatch(ctx, env, wenv, n.Queue.Pool(), *run)
						fmt.Fprintf(env.Stdout, "run %d: %d dead pages queued again; the run is running\n", *run, k)
						return nil
					})
				}
				if *limit < 1 {
					return usageErr("--limit must be at least 1, got %d", *limit)
				}
				ids, err := parseIDs(args)
				if err != nil {
					return err
				}
				return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					c := queue.New(pool, queue.Config{})
					done, err := c.Redrive(ctx, *q, ids, *limit)
					if err != nil {
						return err
					}
					wakeDispatch(ctx, env, wenv, pool)
					fmt.Fprintf(env.Stdout, "redrove %d jobs\n", len(done))
					return notRedriven(ctx, c, *q, ids, done, *limit)
				})
			}
		},
	}
}

// notRedriven says why each of the given ids is not among those redriven: unknown (worded as
// crawlq cancel words it), in another queue, not dead, or beyond the limit. Nil when every id
// was redriven.
func notRedriven(ctx context.Context, c *queue.Client, q string, ids, done []int64, limit int) error {
	var errs []error
	for _, id := range ids {
		if slices.Contains(done, id) {
			continue
		}
		j, err := c.Get(ctx, id)
		switch {
		case errors.Is(err, queue.ErrNotFound):
			errs = append(errs, fmt.Errorf("redrive job %d: %w", id, queue.ErrNotFound))
		case err != nil:
			errs = append(errs, fmt.Errorf("redrive job %d: %w", id, err))
		case j.Queue != q:
			errs = append(errs, fmt.Errorf("redrive job %d: it is in queue %q, not %q (--queue)", id, j.Queue, q))
		case j.State != queue.StateDead:
			errs = append(errs, fmt.Errorf("redrive job %d (%s): only dead jobs are redriven", id, j.State))
		default:
			errs = append(errs, fmt.Errorf("redrive job %d: not redriven: beyond --limit %d", id, limit))
		}
	}
	return errors.Join(errs...)
}

func retentionCmd() *Command {
	return &Command{
		Name: "retention", Synopsis: "delete old finished jobs", Usage: "[--max-age D] [--keep N] [--states S,...]",
		Help: `Deletes finished jobs (succeeded, cancelled, dead) older than --max-age and/or beyond the newest
--keep of each queue, in bounded batches.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			var p queue.RetentionParams
			fs.DurationVar(&p.MaxAge, "max-age", 0, "delete jobs finished longer ago than this (e.g. 168h)")
			fs.IntVar(&p.KeepPerQueue, "keep", 0, "keep only the newest N finished jobs per queue")
			fs.Var((*statesFlag)(&p.States), "states", "only these finished states, comma-separated (default all)")
			return func(ctx context.Context, args []string) error {
				return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					n, err := queue.New(pool, queue.Config{}).Retention(ctx, p)
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "deleted %d finished jobs\n", n)
					return nil
				})
			}
		},
	}
}

func rescueCmd() *Command {
	return &Command{
		Name: "rescue", Synopsis: "return jobs with expired leases and promote due delayed jobs", Usage: "",
		Help: `Runs one maintenance pass (what the dispatcher does every tick): jobs whose lease expired go
back to available (dead when out of attempts), and delayed jobs now due become available.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			return func(ctx context.Context, args []string) error {
				return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					c := queue.New(pool, queue.Config{})
					r, err := c.Rescue(ctx, 10000)
					if err != nil {
						return err
					}
					p, err := c.Promote(ctx, 10000)
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "rescued %d, promoted %d\n", r, p)
					return nil
				})
			}
		},
	}
}

// statesFlag is a comma-separated list of job states.
type statesFlag []queue.State

func (f *statesFlag) String() string { return "" }

func (f *statesFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		st, err := queue.ParseState(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		*f = append(*f, st)
	}
	return nil
}
