// Package cli implements the crawlq command line: one Command per subcommand, each with its own
// flag set and --help text. cmd/crawlq only calls Main.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/awsx"
	"crawlq/internal/crawl"
	"crawlq/internal/db"
	"crawlq/internal/envconfig"
	"crawlq/internal/node"
)

// Env is what a command runs with: its output streams and how to reach the database.
type Env struct {
	Stdout, Stderr io.Writer
	// Getenv reads the environment (os.Getenv by default); tests substitute their own.
	Getenv func(string) string
	// Environ lists the whole environment as KEY=value (os.Environ by default when Getenv is
	// the default too; else none), for the variables read by prefix or handed on (procenv.go).
	Environ func() []string
	// getenvIsOS: Getenv was left to its default.
	getenvIsOS bool
	// API is the api function that --api named (remote.go); empty: $CRAWLQ_API, else the database.
	API string
	// databases are those the command declared (dbFlag), read at its start.
	databases []*database
}

// Command is one command, or one subcommand of a command with Subcommands.
type Command struct {
	Name     string
	Synopsis string // one line for the command list
	Usage    string // the argument summary after the name
	Help     string // longer description for --help
	// Args are the positional arguments it takes (none by default); Main checks them before the
	// command runs.
	Args Args
	// Flags declares the command's flags on fs and returns the function that runs it. Flags
	// and positional arguments may come in any order ("crawlq items 12 --limit 5"); "--" ends
	// the flags.
	Flags func(fs *flag.FlagSet, env *Env) func(ctx context.Context, args []string) error
	// Subcommands, when set, make the first positional argument name one of them
	// ("crawlq spider push FILE"); each has its own flags and Args, and Flags is unused.
	Subcommands []*Command
}

// Args says how many positional arguments a command takes: between Min and Max (Max < 0: any
// number above Min). Name names them in errors ("RUN_ID"). The zero value takes none.
type Args struct {
	Min, Max int
	Name     string
}

// one is exactly one positional argument; some is one or more.
func one(name string) Args  { return Args{Min: 1, Max: 1, Name: name} }
func some(name string) Args { return Args{Min: 1, Max: -1, Name: name} }

// check rejects a wrong number of positional arguments with a usage error.
func (a Args) check(pos []string) error {
	switch {
	case a.Max == 0 && len(pos) > 0:
		return usageErr("unexpected arguments %q: this command takes none", pos)
	case len(pos) < a.Min && a.Max == 1:
		return usageErr("want one %s", a.Name)
	case len(pos) < a.Min:
		return usageErr("want at least %d %s", a.Min, a.Name)
	case a.Max > 0 && len(pos) > a.Max:
		return usageErr("unexpected arguments %q after %s", pos[a.Max:], strings.Join(pos[:a.Max], " "))
	}
	return nil
}

// errUsage marks an error in how the command was called (exit status 2).
var errUsage = errors.New("usage")

func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// commands lists every command; each file of this package adds its own.
func commands() []*Command {
	cs := []*Command{
		migrateCmd(), enqueueCmd(), statsCmd(), jobsCmd(), cancelCmd(), redriveCmd(), retentionCmd(), rescueCmd(),
		demoQueueCmd(), localCmd(), runnerCmd(), spiderCmd(), logsCmd(), artifactsCmd(),
		benchCmd(), deployCmd(), planCmd(), destroyCmd(), costCmd(), imageCmd(), workerCmd(), scheduleCmd(), schedulesCmd(), runsCmd(), runCmd(), cancelRunCmd(), itemsCmd(), demoSiteCmd(), demoCmd(),
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
	env.fillDefaults()
	args, err := takeAPIFlag(args, &env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "crawlq: %v\n", err)
		return 2
	}
	cs := commands()
	args = helpArgs(args)
	if len(args) == 0 || isHelp(args[0]) || args[0] == "help" {
		topUsage(env.Stdout, cs)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	inv, err := parse(cs, args, &env)
	if err == nil {
		err = viaAPI(inv, &env)
	}
	if err != nil {
		return notParsed(err, inv, env.Stderr, cs)
	}
	return ran(inv.name, inv.withDatabases(&env)(ctx, inv.pos), env.Stderr)
}

// fillDefaults sets what a caller left unset: the process's standard output, standard error and
// environment.
func (e *Env) fillDefaults() {
	if e.Stdout == nil {
		e.Stdout = os.Stdout
	}
	if e.Stderr == nil {
		e.Stderr = os.Stderr
	}
	if e.Getenv == nil {
		e.Getenv, e.getenvIsOS = os.Getenv, true
	}
}

// helpArgs reads crawlq help CMD as crawlq CMD --help.
func helpArgs(args []string) []string {
	if len(args) > 1 && args[0] == "help" {
		return []string{args[1], "--help"}
	}
	return args
}

// notParsed is the exit status of a command line that did not parse (err), saying why unless the
// flag package did; inv is the command when it was found.
func notParsed(err error, inv *invocation, stderr io.Writer, cs []*Command) int {
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errFlags):
		return 2 // the flag package printed the error and the usage
	case inv != nil:
		fmt.Fprintf(stderr, "crawlq %s: %v\nRun 'crawlq %s --help' for usage.\n", inv.name, err, inv.name)
		return 2
	}
	fmt.Fprintf(stderr, "crawlq: %v\n\n", err)
	topUsage(stderr, cs)
	return 2
}

// withDatabases is the command's run, reading the database configuration first unless the
// command goes through the api function.
func (inv *invocation) withDatabases(env *Env) func(context.Context, []string) error {
	if inv.remote {
		return inv.run
	}
	return func(ctx context.Context, pos []string) error {
		if err := env.readDatabases(); err != nil {
			return err
		}
		return inv.run(ctx, pos)
	}
}

// ran is the exit status of command name that returned err, saying what went wrong: a run's
// outcome (the command printed the run), a usage error, a database crawlq has not migrated.
func ran(name string, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var oe *outcomeErr
	if errors.As(err, &oe) {
		return oe.code // the command printed what it found; the status says how the run ended
	}
	fmt.Fprintf(stderr, "crawlq %s: %v\n", name, err)
	if missingSchema(err) {
		fmt.Fprintf(stderr, "The database lacks crawlq's tables or functions: run 'crawlq migrate' first (make db does).\n")
	}
	if errors.Is(err, errUsage) {
		fmt.Fprintf(stderr, "Run 'crawlq %s --help' for usage.\n", name)
		return 2
	}
	return 1
}

// missingSchema reports whether err is Postgres saying a table or function does not exist: on a
// database crawlq has not migrated, every command fails that way, and the raw SQLSTATE does not
// say what to do.
func missingSchema(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "42883") // undefined_table, undefined_function
}

// invocation is a parsed command line: the command to run (a leaf: a command without
// subcommands, or a subcommand), its flag set (parsed) and its positional arguments (checked).
type invocation struct {
	name string // "items", "spider push"
	cmd  *Command
	fs   *flag.FlagSet
	run  func(ctx context.Context, args []string) error
	pos  []string
	// remote: run goes through the api function (viaAPI), so the database is not read.
	remote bool
}

// errFlags says the flag package rejected the command line and already said why.
var errFlags = errors.New("bad flags")

// parse finds the command args name and parses its flags and positional arguments. Asked-for
// help is printed to env.Stdout and returned as flag.ErrHelp.
func parse(cs []*Command, args []string, env *Env) (*invocation, error) {
	cmd := find(cs, args[0])
	if cmd == nil {
		return nil, usageErr("unknown command %q", args[0])
	}
	name, rest := cmd.Name, args[1:]
	if len(cmd.Subcommands) > 0 {
		i := subcommandIndex(cmd, rest)
		if i < 0 {
			if slices.ContainsFunc(rest, isHelp) {
				groupUsage(env.Stdout, cmd)
				return nil, flag.ErrHelp
			}
			groupUsage(env.Stderr, cmd)
			if len(rest) == 0 {
				return nil, errFlags
			}
			return nil, usageErr("%s: unknown subcommand %q", cmd.Name, rest[0])
		}
		sub := cmd.Subcommands[i]
		// Flags may also stand before the subcommand's name ("crawlq spider --database-url U list").
		at := slices.Index(rest, sub.Name)
		name, cmd, rest = cmd.Name+" "+sub.Name, sub, append(slices.Clone(rest[:at]), rest[at+1:]...)
	}
	inv := &invocation{name: name, cmd: cmd, fs: flag.NewFlagSet("crawlq "+name, flag.ContinueOnError)}
	inv.fs.SetOutput(env.Stderr)
	inv.run = cmd.Flags(inv.fs, env)
	inv.fs.Usage = func() {
		w := inv.fs.Output()
		fmt.Fprintf(w, "Usage: crawlq %s %s\n\n%s\n", name, cmd.Usage, strings.TrimSpace(cmd.Help))
		if _, ok := remoteCmds[name]; ok {
			fmt.Fprintf(w, "\n%s\n", apiCommandHelp)
		}
		if hasFlags(inv.fs) {
			fmt.Fprintln(w, "\nFlags:")
			inv.fs.PrintDefaults()
		}
	}
	for _, a := range rest {
		if a == "--" {
			break
		}
		if isHelp(a) {
			inv.fs.SetOutput(env.Stdout) // asked-for help is output, not an error
		}
	}
	pos, err := parseInterleaved(inv.fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		return inv, err
	}
	if err != nil {
		return inv, errFlags
	}
	if err := cmd.Args.check(pos); err != nil {
		return inv, err
	}
	inv.pos = pos
	return inv, nil
}

func find(cs []*Command, name string) *Command {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "--h" }

// subcommandIndex finds which of cmd's subcommands args names: its first argument that is not
// a flag or a flag's value. Whether a flag takes a value is read from the subcommands' flags.
func subcommandIndex(cmd *Command, args []string) int {
	boolFlag := map[string]bool{"h": true, "help": true}
	for _, sub := range cmd.Subcommands {
		fs := flag.NewFlagSet(sub.Name, flag.ContinueOnError)
		sub.Flags(fs, &Env{})
		fs.VisitAll(func(f *flag.Flag) {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				boolFlag[f.Name] = true
			}
		})
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return -1
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			for j, sub := range cmd.Subcommands {
				if sub.Name == a {
					return j
				}
			}
			return -1
		}
		if name := strings.TrimLeft(a, "-"); !strings.Contains(name, "=") && !boolFlag[name] {
			i++ // the flag's value
		}
	}
	return -1
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
	fmt.Fprintln(w, "\nUsage: crawlq <command> [args] [flags]\n\nCommands:")
	for _, c := range cs {
		fmt.Fprintf(w, "  %-12s %s\n", c.Name, c.Synopsis)
	}
	fmt.Fprintln(w, "\nRun 'crawlq <command> --help' for a command's flags. Flags may follow the arguments.")
	fmt.Fprintln(w, "The database is DATABASE_URL (or --database-url); see 'crawlq migrate --help'.")
	fmt.Fprintln(w, "\n"+apiHelp)
}

// groupUsage is the help of a command with subcommands.
func groupUsage(w io.Writer, c *Command) {
	fmt.Fprintf(w, "Usage: crawlq %s <subcommand> [args] [flags]\n\n%s\n\nSubcommands:\n", c.Name, strings.TrimSpace(c.Help))
	for _, sub := range c.Subcommands {
		fmt.Fprintf(w, "  %-10s %s\n", sub.Name, sub.Synopsis)
	}
	fmt.Fprintf(w, "\nRun 'crawlq %s <subcommand> --help' for its flags.\n", c.Name)
}

// writeJSON prints v as indented JSON: every --json output goes through it.
func writeJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

// database is how a command reaches PostgreSQL: --database-url, else $DATABASE_URL, else the
// CRAWLQ_DB_* variables of envconfig.DB (RDS Proxy with IAM auth: how the ECS runner task, whose
// environment Terraform sets, reaches it).
type database struct {
	url *string
	env *Env
	// wait, when set, is how long open waits out a database that refuses connections for a
	// reason that passes (db.OpenWaiting): the long-running commands set it.
	wait time.Duration
	// vars are the database variables, read once at the command's start (read).
	vars envconfig.DBVars
}

// commandMaxConns is a command's pool size (crawlq worker's and runner's too) when
// CRAWLQ_DB_MAX_CONNS does not set it.
const commandMaxConns = 20

// workerConnectWait is how long crawlq worker and crawlq runner wait at start for a database that
// refuses connections (restarting, or at its connection limit) before they exit.
const workerConnectWait = 5 * time.Minute

// dbFlag declares --database-url on fs; the command's database variables are read when it starts
// (readDatabases), before it does anything else.
func dbFlag(fs *flag.FlagSet, env *Env) *database {
	d := &database{url: fs.String("database-url", "", "PostgreSQL URL (default $DATABASE_URL, else the CRAWLQ_DB_* variables)"), env: env}
	env.databases = append(env.databases, d)
	return d
}

// read reads the database variables into d.vars (envconfig.ReadDB, no network I/O), --database-url
// standing for DATABASE_URL, so CRAWLQ_DB_EXEC_MODE is honoured (and a bad value refused)
// whichever way the database is named.
func (d *database) read() error {
	getenv := d.env.Getenv
	if *d.url != "" {
		getenv = func(k string) string {
			if k == "DATABASE_URL" {
				return *d.url
			}
			return d.env.Getenv(k)
		}
	}
	var err error
	d.vars, err = envconfig.ReadDB(envconfig.New(getenv), commandMaxConns)
	return err
}

// readDatabases reads the variables of every database the command declared.
func (e *Env) readDatabases() error {
	for _, d := range e.databases {
		if err := d.read(); err != nil {
			return err
		}
	}
	return nil
}

// open opens a pool from the variables read at the start; the caller closes it. Commands use
// withPool or withNode.
func (d *database) open(ctx context.Context) (*pgxpool.Pool, error) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second+d.wait)
	defer cancel()
	var awsCfg aws.Config
	if d.vars.UsesAWS() {
		var err error
		if awsCfg, err = awsx.Load(octx); err != nil {
			return nil, err
		}
	}
	dc, err := d.vars.Resolve(octx, awsCfg)
	if err != nil {
		return nil, noDatabaseHint(err)
	}
	if d.wait > 0 {
		return db.OpenWaiting(octx, dc, d.wait, slog.Default())
	}
	return db.Open(octx, dc)
}

// noDatabaseHint adds to db.ErrNoDatabase what a user on a fresh checkout does next: the
// variables alone do not say that --database-url exists or how to get a local database.
func noDatabaseHint(err error) error {
	if errors.Is(err, db.ErrNoDatabase) {
		return fmt.Errorf("%w, or pass --database-url (a throwaway local one: export DATABASE_URL=$(make -s db) in the crawlq source tree)", err)
	}
	return err
}

// withPool runs f with an open pool and closes it after.
func (d *database) withPool(ctx context.Context, f func(*pgxpool.Pool) error) error {
	pool, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	return f(pool)
}

// withNode runs f with a node (not running: its crawler, queue, store and pipeline) on an
// open pool, with the built-in spiders and those in dir.
func (d *database) withNode(ctx context.Context, dir string, f func(*node.Node) error) error {
	return d.withPool(ctx, func(pool *pgxpool.Pool) error {
		n, err := node.New(node.Config{Pool: pool, SpiderDir: dir, Logger: warningsOnly(slog.Default())})
		if err != nil {
			return err
		}
		defer n.Pipeline.Close(ctx)
		return f(n)
	})
}
