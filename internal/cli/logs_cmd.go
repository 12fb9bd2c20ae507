package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"crawlq/internal/node"
	"crawlq/internal/runlog"
	"crawlq/internal/spiderstore"
)

// logsCmd is `crawlq logs RUN [--follow]`: a run's log (its command's output).
func logsCmd() *Command {
	return &Command{
		Name: "logs", Synopsis: "print a run's log (--follow: until the run ends)", Usage: "RUN [--follow]", Args: one("RUN (a run id or jobid)"),
		Help: `Prints the log of a run: the stdout and stderr of its command (Scrapy's log for a Scrapy
spider) and crawlq's own lines about the run (the command line, Scrapy's final stats, how it
ended); for a declarative spider, each page that died (its URL, attempts and last error) and each
host pause (its cause, until when) and its lifting, as they happened, and each failed rendered
page with the files of what it looked like (crawlq artifacts RUN); for every run, its state
changes, after its final state its figures with its retries, host pauses and dead pages, and
its monitors' verdict. Each line is printed with the time it happened (UTC). RUN is a run id or
the jobid a Scrapyd client chose. With --follow, prints new lines as
they come until the run has finished. Logs are read from the database (crawlq local, runners
with the default run log) or, with $CRAWLQ_RUN_LOG_GROUP, from that CloudWatch Logs group.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			follow := fs.Bool("follow", false, "keep printing new lines until the run finishes")
			return func(ctx context.Context, args []string) error {
				le, err := readLogsEnv(env)
				if err != nil {
					return err
				}
				return pg.withNode(ctx, "", func(n *node.Node) error {
					id, err := strconv.ParseInt(args[0], 10, 64)
					if err != nil || id <= 0 {
						if id, err = n.Store.JobIDTaken(ctx, args[0]); err != nil {
							return err
						}
						if id == 0 {
							return fmt.Errorf("run %q: %w", args[0], spiderstore.ErrNotFound)
						}
					}
					if _, err := n.Crawler.Get(ctx, id); err != nil {
						return err
					}
					var store runlog.Store = runlog.Postgres{Pool: n.Crawler.Pool()}
					if g := le.RunLogGroup; g != "" {
						cw, err := cloudWatchLog(ctx, g)
						if err != nil {
							return err
						}
						store = cw
					}
					print := func(l runlog.Line) error {
						_, err := fmt.Fprintf(env.Stdout, "%s %s\n", l.At.UTC().Format("2006-01-02 15:04:05.000"), l.Text)
						return err
					}
					done := func(ctx context.Context) (bool, error) {
						if !*follow {
							return true, nil
						}
						r, err := n.Crawler.Get(ctx, id)
						if err != nil {
							return false, err
						}
						return r.Finished(), nil
					}
					return runlog.Follow(ctx, store, id, "", 0, done, print)
				})
			}
		},
	}
}
