// Package cli implements the crawlq command line: one Command per subcommand, each with its own
// flag set and --help text. cmd/crawlq only calls Main.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/awsx"
	"crawlq/internal/crawl"
	"crawlq/internal/db"
)

// Env is what a command runs with: its output streams and how to reach the database.
type Env struct {
	Stdout, Stderr io.Writer
	// Getenv reads the environment (os.Getenv by default); tests substitute their own.
	Getenv func(string) string
}

// Command is one subcommand.
type Command struct {
	Name     string
	Synopsis string // one line for the command list
	Usage    string // the argument summary after the name
	Help     string // longer description for --help
	// Flags declares the command's flags on fs and returns the function that runs it.
	Flags func(fs *flag.FlagSet, env *Env) func(ctx context.Context, args []string) error
	// Subcommands says the first argument names a subcommand that parses its own flags: the
	// command's flags then stand before it, not anywhere.
	Subcommands bool
}

// errUsage marks an error in how the command was called (exit status 2).
var errUsage = errors.New("usage")

// noArgs rejects positional arguments for commands that take none.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usageErr("unexpected arguments %q", args)
	}
	return nil
}

func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// commands lists every subcommand; each file of this package adds its own.
func commands() []*Command {
	cs := []*Command{
		migrateCmd(), enqueueCmd(), statsCmd(), jobsCmd(), cancelCmd(), redriveCmd(), retentionCmd(), rescueCmd(),
		demoQueueCmd(), localCmd(), runnerCmd(), spiderCmd(), logsCmd(),
		benchCmd(), deployCmd(), planCmd(), destroyCmd(), costCmd(), imageCmd(), workerCmd(), scheduleCmd(), runsCmd(), runCmd(), cancelRunCmd(), itemsCmd(), demoSiteCmd(), demoCmd(),
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	return cs
}

// Exit statuses of commands that report how a run ended (crawlq run): 0 succeeded (or still live).
const (
	exitIncomplete = 3
	exitFailed     = 4
	exitCancelled  = 5
)

// outcomeErr carries the exit status for a run that did not succeed; its command already printed
// the run.
type outcomeErr struct{ code int }

func (e *outcomeErr) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// runOutcome is the error that makes a command exit with the status for run state st, or nil.
func runOutcome(st string) error {
	switch st {
	case crawl.StateIncomplete:
		return &outcomeErr{exitIncomplete}
	case crawl.StateFailed:
		return &outcomeErr{exitFailed}
	case crawl.StateCancelled:
		return &outcomeErr{exitCancelled}
	}
	return nil
}

// Main runs the command line args (without the program name) and returns the exit status.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Stdout == nil {
		env.Stdout = os.Stdout
	}
	if env.Stderr == nil {
		env.Stderr = os.Stderr
	}
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	cs := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		topUsage(env.Stdout, cs)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var cmd *Command
	for _, c := range cs {
		if c.Name == args[0] {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprintf(env.Stderr, "crawlq: unknown command %q\n\n", args[0])
		topUsage(env.Stderr, cs)
		return 2
	}
	fs := flag.NewFlagSet("crawlq "+cmd.Name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	run := cmd.Flags(fs, &env)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: crawlq %s %s\n\n%s\n", cmd.Name, cmd.Usage, strings.TrimSpace(cmd.Help))
		if hasFlags(fs) {
			fmt.Fprintln(w, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			fs.SetOutput(env.Stdout) // asked-for help is output, not an error
		}
	}
	var pos []string
	var err error
	if cmd.Subcommands {
		if err = fs.Parse(args[1:]); err == nil {
			pos = fs.Args()
		}
	} else {
		pos, err = parseInterleaved(fs, args[1:])
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := run(ctx, pos); err != nil {
		var oe *outcomeErr
		if errors.As(err, &oe) {
			return oe.code // the command printed what it found; the status says how the run ended
		}
		fmt.Fprintf(env.Stderr, "crawlq %s: %v\n", cmd.Name, err)
		if errors.Is(err, errUsage) {
			fmt.Fprintf(env.Stderr, "Run 'crawlq %s --help' for usage.\n", cmd.Name)
			return 2
		}
		return 1
	}
	return 0
}

// parseInterleaved parses flags wherever they stand among the positional arguments
// (`crawlq items 12 --limit 5` as well as `crawlq items --limit 5 12`), as users expect; after
// "--" everything is positional. It returns the positional arguments in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

func topUsage(w io.Writer, cs []*Command) {
	fmt.Fprintln(w, "crawlq schedules and runs web-scraping spiders on a PostgreSQL job queue.")
	fmt.Fprintln(w, "\nUsage: crawlq <command> [flags] [args]\n\nCommands:")
	for _, c := range cs {
		fmt.Fprintf(w, "  %-12s %s\n", c.Name, c.Synopsis)
	}
	fmt.Fprintln(w, "\nRun 'crawlq <command> --help' for a command's flags.")
	fmt.Fprintln(w, "The database is DATABASE_URL (or --database-url); see 'crawlq migrate --help'.")
}

// dbFlagOpen opens a pool on url.
func dbFlagOpen(ctx context.Context, url string) (*pgxpool.Pool, error) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return db.Open(octx, db.Config{URL: url, MaxConns: 20})
}

// dbFlag declares --database-url and returns a function that opens the pool. Without a URL,
// the CRAWLQ_DB_* variables of db.FromEnv (RDS Proxy with IAM auth) are used: that is how the
// ECS runner task, whose environment Terraform sets, reaches the database.
func dbFlag(fs *flag.FlagSet, env *Env) func(ctx context.Context) (*pgxpool.Pool, error) {
	url := fs.String("database-url", "", "PostgreSQL URL (default $DATABASE_URL, else the CRAWLQ_DB_* variables)")
	return func(ctx context.Context) (*pgxpool.Pool, error) {
		u := *url
		if u == "" {
			u = env.Getenv("DATABASE_URL")
		}
		if u == "" && env.Getenv("CRAWLQ_DB_HOST") != "" {
			octx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			awsCfg, err := awsx.Load(octx)
			if err != nil {
				return nil, err
			}
			dc, err := db.FromEnv(octx, env.Getenv, awsCfg)
			if err != nil {
				return nil, err
			}
			dc.MaxConns = 20
			return db.Open(octx, dc)
		}
		if u == "" {
			return nil, db.ErrNoDatabase
		}
		return dbFlagOpen(ctx, u)
	}
}
