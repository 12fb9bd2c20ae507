package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"crawlq/internal/api"
	"crawlq/internal/cronstore"
	"crawlq/internal/node"
)

// schedulesCmd is `crawlq schedules list|add|del`: the recurring runs `crawlq local` keeps in
// Postgres and fires, managed through the api's own addschedule, listschedules and delschedule.
func schedulesCmd() *Command {
	return &Command{
		Name: "schedules", Synopsis: "list, add and delete the recurring runs crawlq local fires",
		Usage: "list [--json] | add --spider NAME --cron EXPR [--name N] [--timezone TZ] [--arg k=v]... | del NAME",
		Help: `Recurring runs kept in the database and fired by crawlq local on time, each tick once (across
restarts and however many crawlq local processes share the database). These are the schedules of
the api's addschedule, listschedules and delschedule under crawlq local; a deployed stack keeps its
schedules in EventBridge Scheduler instead (use the api there).

  crawlq schedules add --spider demo --cron "30 3 * * *"           every day at 03:30 UTC
  crawlq schedules add --spider demo --cron "rate(15 minutes)" --arg base_url=http://127.0.0.1:8088
  crawlq schedules add --spider demo --cron "0 9 * * 1-5" --timezone Europe/Paris --name weekday-demo
  crawlq schedules list                                             with each one's next and last tick
  crawlq schedules del weekday-demo

--cron takes a classic 5-field cron or a descriptor (@daily), EventBridge's cron(...) or
rate(...), and here also rate(N seconds). A tick missed by more than an hour (no crawlq local was
running) is skipped, and list says so; a tick that fails (an unknown spider) shows its error.
crawlq worker fires none: add and list say so on standard error when no crawlq local has looked
for due schedules on the database in the last minute.`,
		Subcommands: []*Command{
			schedulesListCmd(), schedulesAddCmd(), schedulesDelCmd(),
		},
	}
}

// schedulesListCmd is `crawlq schedules list`.
func schedulesListCmd() *Command {
	return &Command{Name: "list", Synopsis: "every schedule with its next tick and what its last tick did", Usage: "[--json]",
		Help: "Lists the stored schedules by name: expression, timezone, state, next tick, and the last tick's run or error.",
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, args []string) error {
				se, err := readSchedulesEnv(env)
				if err != nil {
					return err
				}
				return pg.withNode(ctx, "", func(n *node.Node) error {
					st, err := cronstore.New(cronstore.Config{Pool: n.Queue.Pool()})
					if err != nil {
						return err
					}
					var all []cronstore.Entry
					for after := ""; ; {
						page, err := st.List(ctx, se.Group, after, 500)
						if err != nil {
							return err
						}
						all = append(all, page...)
						if len(page) < 500 {
							break
						}
						after = page[len(page)-1].Name
					}
					if err := noteFirer(ctx, env.Stderr, st, len(all)); err != nil {
						return err
					}
					if *asJSON {
						return writeJSON(env.Stdout, scheduleViews(all))
					}
					tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tEXPRESSION\tTIMEZONE\tSTATE\tNEXT\tLAST TICK\tLAST RUN\tLAST ERROR")
					for _, v := range scheduleViews(all) {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, v.Expression, v.Timezone, v.State, v.NextAt,
							orDash(v.LastTickAt), orDash(v.LastRun), orDash(v.LastError))
					}
					return tw.Flush()
				})
			}
		}}
}

// schedulesAddCmd is `crawlq schedules add`: the api's addschedule.
func schedulesAddCmd() *Command {
	return &Command{Name: "add", Synopsis: "add a recurring run (the api's addschedule)",
		Usage: "--spider NAME --cron EXPR [--name N] [--timezone TZ] [--arg k=v]... [--settings JSON] [--priority P] [--key K] [--version V] [--replace]",
		Help:  "Adds a schedule through the api's addschedule, with its validation; prints its name, expression and first tick.",
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			req := map[string]any{"action": "addschedule"}
			spider := fs.String("spider", "", "spider name (required)")
			expr := fs.String("cron", "", "when: a 5-field cron, @daily..., cron(...), rate(N minutes) or rate(N seconds) (required)")
			name := fs.String("name", "", "schedule name (default derived from spider, args and timing)")
			tz := fs.String("timezone", "", "IANA timezone of the cron (default UTC)")
			args := kvFlag{}
			fs.Var(args, "arg", "spider argument key=value (repeatable)")
			settings := fs.String("settings", "", `crawlq setting overrides as JSON, e.g. {"max_pages":100}`)
			priority := fs.Int("priority", 0, "priority of each run, -1000..1000")
			key := fs.String("key", "", "idempotency key of each run: no new run while one with it is unfinished")
			version := fs.String("version", "", "stored version of the spider every run runs (default the newest)")
			replace := fs.Bool("replace", false, "replace a schedule of the same name")
			return func(ctx context.Context, rest []string) error {
				se, err := readSchedulesEnv(env)
				if err != nil {
					return err
				}
				switch {
				case *spider == "":
					return usageErr("--spider is required")
				case *expr == "":
					return usageErr("--cron is required")
				}
				req["spider"], req["cron"] = *spider, *expr
				for k, v := range map[string]string{"name": *name, "timezone": *tz, "unique_key": *key, "version": *version} {
					if v != "" {
						req[k] = v
					}
				}
				if len(args) > 0 {
					req["args"] = map[string]string(args)
				}
				if *settings != "" {
					var s map[string]any
					if err := json.Unmarshal([]byte(*settings), &s); err != nil {
						return usageErr("--settings: want a JSON object: %v", err)
					}
					req["settings"] = s
				}
				if *priority != 0 {
					req["priority"] = *priority
				}
				if *replace {
					req["replace"] = true
				}
				return withScheduleAPI(ctx, pg, se, func(a *api.API, st *cronstore.Store) error {
					resp, err := callAPI(ctx, a, req)
					if err != nil {
						return err
					}
					e, err := st.Get(ctx, se.Group, fmt.Sprint(resp["name"]))
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "%s: %s (%s), first tick %s\n", e.Name, e.Expression, e.Timezone, e.NextAt.UTC().Format(time.RFC3339))
					return noteFirer(ctx, env.Stderr, st, 1)
				})
			}
		}}
}

// schedulesDelCmd is `crawlq schedules del`: the api's delschedule.
func schedulesDelCmd() *Command {
	return &Command{Name: "del", Synopsis: "delete a schedule (the api's delschedule)", Usage: "NAME", Args: one("NAME"),
		Help: "Deletes a schedule; ticks still due are not fired.",
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			return func(ctx context.Context, args []string) error {
				se, err := readSchedulesEnv(env)
				if err != nil {
					return err
				}
				return withScheduleAPI(ctx, pg, se, func(a *api.API, _ *cronstore.Store) error {
					if _, err := callAPI(ctx, a, map[string]any{"action": "delschedule", "name": args[0]}); err != nil {
						return fmt.Errorf("%w (crawlq schedules list shows the schedules)", err)
					}
					fmt.Fprintf(env.Stdout, "%s: deleted\n", args[0])
					return nil
				})
			}
		}}
}

// noteFirer says on w, when there are schedules, that none fires while no crawlq local has looked
// for due ones lately: crawlq worker, the README's first process, fires none, and a schedule that
// never fires would otherwise show only "LAST TICK -".
func noteFirer(ctx context.Context, w io.Writer, st *cronstore.Store, schedules int) error {
	if schedules == 0 {
		return nil
	}
	ago, ok, err := st.LastLook(ctx)
	if err != nil || ok && ago < cronstore.FirerHorizon {
		return err
	}
	last := "none ever has"
	if ok {
		last = fmt.Sprintf("the last look was %s ago", ago.Round(time.Second))
	}
	fmt.Fprintf(w, "note: no crawlq local has looked for due schedules on this database in the last %s (%s): "+
		"the schedules kept here fire only under crawlq local, not crawlq worker; a deployed stack keeps its own in EventBridge Scheduler\n",
		cronstore.FirerHorizon, last)
	return nil
}

// withScheduleAPI runs f with an api whose schedules are the database's, as crawlq local's are.
func withScheduleAPI(ctx context.Context, pg *database, se schedulesEnv, f func(*api.API, *cronstore.Store) error) error {
	return pg.withNode(ctx, "", func(n *node.Node) error {
		st, err := cronstore.New(cronstore.Config{Pool: n.Queue.Pool()})
		if err != nil {
			return err
		}
		a, err := api.New(api.Config{Crawler: n.Crawler, Queue: n.Queue, Spiders: n.Spiders, Store: n.Store, Scheduler: st,
			ScheduleGroup: se.Group, TargetARN: "arn:crawlq:local:function:crawlq-api", RoleARN: "arn:crawlq:local:role/scheduler"})
		if err != nil {
			return err
		}
		return f(a, st)
	})
}

// callAPI answers req through a; an error answer is the command's error.
func callAPI(ctx context.Context, a *api.API, req map[string]any) (api.Response, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	resp := a.Handle(ctx, b)
	if resp["status"] != "ok" {
		// The command names itself in front of this; the api's action and its "bad request" class
		// are the api's words, not the command's.
		return nil, errors.New(strings.TrimPrefix(fmt.Sprint(resp["message"]), api.ErrBadRequest.Error()+": "))
	}
	return resp, nil
}

// scheduleView is a schedule as list prints it.
type scheduleView struct {
	Name       string          `json:"name"`
	Expression string          `json:"expression"`
	Timezone   string          `json:"timezone"`
	State      string          `json:"state"`
	NextAt     string          `json:"next_at"`
	LastTickAt string          `json:"last_tick_at,omitempty"`
	LastRun    string          `json:"last_run,omitempty"`
	LastError  string          `json:"last_error,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

func scheduleViews(es []cronstore.Entry) []scheduleView {
	out := make([]scheduleView, 0, len(es))
	for _, e := range es {
		v := scheduleView{Name: e.Name, Expression: e.Expression, Timezone: e.Timezone, State: e.State,
			NextAt: e.NextAt.UTC().Format(time.RFC3339), LastRun: e.LastRun, LastError: e.LastError}
		if e.LastTickAt != nil {
			v.LastTickAt = e.LastTickAt.UTC().Format(time.RFC3339)
		}
		if json.Valid([]byte(e.Input)) {
			v.Payload = json.RawMessage(e.Input)
		}
		out = append(out, v)
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
